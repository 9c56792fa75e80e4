"""`seqline ARGS` as a test runs it: a process of its own, forked from one that has imported
the command line and what a run needs already.

A `seqline` process spends about 0.55 CPU-seconds importing Typer, Arrow, SQLAlchemy and the
stages before it does anything, and the suite runs hundreds of them on two cores (decision
48). Here one process per pytest worker imports them once and forks a child per command. The
child is a real process: the test's arguments, environment, working folder and pipes, its
own pid and exit status, and it enters the console script's own entry point
(`seqline.orchestration.cli:main_command`), so what it prints, writes and exits with is what
`seqline` would. What it cannot show is the console script's own start-up (its imports, the
fork server it starts before them, `python -m seqline`): the start-up, signal and terminal
tests run real console scripts for that.

Example: `seqline("runs", "list", "--root", str(root), cwd=folder)` -> CompletedProcess.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import locale
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path

__all__ = ["EXE", "seqline"]

EXE = str(Path(sys.executable).parent / "seqline")  # the console script
REPO = Path(__file__).resolve().parents[1]

# What `seqline run` of a small local pipeline imports (not TensorFlow, Beam or Ray, which
# start threads on import, and which few tests need): they pull in Arrow, NumPy, SQLAlchemy,
# Alembic, pydantic and Rich.
PRELOAD = ("seqline.orchestration.cli.main", "seqline.orchestration.cli.progress",
           "seqline.orchestration.line", "seqline.orchestration.runners.local",
           "seqline.orchestration.store", "seqline.orchestration.verify",
           "seqline.components.ingest", "seqline.components.preprocess",
           "seqline.components.tfrecord_write", "seqline.components.batching")

_lock = threading.Lock()
_forker: _Forker | None = None


def seqline(*args: str, cwd: Path | str | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 300, input: str | None = None  # noqa: A002  # subprocess's name
            ) -> subprocess.CompletedProcess[str]:
    """What `subprocess.run([EXE, *args], capture_output=True, text=True, cwd=cwd, env=env,
    timeout=timeout, input=input)` returns, from a forked child; stdin is empty unless
    `input` is given. Raises subprocess.TimeoutExpired (the child killed) as that would."""
    global _forker
    with _lock:  # one command at a time per test process, as subprocess.run would block
        if _forker is None or _forker.process.poll() is not None:
            _forker = _Forker()
        return _forker.run([str(a) for a in args], Path(cwd or os.getcwd()),
                           dict(os.environ if env is None else env), timeout, input)


class _Forker:
    """The process that forks the commands, and the socket to it."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"from tests.commands import serve; serve({theirs.fileno()})"],
            # stdout not a terminal, so that a command's is block-buffered, as in a pipe; its
            # stderr is the test's, for an import that fails
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()])
        theirs.close()
        self.socket = ours
        atexit.register(self.process.kill)

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float,
            input: str | None) -> subprocess.CompletedProcess[str]:  # noqa: A002
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        request = json.dumps({"args": args, "cwd": str(cwd), "env": env}).encode()
        try:
            socket.send_fds(self.socket, [request], [stdin_r, out_w, err_w])
        finally:
            for fd in (stdin_r, out_w, err_w):
                os.close(fd)
        pid = json.loads(self.socket.recv(4096))["pid"]
        with os.fdopen(stdin_w, "wb") as stdin:
            if input:  # the child reads it, or exits without; a closed pipe is not an error
                with contextlib.suppress(BrokenPipeError):
                    stdin.write(input.encode())
        try:
            out, err = _read_both(out_r, err_r, time.monotonic() + timeout)
        except subprocess.TimeoutExpired:
            os.kill(pid, signal.SIGKILL)
            json.loads(self.socket.recv(4096))  # its status, once the forker reaped it
            raise subprocess.TimeoutExpired([EXE, *args], timeout) from None
        status = json.loads(self.socket.recv(4096))["status"]
        return subprocess.CompletedProcess([EXE, *args], status, _text(out), _text(err))


def _read_both(out_fd: int, err_fd: int, deadline: float) -> tuple[bytes, bytes]:
    """Both pipes to their ends (every process holding them closed them), as communicate()."""
    got = {out_fd: bytearray(), err_fd: bytearray()}
    with selectors.DefaultSelector() as selector:
        for fd in got:
            selector.register(fd, selectors.EVENT_READ)
        try:
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired("seqline", 0)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        got[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        finally:
            for fd in got:
                os.close(fd)
    return bytes(got[out_fd]), bytes(got[err_fd])


def _text(data: bytes) -> str:
    """As subprocess's text mode decodes a pipe: the locale's encoding, universal newlines."""
    decoded = data.decode(locale.getpreferredencoding(False))
    return decoded.replace("\r\n", "\n").replace("\r", "\n")


def serve(fd: int) -> None:
    """The forker's loop: import once, then per request fork a child that becomes `seqline
    ARGS`; say its pid, reap it, say its exit status. Ends when the test process does."""
    # A console script's first path is its own folder; `-c` made it the working folder, from
    # which a command (after its chdir) would import what the real one cannot.
    sys.path[0] = os.path.dirname(EXE)
    for name in PRELOAD:
        importlib.import_module(name)
    # A fork copies only the forking thread: a thread started by an import would be missing,
    # with whatever lock it held, in every command.
    assert threading.active_count() == 1, threading.enumerate()
    sock = socket.socket(fileno=fd)
    while True:
        try:
            request, fds, _, _ = socket.recv_fds(sock, 1 << 20, 3)
        except ConnectionError:
            return
        if not request:
            return
        pid = os.fork()
        if pid == 0:
            sock.close()
            _become(json.loads(request), fds)
        for received in fds:
            os.close(received)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode())


def _become(request: dict, fds: list[int]) -> None:
    """In the forked child: the request's stdio, folder, environment and arguments, then the
    console script's entry point, which exits the process (seqline.orchestration.cli._exit)."""
    try:
        for target, received in enumerate(fds):
            os.dup2(received, target)
            os.close(received)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [EXE, *request["args"]]
        for name in [n for n in sys.modules if n == "tests" or n.startswith("tests.")]:
            del sys.modules[name]  # this module's package, which a console script has not
        from seqline.orchestration.cli import main_command

        main_command()
    except SystemExit as done:  # not raised by main_command, which exits itself
        os._exit(done.code if isinstance(done.code, int) else 1)
    except BaseException:  # as Python reports an uncaught exception: a traceback, status 1
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)

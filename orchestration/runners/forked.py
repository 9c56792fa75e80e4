"""Worker processes forked from a fork server that imported their modules once, for the local
runner's pool and Beam's SDK workers alike."""

from __future__ import annotations

import contextlib
import io
import os
import select
import tempfile
import threading
import time
from collections.abc import Callable
from importlib.util import find_spec
from multiprocessing import (
    connection,
    context,
    forkserver,
    popen_forkserver,
    process,
    reduction,
    spawn,
    util,
)
from typing import Any

from seqline.orchestration.processes import SOCKET_PATH_MAX, pid_alive, scratch_dir

__all__ = ["BEAM_PRELOAD", "PRELOAD", "WorkerContext", "exit_with", "server_pid",
           "start_early", "workers_preload"]

# Imported once by the fork server, so each worker starts with them loaded (tfx-bsl's coders
# take about 1 s and 230 MB to import) instead of importing them on its first block. pandas
# too, where installed: pyarrow imports it the first time it converts a NumPy array
# (`pa.array(np_array)` checks for pandas' categoricals), which most user functions do, and
# that cost 0.2 s of CPU in each worker's first block. fsspec's utils: a worker reading a
# range asks them what a file is compressed with (30 ms in its first range).
PRELOAD = ["seqline.pipeline.tasks", "pyarrow", "seqline.pipeline.tfrecord",
           "tfx_bsl.coders.example_coder", "seqline.orchestration.runners.local_worker",
           "seqline.components", "fsspec.utils", *(["pandas"] if find_spec("pandas") else [])]
# Beam's SDK workers' (beam_workers.py): Beam's harness and seqline's transforms, then the
# same. Named here, where knowing them imports no Beam: `seqline run --runner beam` starts
# their server first, as a local run starts the one above.
BEAM_PRELOAD = ["apache_beam.runners.worker.sdk_worker_main",
                "seqline.orchestration.runners.beam_transforms", *PRELOAD]

# Preloaded first by every server: it exits without tearing its modules down (see there).
SERVER_EXIT = "seqline.orchestration.runners.server_exit"

# What a new process is told about the driver's main module: run it again as __mp_main__
# (a script's path, or a module's name for `python -m`), so that functions defined in it can
# be unpickled. Workers never need it (user functions are named `module:function` and
# imported), and a script without `if __name__ == "__main__":` would run its pipeline again
# in every worker.
MAIN_MODULE_KEYS = ("init_main_from_path", "init_main_from_name")

# How long a fork server may take to say a new worker's pid. A new server imports its preload
# first (Beam's: 1.4 CPU-s here, so seconds, or many more on a machine loaded many times
# over); one that says nothing for this long is stuck (stopped, or out of memory): replaced.
ANSWER_SECONDS = 180.0


class _PopenWithoutMain(popen_forkserver.Popen):
    """Starts a forkserver worker as CPython does (popen_forkserver.Popen._launch, unchanged
    in 3.11-3.14), but with the main module left out of its preparation data: the worker
    never imports the caller's script, as Ray's workers never import the driver's.

    A server that cannot fork the worker is replaced by a new one, once: it was killed and
    someone else reaped it (multiprocessing then raises ChildProcessError for ever instead of
    starting another), its socket was removed with its temp folder, it died while asked, or it
    said nothing for ANSWER_SECONDS. A second failure is raised: no worker was started.
    """

    def _launch(self, process_obj: Any) -> None:
        prep_data = spawn.get_preparation_data(process_obj._name)
        for key in MAIN_MODULE_KEYS:
            prep_data.pop(key, None)
        buf = io.BytesIO()
        context.set_spawning_popen(self)
        try:
            reduction.dump(prep_data, buf)
            reduction.dump(process_obj, buf)
        finally:
            context.set_spawning_popen(None)
        for last in (False, True):
            # One ask at a time. A thread that took a server which another thread then let
            # go (_replace) would find it looking new, and multiprocessing would start it
            # again: a second server, whose workers nobody watches as this module's.
            with _asking:
                server = _server(process_obj.preload)
                try:
                    self._ask(server, buf)
                    return
                except (OSError, EOFError):  # ChildProcessError, FileNotFoundError, Timeout
                    if self.finalizer is not None:  # this attempt's pipes (a second: none)
                        self.finalizer()
                    _replace(process_obj.preload, server)
                    if last:
                        raise

    def _ask(self, server: forkserver.ForkServer, buf: io.BytesIO) -> None:
        # typeshed leaves out multiprocessing's private names (_fds, close_fds) used here.
        self.sentinel, w = server.connect_to_new_process(self._fds)  # type: ignore[attr-defined]
        # The data pipe's write end, kept: the child sees its parent die when it closes.
        _parent_w = os.dup(w)
        self.finalizer = util.Finalize(self, util.close_fds,  # type: ignore[attr-defined]
                                       (_parent_w, self.sentinel))
        with open(w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        if not connection.wait([self.sentinel], ANSWER_SECONDS):  # (poll: any fd number)
            raise TimeoutError(f"the fork server said nothing for {ANSWER_SECONDS:.0f} s")
        self.pid = forkserver.read_signed(self.sentinel)


class _WorkerProcess(context.ForkServerProcess):
    preload: tuple[str, ...]  # names its fork server

    @staticmethod
    def _Popen(process_obj: Any) -> _PopenWithoutMain:  # noqa: N802 - multiprocessing's name
        return _PopenWithoutMain(process_obj)


class WorkerContext(context.ForkServerContext):
    """The forkserver context, whose processes never run the caller's `__main__`, forked from
    a server of their own that imported `preload` first.

    forkserver: workers fork from a clean server, not from a driver that may hold TensorFlow,
    gRPC or Ray threads (forking those can deadlock). One server per preload (not Python's
    one per process): the local runner's workers and Beam's SDK workers each start from a
    server that imported what they need, whichever started first in a process that runs
    both (a notebook, the test suite's workers).
    """

    def __init__(self, preload: list[str]) -> None:
        super().__init__()
        self.preload = tuple(preload)

    def Process(self, *args: Any, **kwargs: Any) -> _WorkerProcess:  # type: ignore[override]  # noqa: N802 - multiprocessing's name
        worker = _WorkerProcess(*args, **kwargs)
        worker.preload = self.preload
        return worker


_servers: dict[tuple[str, ...], forkserver.ForkServer] = {}
_lock = threading.Lock()
_asking = threading.Lock()  # held while a server is asked for a worker: _PopenWithoutMain


def _server(preload: tuple[str, ...]) -> forkserver.ForkServer:
    with _lock:
        if preload not in _servers:
            _sockets_fit()
            _servers[preload] = forkserver.ForkServer()
            _servers[preload].set_forkserver_preload([SERVER_EXIT, *preload])
        return _servers[preload]


# A fork server's socket: multiprocessing's temp folder (made once per process in $TMPDIR,
# "pymp-" and 8 characters), then "/listener-" and 8 more.
LISTENER = "/listener-12345678"


def _sockets_fit() -> None:
    """Under a long $TMPDIR (a CI's workspace; a test's temp folder) the fork server's socket
    path passes the 107 bytes a socket's may have, and no worker starts ("OSError: AF_UNIX
    path too long"): its folder goes under /tmp then, as Ray's sockets do."""
    config = process.current_process()._config  # type: ignore[attr-defined]
    folder = config.get("tempdir") or os.path.join(tempfile.gettempdir(), "pymp-12345678")
    if len(folder) + len(LISTENER) > SOCKET_PATH_MAX:
        config["tempdir"] = str(scratch_dir("workers", "sockets", socket_depth=len(LISTENER)))


def _replace(preload: tuple[str, ...], broken: forkserver.ForkServer) -> None:
    """Start the next worker of `preload` from a new server, and let `broken` go: without its
    driver's end of the "alive" pipe it exits once its own workers have, and is reaped."""
    with _lock:  # once: two threads closing one fd number could close the next server's
        if _servers.get(preload) is broken:  # (another thread may have replaced it already)
            del _servers[preload]
        alive, pid = broken._forkserver_alive_fd, broken._forkserver_pid  # type: ignore[attr-defined]
        broken._forkserver_alive_fd = broken._forkserver_pid = None  # type: ignore[attr-defined]
        if alive is not None:
            with contextlib.suppress(OSError):
                os.close(alive)
    # its socket's folder may have gone with it (a temp folder cleaned up): the next needs one
    os.makedirs(util.get_temp_dir(), exist_ok=True)  # type: ignore[attr-defined]
    if pid is not None:
        threading.Thread(target=_reap, args=(pid,), daemon=True,
                         name="seqline-fork-server-reap").start()


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # someone else reaped it
        os.waitpid(pid, 0)


def workers_preload(runner: str, beam_mode: str = "multi_processing",
                    beam_options: list[str] | tuple[str, ...] = ()) -> list[str] | None:
    """The preload of the fork server a run's workers fork from: the local runner's, or
    Beam's FnApiRunner's in multi_processing mode (`beam_options` as `--beam-option` takes
    them, KEY=VALUE); None where none is forked here (Ray starts its own workers; Beam's other
    modes run threads, its other runners run elsewhere)."""
    if runner == "local":
        return PRELOAD
    on_fn_api_runner = not any(o.split("=", 1)[0] == "runner" for o in beam_options)
    if runner == "beam" and beam_mode == "multi_processing" and on_fn_api_runner:
        return BEAM_PRELOAD
    return None


def start_early(preload: list[str]) -> None:
    """Start the fork server of `preload` now: it imports them in its own process while the
    caller goes on (`seqline run` importing the rest of seqline), so the first worker forks
    at once instead of after them. A server nobody asks for a worker exits with its caller."""
    _server(tuple(preload)).ensure_running()


def server_pid(preload: list[str]) -> int | None:
    """The pid of the fork server that forks workers of `preload` in this process, if any has
    been started (for tests and diagnostics)."""
    with _lock:
        server = _servers.get(tuple(preload))
    return None if server is None else server._forkserver_pid  # type: ignore[attr-defined]


def exit_with(driver: int, then: Callable[[], object] | None = None) -> None:
    """Return never: wait for the driver's exit, then `then()`, then exit (a worker's thread:
    nothing else stops a worker whose driver was SIGKILLed)."""
    try:
        # A pidfd becomes readable when that process exits, and (unlike a pid) it cannot
        # come to name another process later.
        watched = os.pidfd_open(driver)
        select.select([watched], [], [])
    except ProcessLookupError:  # gone already
        pass
    except OSError:  # no pidfd (Linux < 5.3): ask every second instead
        while pid_alive(driver):
            time.sleep(1)
    if then is not None:
        then()
    os._exit(1)

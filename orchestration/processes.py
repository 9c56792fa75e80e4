"""Processes on this machine: is one alive, and scratch folders that outlive no driver."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import psutil

from seqline.pipeline.errors import Cancelled

__all__ = ["pid_alive", "scratch_dir", "sigterm_cancels", "stop_children"]


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs (a zombie counts as dead).

    Args:
        pid: a process id on this machine.

    Returns:
        False when no such process exists or it has exited unreaped; True otherwise.
    """
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists, under another user
        return True


# A Unix socket's path holds at most 107 bytes (sun_path), and an engine may put sockets
# deep under its scratch folder: Ray's are at SCRATCH/session_<date>_<time>_<us>_<pid>/
# sockets/plasma_store, about 65 bytes past it.
SOCKET_PATH_MAX = 107


def scratch_dir(kind: str, label: str = "", socket_depth: int = 0) -> Path:
    """A new temporary folder for an engine's files while this driver runs.

    Its name carries the driver's pid: a driver that is killed cannot remove its folders, so
    each new one first removes those of drivers that are gone.

    Args:
        kind: the engine ("beam", "ray", "workers").
        label: a word to tell folders apart (a stage name), if any.
        socket_depth: how many bytes past the folder the engine's socket paths reach. When
            the temp folder ($TMPDIR; macOS's /var/folders/...) is too long for them, the
            folder goes under /tmp instead, and the engine starts rather than failing on
            "AF_UNIX path length cannot exceed 107 bytes".

    Returns:
        The folder, created.
    """
    base = Path(tempfile.gettempdir())
    name_length = len(f"/seqline-{kind}-{os.getpid()}-{label}-12345678")
    if socket_depth and len(str(base)) + name_length + socket_depth > SOCKET_PATH_MAX:
        base = Path("/tmp")
    for folder in base.glob(f"seqline-{kind}-*"):
        pid = folder.name.removeprefix(f"seqline-{kind}-").split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
    suffix = f"{label}-" if label else ""
    return Path(tempfile.mkdtemp(prefix=f"seqline-{kind}-{os.getpid()}-{suffix}", dir=base))


def stop_children(command_part: str, timeout: float = 1.0) -> set[int]:
    """Terminate this process's descendants whose command line contains `command_part`,
    then kill those still running after `timeout` seconds.

    Args:
        command_part: e.g. "sdk_worker_main" for Beam's SDK worker processes.
        timeout: how long they get to exit after SIGTERM.

    Returns:
        The pids of the processes stopped.
    """
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if command_part in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # exited meanwhile
            continue
    for child in found:
        with contextlib.suppress(psutil.NoSuchProcess):  # it may exit on its own meanwhile
            child.terminate()
    _, alive = psutil.wait_procs(found, timeout=timeout)
    for child in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    return {child.pid for child in found}


@contextmanager
def sigterm_cancels() -> Iterator[None]:
    """SIGTERM (systemd, Kubernetes, `kill`) cancels the run as Ctrl-C does.

    Only from the main thread, where Python delivers signals; elsewhere (a run inside a
    user's thread) the default stays.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def cancel(signum: int, frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup
        raise Cancelled(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, cancel)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

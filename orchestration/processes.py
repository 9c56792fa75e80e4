"""Processes on this machine: is one alive, and scratch folders that outlive no driver."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

from seqline.pipeline.errors import Cancelled

__all__ = ["pid_alive", "pid_runs", "remove_scratch", "raise_if_cancelled", "scratch_dir",
           "signals_cancel", "tidy_scratch"]


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs (a zombie counts as dead).

    Args:
        pid: a process id on this machine.

    Returns:
        False when no such process exists or it has exited unreaped; True otherwise.
    """
    import psutil  # here, not at the top: 20 ms of every fork server's preload

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists, under another user
        return True


def pid_runs(pid: int, argument: str) -> bool:
    """Whether process `pid` of this host still runs *and* is the one that was started: one
    of its command-line arguments is `argument` (a run's id, after `--run-id`).

    A pid is reused once its process is reaped (pid_max is 32768 here, and a soak starts
    thousands of processes): a live pid alone does not say that the run it was recorded for
    still goes. A process whose command line cannot be read is taken to be it (never call a
    live run dead).

    Example: (the pid of `seqline run … --run-id quick-1`, "quick-1") -> True; the same pid
    reused by a Ray worker -> False.
    """
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return argument in process.cmdline()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


# A Unix socket's path holds at most 107 bytes (sun_path), and an engine may put sockets
# deep under its scratch folder: Ray's are at SCRATCH/session_<date>_<time>_<us>_<pid>/
# sockets/plasma_store, about 65 bytes past it.
SOCKET_PATH_MAX = 107


# A folder's mtime against a live process's start. psutil derives the start from the boot
# time, which /proc gives in whole seconds and moves when the clock is stepped (NTP): a live
# creator must never seem younger than its folder. A minute covers both; a pid reused within
# it only keeps a dead driver's folder a while longer (it takes ~32768 new processes).
START_CLOCK_SLACK_S = 60.0
# The engines' kinds (RayRunner, ray_train, BeamRunner, LocalRunner): a folder of another name
# in /tmp is never taken for a driver's, whatever digits it holds.
SCRATCH_NAME = re.compile(r"seqline-(?:beam|ray|ray-train|workers)-(\d+)-")
_made: set[Path] = set()  # this process's scratch folders not yet removed (see _remove_made)
_registered: list[object] = []  # the atexit handler, once registered


def scratch_dir(kind: str, label: str = "", socket_depth: int = 0) -> Path:
    """A new temporary folder for an engine's files while this driver runs.

    Its name carries the driver's pid. The driver removes it when it closes its engine, and
    at exit if it could not (an engine that failed to start, a SIGTERM turned into an exit).
    A driver that is SIGKILLed can remove nothing: each new folder first removes those of
    drivers that are gone (`tidy_scratch`), as the scheduler does once a minute.

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
    tidy_scratch()
    suffix = f"{label}-" if label else ""
    folder = Path(tempfile.mkdtemp(prefix=f"seqline-{kind}-{os.getpid()}-{suffix}", dir=base))
    if not _registered:
        _registered.append(atexit.register(_remove_made))
    _made.add(folder)
    return folder


def tidy_scratch(folders: Iterable[Path] | None = None) -> list[Path]:
    """Remove the scratch folders (`seqline-KIND-PID-…`) of drivers that are gone.

    Gone: no process has the pid, or the one that has it started over a minute after the
    folder was last written (the pid was reused; its driver is dead). A folder of a live
    driver is kept. Every new scratch folder and the scheduler (once a minute) call this;
    `seqline runs` and the dashboard do not: readers change nothing, of the store or of the
    machine (they may run as another user, with another temp folder).

    Args:
        folders: where to look (default: the temp folder, and /tmp where Ray's go when the
            temp folder's path is too long for its sockets).

    Returns:
        The folders removed.
    """
    removed = []
    for base in dict.fromkeys(folders or (Path(tempfile.gettempdir()), Path("/tmp"))):
        for folder in base.glob("seqline-*"):
            pid = _driver_pid(folder.name)
            if pid is not None and pid != os.getpid() and _driver_gone(folder, pid):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed


def _driver_pid(name: str) -> int | None:
    """The pid in a scratch folder's name (seqline-ray-train-123-x8k2 -> 123), or None for a
    name this module did not make: only those are ever removed."""
    found = SCRATCH_NAME.match(name)
    return int(found.group(1)) if found else None


def _driver_gone(folder: Path, pid: int) -> bool:
    import psutil

    try:
        written = folder.stat().st_mtime
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return True
        return process.create_time() > written + START_CLOCK_SLACK_S
    except psutil.NoSuchProcess:
        return True
    except (psutil.AccessDenied, OSError):  # another user's, or removed meanwhile: leave it
        return False


def remove_scratch(folder: Path) -> None:
    """Remove a scratch folder now (its engine has stopped)."""
    shutil.rmtree(folder, ignore_errors=True)
    _made.discard(folder)


def _remove_made() -> None:
    """At exit: this process's scratch folders that its engines did not remove (a forked
    child inherits this handler, never its parent's folders)."""
    for folder in list(_made):
        if _driver_pid(folder.name) == os.getpid():
            remove_scratch(folder)


# The cancel a signal raised in this run (the main thread's), until its outermost
# `signals_cancel` block ends: see `raise_if_cancelled`.
_cancels: list[Cancelled] = []
_depth = 0


@contextmanager
def signals_cancel() -> Iterator[None]:
    """SIGTERM (systemd, Kubernetes, `kill`) cancels the run as Ctrl-C does, and neither is
    lost.

    Only from the main thread, where Python delivers signals; elsewhere (a run inside a
    user's thread) the defaults stay. Ray puts in a SIGTERM handler of its own as it starts,
    which exits with status 15: inside this block that too is the cancel it means. A SIGINT
    that Python was told to ignore (a job started with `&` by a script) stays ignored; after
    the first, a second Ctrl-C is a plain KeyboardInterrupt again, as a user pressing it
    twice means.
    """
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def cancel(signum: int, frame: FrameType | None) -> None:
        # SIGTERM: a second must not cut the cleanup.
        again = signal.SIG_IGN if signum == signal.SIGTERM else signal.default_int_handler
        signal.signal(signum, again)
        _cancels.append(Cancelled(signal.Signals(signum).name))
        raise _cancels[0]

    outermost, hook = _depth == 0, sys.unraisablehook
    if outermost:
        sys.unraisablehook = partial(_quiet_dropped_cancel, hook)
    _depth += 1
    previous = signal.signal(signal.SIGTERM, cancel)
    interrupt = signal.getsignal(signal.SIGINT)
    if interrupt is signal.default_int_handler:
        signal.signal(signal.SIGINT, cancel)
    try:
        yield
    except SystemExit as exc:
        if exc.code != signal.SIGTERM:
            raise
        raise Cancelled("SIGTERM") from None
    finally:
        _depth -= 1
        if outermost:  # the run is over: its cancel must not stop the next one
            _cancels.clear()
            sys.unraisablehook = hook
        signal.signal(signal.SIGTERM, previous)
        if interrupt is signal.default_int_handler:
            signal.signal(signal.SIGINT, interrupt)


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block has ended, then cancel (Cancelled): for what
    must not be cut halfway, such as recording that a run succeeded. The main thread only,
    as `signals_cancel`; an ignored SIGINT stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[str] = []
    kept = {s: h for s in (signal.SIGINT, signal.SIGTERM)
            if (h := signal.getsignal(s)) not in (signal.SIG_IGN, None)}  # None: set in C
    for signum in kept:
        signal.signal(signum, lambda n, _: held.append(signal.Signals(n).name))
    try:
        yield
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)
    if held:
        raise Cancelled(held[0])


def _quiet_dropped_cancel(hook: Callable[[Any], object], dropped: Any) -> None:
    """A cancel dropped where Python cannot raise it is raised again (`raise_if_cancelled`):
    its "Exception ignored in ..." traceback would only alarm; anything else goes to `hook`."""
    if not isinstance(dropped.exc_value, Cancelled):
        hook(dropped)


def raise_if_cancelled() -> None:
    """Raise again the cancel a signal raised, if it was lost: Python raises a signal's
    exception wherever the main thread is, and where that is a weakref callback or a
    `__del__` (the garbage collector runs them anywhere; SQLAlchemy has some), it only prints
    "Exception ignored in ..." and the run goes on as if never asked to stop."""
    if _cancels:
        raise _cancels[0]

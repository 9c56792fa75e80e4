"""Processes on this machine: is one alive, and scratch folders that outlive no driver."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import psutil

__all__ = ["pid_alive", "scratch_dir", "stop_children"]


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


def scratch_dir(kind: str, label: str = "") -> Path:
    """A new temporary folder for an engine's files while this driver runs.

    Its name carries the driver's pid: a driver that is killed cannot remove its folders, so
    each new one first removes those of drivers that are gone.

    Args:
        kind: the engine ("beam", "ray", "workers").
        label: a word to tell folders apart (a stage name), if any.

    Returns:
        The folder, created.
    """
    base = Path(tempfile.gettempdir())
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

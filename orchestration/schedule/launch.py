"""Starting a tick's run: a `seqline run` process of its own, in a session of its own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from seqline.orchestration.environment import LAST_WORDS_FD
from seqline.pipeline.artifacts import check_run_id
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.storage import Folder, fspath, seqline_home, slug, storage_of

__all__ = ["LaunchRequest", "Launcher", "ProcessLauncher", "logs_folder", "root_text",
           "seqline_executable"]


@dataclass(frozen=True)
class LaunchRequest:
    """One run to start: which pipeline, how, and under which id."""

    run_id: str
    schedule: str
    fire_time: datetime
    pipeline: str
    runner: str
    workers: int
    trigger: str  # schedule or backfill


class Launcher(Protocol):
    """Starts a run and returns at once (the run goes on alone)."""

    def __call__(self, request: LaunchRequest) -> int | None:
        """Start the run.

        Returns:
            The pid of the process that runs it, if there is one.

        Raises:
            ConfigError: the run cannot start (e.g. its pipeline file is gone).
            OSError: the process could not be started.
        """
        ...


def seqline_executable() -> str:
    """The `seqline` script beside this interpreter (the venv's), else `seqline` on PATH."""
    beside = Path(sys.executable).parent / "seqline"
    return str(beside) if beside.exists() else "seqline"


def root_text(root: Folder) -> str:
    """`--root` for a run started elsewhere: an absolute path (the run's working folder may
    differ), or the URL of an object-store root as it is."""
    return fspath(root.resolve())


def logs_folder(root: Folder, logs: Path | None) -> Path:
    """Where the runs' RUN_ID.log files go: --logs, else ROOT/logs for a local root. They
    hold each run's process output as printed (C++ lines, a crash); the run's own log, its
    stages' story and log lines, is in its folder (log.jsonl, decision 56), and the
    dashboard's log page shows the end of this file beside it.

    A log is appended to line by line while its run goes, which an object store cannot do:
    for an object-store root they stay on this machine, in $SEQLINE_HOME/logs/<root as a
    name> (~/.seqline without $SEQLINE_HOME), beside its default run store.
    """
    if logs is not None:
        return logs.resolve()
    local = storage_of(root).on_disk(root)
    return (local / "logs" if local else seqline_home() / "logs" / slug(fspath(root))).resolve()


class ProcessLauncher:
    """Launch each run as `seqline run PIPELINE … --run-id ID --trigger T`, detached.

    The process starts a new session: a SIGTERM or Ctrl-C to the scheduler (or to its
    process group, as systemd and a terminal send) never reaches a run, and a run that
    crashes cannot take the scheduler down. Its output goes to `LOGS/RUN_ID.log`, and its
    one-line error, if it fails, to a pipe of the launcher's too (`last_words`).
    """

    def __init__(self, root: Folder, store: str | None, logs: Path,
                 executable: str | None = None) -> None:
        """Args:
            root: the artifact root the runs write under (`--root`): a folder or a URL.
            store: the run store URL (`--store`), or None for SQLite under the root.
            logs: the folder of the runs' log files.
            executable: the seqline script (default: `seqline_executable()`).
        """
        self.root = root_text(root)
        self.store = store
        self.logs = Path(logs)
        self.executable = executable or seqline_executable()
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self._pipes: dict[str, int] = {}  # run id -> the read end of its last-words pipe
        self._words: dict[str, str] = {}  # run id -> what its ended run said there

    def command(self, request: LaunchRequest) -> list[str]:
        """The command line of a run."""
        command = [self.executable, "run", request.pipeline, "--root", self.root,
                   "--run-id", request.run_id, "--trigger", request.trigger,
                   "--runner", request.runner, "--workers", str(request.workers)]
        return command + (["--store", self.store] if self.store else [])

    def __call__(self, request: LaunchRequest) -> int:
        """Start the run; see `Launcher`."""
        if not Path(request.pipeline).is_file():
            raise ConfigError(f"the pipeline file {request.pipeline} is missing: restore it, "
                              f"or `seqline schedule remove {request.schedule}`.")
        check_run_id(request.run_id)  # it names the log file: a name, never a path
        self.logs.mkdir(parents=True, exist_ok=True)
        # Appended, not truncated: a tick relaunched after a scheduler crash keeps both tries.
        read, write = os.pipe()
        os.set_blocking(read, False)
        try:
            with open(self.logs / f"{request.run_id}.log", "ab") as log:
                child = subprocess.Popen(self.command(request), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, pass_fds=(write,),
                                         env={**os.environ, LAST_WORDS_FD: str(write)})
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)  # the run's copy is the only one: its end is the pipe's
        self.children[request.run_id] = child
        self._pipes[request.run_id] = read
        return child.pid

    def wait_all(self, timeout: float) -> None:
        """Wait up to `timeout` seconds, in all, for every launched run's process to end, then
        reap them: a run's row ends before its process does, whose table and summary go on
        into its log after it."""
        deadline = time.monotonic() + timeout
        for child in list(self.children.values()):
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.0, deadline - time.monotonic()))
        self.reap()

    def reap(self) -> dict[str, int]:
        """Collect the runs that ended (no zombies are left behind).

        Returns:
            {run_id: exit code} of the runs that ended since the last call.
        """
        ended = {run_id: code for run_id, child in self.children.items()
                 if (code := child.poll()) is not None}
        for run_id in ended:
            del self.children[run_id]
            words = _read_ready(self._pipes.pop(run_id))
            if words:
                self._words[run_id] = words
        return ended

    def last_words(self, run_id: str) -> str | None:
        """The one-line error an ended run said on its pipe (once; None if it said none)."""
        return self._words.pop(run_id, None)


def _read_ready(fd: int) -> str:
    """What the pipe holds now, its last line; the pipe is closed. (Not read to its end: a
    process the run started may still hold the write end.)"""
    chunks = []
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    os.close(fd)
    lines = b"".join(chunks).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else ""

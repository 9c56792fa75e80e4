"""The error hierarchy: what went wrong, where it happened, and how to fix it."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

__all__ = ["RESUME", "Cancelled", "ConfigError", "InternalError", "RunNotFound", "SeqlineError",
           "StageError", "disk_full", "disk_full_message"]


class SeqlineError(Exception):
    """Base of every error seqline raises on purpose."""


class Cancelled(KeyboardInterrupt):
    """The run was stopped on purpose (SIGTERM, Ctrl-C): not an error, and resumable.

    A KeyboardInterrupt, so that `except Exception` in user code or a library cannot swallow
    it, and Ctrl-C and SIGTERM take one path.
    """

    def __init__(self, signal: str, run_id: str | None = None) -> None:
        super().__init__(signal)
        self.signal = signal
        self.run_id = run_id
        # it came once the run had succeeded (recorded so): only the run's verify was stopped
        self.succeeded = False


class ConfigError(SeqlineError):
    """A bad pipeline file, parameter or input: fix the input and run again (CLI exit 2)."""


class RunNotFound(ConfigError):
    """No run of that id where it was looked for: one message for every command that looks.

    Example: RunNotFound("nosuch", "under --root .seqline", ".seqline") says "no run 'nosuch'
    under --root .seqline; list the runs there with `seqline runs list --root .seqline`, or
    pass the --root (or --store) the run used".
    """

    def __init__(self, run_id: str, where: str, root: str | None = None) -> None:
        listing = "seqline runs list" + (f" --root {root}" if root else "")
        super().__init__(f"no run {run_id!r} {where}; list the runs there with `{listing}`, "
                         "or pass the --root (or --store) the run used")
        self.run_id = run_id

    def __reduce__(self):  # a plain ConfigError on the other side of a pickle: same message
        return (ConfigError, (str(self),))


class InternalError(SeqlineError):
    """A bug in seqline itself, not in the pipeline or its data: please report it."""


class StageError(SeqlineError):
    """User code failed, or broke the stage contract, while a run was going (CLI exit 1).

    Carries where it happened: the stage, the block index and a seq, so that a user can find
    the record (`seqline` prints them; tests read them).
    """

    def __init__(
        self, message: str, *, stage: str, block: int | None = None, seq: int | None = None
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.block = block
        self.seq = seq

    def __reduce__(self):  # keyword-only fields survive pickling across worker processes
        return (_rebuild_stage_error, (str(self), self.stage, self.block, self.seq))


def _rebuild_stage_error(message: str, stage: str, block: int | None, seq: int | None):
    return StageError(message, stage=stage, block=block, seq=seq)


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def disk_full(error: BaseException | None) -> OSError | None:
    """The "no space left" (or over quota) OSError behind `error`, if that is what it is."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in DISK_FULL:
            return error
        error = error.__cause__ or error.__context__
    return None


# How a message that cannot know its run says how to finish it: the command line puts the
# run's exact command in its place (its root, store, runner and options: cli/run.py).
RESUME = "`seqline run … --resume --run-id ID`"


def _size(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"


def disk_full_message(error: OSError, fallback: str | Path) -> str:
    """What a user needs when a disk filled up: which path, how full, what to do next.

    Args:
        error: the OSError (its filename, when it has one, is the path named).
        fallback: the folder being written, for errors that carry no filename.
    """
    path = Path(error.filename or fallback).absolute()
    probe = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
    usage = shutil.disk_usage(probe)
    return (f"the disk is full: writing {path} failed ({error.strerror}; "
            f"{_size(usage.free)} free of {_size(usage.total)} there). "
            "Free space on that filesystem or give a --root on a larger one, then finish the "
            f"run with {RESUME}: committed stages are kept.")

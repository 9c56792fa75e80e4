"""A failure as the one line a person pastes into a search box, and its traceback apart."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from seqline.pipeline.errors import SeqlineError, StageError

__all__ = ["WORKER_TRACEBACK", "error_line", "error_traceback", "has_worker_traceback"]

WORKER_TRACEBACK = "\n\nWorker traceback:\n"  # how a StageError carries the worker's traceback

SEQLINE_CODE = tuple(Path(__file__).resolve().parents[1] / part
                     for part in ("pipeline", "components", "orchestration"))


def error_line(exc: BaseException) -> str:
    """The failure in one line: led by its stage (and seq) when its message does not name
    them, naming the user's file and line instead of the worker's traceback.

    Example: "stage 'features' failed on seq 1200 (block 12): ZeroDivisionError: division
    by zero (at /work/features.py, line 12)". The terminal adds how to see the traceback.
    """
    message = str(exc) if isinstance(exc, SeqlineError) else f"{type(exc).__name__}: {exc}"
    head, sep, text = message.partition(WORKER_TRACEBACK)
    if isinstance(exc, StageError):
        if exc.seq is not None and "seq" not in head:
            head = f"seq {exc.seq}: {head}"
        if exc.stage and repr(exc.stage) not in head and f"stage {exc.stage}" not in head:
            head = f"stage {exc.stage!r}: {head}"
    if sep:
        first = text.split("\n\nDuring handling of the above exception")[0]
        frames = re.findall(r'File "([^"]+)", line (\d+)', first)
        own = [f for f in frames if _users(f[0])] or frames  # the user's line, not pyarrow's
        at = f" (at {own[-1][0]}, line {own[-1][1]})" if own else ""
        head = f"{head.rstrip()}{at}"
    return " ".join(head.split())


def error_traceback(exc: BaseException) -> str | None:
    """Where it happened: the worker's traceback a StageError carries, else the driver's."""
    _, sep, text = str(exc).partition(WORKER_TRACEBACK)
    if sep:
        return text.strip()
    if exc.__traceback__ is None and exc.__cause__ is None:
        return None
    return "".join(traceback.format_exception(exc)).strip()


def _users(file: str) -> bool:
    """A frame in the user's own code: a real file, not seqline's nor an installed library's."""
    path = Path(file)
    return (path.is_absolute() and "site-packages" not in path.parts
            and not any(path.resolve().is_relative_to(own) for own in SEQLINE_CODE))


def has_worker_traceback(exc: BaseException) -> bool:
    """Whether the error carries a worker's traceback (`error_line` leaves it out)."""
    return WORKER_TRACEBACK in str(exc)

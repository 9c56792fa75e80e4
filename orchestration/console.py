"""Where the CLI prints: rich on a terminal; whole lines and whole tables in a pipe or a log;
a failure as one line."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console

from seqline.orchestration.options import output
from seqline.pipeline.errors import SeqlineError, StageError

__all__ = ["UNBOUNDED_WIDTH", "console", "one_line", "stdout_to_stderr"]

# Wide enough that no table cell is cut and no message is wrapped when the output goes to a
# file, a pipe or a CI log: grep then finds every line whole.
UNBOUNDED_WIDTH = 10_000


def console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr): fitted to the terminal, or unbounded, uncoloured and
    never wrapped when the stream is not a terminal (rich itself honours NO_COLOR).

    The stdout console prints nothing under -q (read when the console is made, so make it
    inside a command, after the app's callback set the flags); stderr, where errors go, stays.
    """
    quiet = output.quiet and not stderr
    if Console(stderr=stderr).is_terminal:
        return Console(stderr=stderr, quiet=quiet)
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH, soft_wrap=True, no_color=True,
                   quiet=quiet)


@contextmanager
def stdout_to_stderr(redirect: bool = True) -> Iterator[None]:
    """Inside, whatever is written to stdout goes to stderr (file descriptor 1 onto 2).

    For `--json`: stdout must hold the JSON document alone, yet a user's function, an engine
    or a worker process started meanwhile (which inherits the descriptor) may print. Only the
    descriptor catches them all.
    """
    if not redirect:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


WORKER_TRACEBACK = "\n\nWorker traceback:\n"  # how a StageError carries the worker's traceback


def one_line(exc: SeqlineError) -> str:
    """A failure as one line, led by its stage (and seq) when its message does not name them,
    and naming the user's file and line instead of the worker's traceback (that is for
    --debug): a CI log is grepped, a traceback is read only when reporting a bug."""
    message = str(exc)
    head = message.split(WORKER_TRACEBACK)[0]
    if isinstance(exc, StageError):
        if exc.seq is not None and "seq" not in head:
            message = f"seq {exc.seq}: {message}"
        if exc.stage and repr(exc.stage) not in head and f"stage {exc.stage}" not in head:
            message = f"stage {exc.stage!r}: {message}"
    return _without_traceback(message)


def _without_traceback(message: str) -> str:
    head, sep, text = message.partition(WORKER_TRACEBACK)
    if not sep or output.debug:
        return message
    first = text.split("\n\nDuring handling of the above exception")[0]
    frames = re.findall(r'File "([^"]+)", line (\d+)', first)
    own = [f for f in frames if _users(f[0])] or frames  # the user's line, not pyarrow's
    at = f" (at {own[-1][0]}, line {own[-1][1]})" if own else ""
    return f"{head.rstrip()}{at}. Run with --debug for the traceback."


SEQLINE_CODE = tuple(Path(__file__).resolve().parents[1] / part
                     for part in ("pipeline", "components", "orchestration"))


def _users(file: str) -> bool:
    """A frame in the user's own code: a real file, not seqline's nor an installed library's."""
    path = Path(file)
    return (path.is_absolute() and "site-packages" not in path.parts
            and not any(path.resolve().is_relative_to(own) for own in SEQLINE_CODE))

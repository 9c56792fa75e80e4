"""Where the CLI prints: rich on a terminal, tables fitted to it; whole lines and whole tables
in a pipe or a log; numbers written one way; a failure as one line."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segments
from rich.table import Table
from rich.text import Text

from seqline.orchestration.cli.options import output
from seqline.orchestration.failures import error_line, has_worker_traceback
from seqline.pipeline.errors import SeqlineError

__all__ = ["UNBOUNDED_WIDTH", "Column", "console", "err", "fitted_table", "format_count",
           "format_metric", "format_rate", "format_seconds", "format_time", "one_line", "out",
           "print_fields", "print_table", "stdout_to_stderr"]

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
        # soft_wrap: a long message or command is one line the terminal wraps for the eye,
        # copied whole (rich would break it with newlines); tables are fitted (print_table)
        return Console(stderr=stderr, quiet=quiet, soft_wrap=True)
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH, soft_wrap=True, no_color=True,
                   quiet=quiet)


# `run` and `verify` print through these two, made once (the app's callback sets `out.quiet`
# for -q). On a terminal, rich fits tables to it. Piped or in a CI log, nothing is cut or
# wrapped: tables take their natural width and a message stays on one line, so grep finds it.
out = console()
err = console(stderr=True)


# -- numbers and times, written one way in every table ------------------------------------------


def format_count(value: int | None) -> str:
    """Records, shards, attempts: with thousands separators. Example: 1461000 -> "1,461,000"."""
    return "" if value is None else f"{value:,}"


def format_seconds(value: float | None) -> str:
    """A duration in seconds, to 2 places. Example: 0.021125670999992963 -> "0.02"."""
    return "" if value is None else f"{value:,.2f}"


def format_rate(value: float | None) -> str:
    """A rate (records/s), to 3 significant digits. Examples: 2411.7 -> "2,410";
    48.27 -> "48.3"; 0.012345 -> "0.0123"."""
    if value is None:
        return ""
    if value == 0 or not math.isfinite(value):
        return f"{value:,.0f}" if value == 0 else str(value)
    places = 2 - math.floor(math.log10(abs(value)))  # digits after the point for 3 in all
    return f"{round(value, places):,.{max(places, 0)}f}"


def format_metric(value: float | None) -> str:
    """A metric's value (mae, loss, accuracy), to 4 significant digits, as `seqline run`
    prints an evaluation. Example: 2.934712 -> "2.935"; 5.8796999951482576e-05 -> "5.88e-05"."""
    return "" if value is None else f"{value:.4g}"


def format_time(value: str | None) -> str:
    """A stored ISO time in UTC, shorter for a table: "2026-11-24T13:17:00+00:00" ->
    "2026-11-24 13:17:00" (the column's header says UTC). Anything else is left as it is."""
    if not value:
        return ""
    return value[:19].replace("T", " ") if value.endswith("+00:00") else value


# -- tables that fit the terminal ----------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A table's column: its header, its alignment, and how much it matters.

    `priority` 0 is always shown, whole (ids and statuses: what the next command needs);
    on a terminal too narrow for every column, the others are shown in priority order (1
    first) while they fit, as `kubectl get` and `docker ps` do; `--wide` shows them all.
    """

    header: str
    priority: int = 0
    justify: Literal["left", "right"] = "left"
    # Prose (a reason), not an id: on a terminal, shown once this many characters fit, then
    # given the width left, its text wrapped at words; 0: never wrapped (ids, counts, times).
    wraps: int = 0


Cell = str | Text | None


def fitted_table(columns: Sequence[Column], rows: Sequence[Sequence[Cell]],
                 width: int | None = None, *, title: str | None = None
                 ) -> tuple[Table, list[str]]:
    """A table of the columns that fit in `width` (None: all), no cell cut or wrapped.

    Cells are plain text (never markup, never highlighted: digits inside a run id keep the
    colour of the id); pass a `rich.text.Text` for a coloured one.

    Args:
        columns: the columns, in the order they are shown.
        rows: one cell per column in each row.
        width: the terminal's width, or None for a pipe, a file, `--wide`.
        title: printed above the table.

    Returns:
        The table, and the headers of the columns left out.

    Example: runs at 80 columns -> run, status, pipeline, started (UTC); hidden: seconds,
    runner, trigger, finished.
    """
    texts = [[c if isinstance(c, Text) else Text(_printable(c)) for c in row] for row in rows]
    # A column's width as rich draws it: its widest cell, one space of padding each side and
    # one rule; the table adds one more rule at its right edge.
    needs = [max([cell_len(col.header), *(cell_len(r[i].plain) for r in texts)]) + 3
             for i, col in enumerate(columns)]
    # prose wraps at words, never narrower than its longest (an id in a reason, a path)
    least = [min(needs[i], max(col.wraps, _longest_word(texts, i), cell_len(col.header)) + 3)
             if col.wraps else needs[i] for i, col in enumerate(columns)]
    shown = {i for i, col in enumerate(columns) if col.priority == 0}
    widths = {i: needs[i] for i in range(len(columns))}
    if width is None:
        shown = set(range(len(columns)))
    else:
        used = 1 + sum(least[i] for i in shown)
        # by priority, a column with nothing to say in any row (blank, 0) after every other,
        # and one empty in every row not at all (a `reason` column where nothing failed)
        for i in sorted(set(range(len(columns))) - shown,
                        key=lambda i: (_blank(texts, i), columns[i].priority)):
            if used + least[i] <= width and any(r[i].plain.strip() for r in texts):
                shown.add(i)
                used += least[i]
        for i in sorted(shown):  # what is left of the width goes to the prose
            if columns[i].wraps:
                widths[i] = min(needs[i], least[i] + max(0, width - used))
                used += widths[i] - least[i]
    table = Table(title=title, title_justify="left", highlight=False)
    for i, col in enumerate(columns):
        if i in shown:
            wrapped = widths[i] < needs[i]
            table.add_column(col.header, justify=col.justify, no_wrap=not wrapped,
                             min_width=widths[i] - 3, max_width=widths[i] - 3 if wrapped
                             else None, overflow="fold")  # (rich's default cuts with …)
    for row in texts:
        table.add_row(*(cell for i, cell in enumerate(row) if i in shown))
    return table, [col.header for i, col in enumerate(columns) if i not in shown]


def _longest_word(texts: list[list[Text]], column: int) -> int:
    return max((cell_len(word) for row in texts for word in row[column].plain.split()),
               default=0)


def _blank(texts: list[list[Text]], column: int) -> bool:
    """Whether a column says nothing in any row (empty, zero, a dash)."""
    return all(row[column].plain.strip() in ("", "0", "0.00", "-") for row in texts)


def _printable(value: object) -> str:
    """A cell's text on one line: control characters (a newline in a stored id) escaped."""
    text = "" if value is None else str(value)
    return repr(text)[1:-1] if any(not ch.isprintable() for ch in text) else text


def print_table(out: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], *,
                wide: bool = False, title: str | None = None) -> None:
    """Print a table fitted to `out`: on a terminal (and not `wide`), the columns that fit,
    then a line naming those left out ("--wide adds: runner, trigger"); in a pipe or a file,
    all of them (see `console`).

    The columns kept are never cut: if even the ones that are always shown are wider than
    the terminal, the lines are printed whole and the terminal wraps them.
    """
    fit = out.width if out.is_terminal and not wide else None
    if title and not out.is_terminal:  # its own line: rich pads a title to the table's width
        out.print(title, markup=False, highlight=False)
    table, hidden = fitted_table(columns, rows, fit, title=title if out.is_terminal else None)
    needed = table.__rich_measure__(out, out.options.update(width=UNBOUNDED_WIDTH)).maximum
    if needed <= out.width:
        out.print(table, soft_wrap=False)
    else:  # rendered at its own width (print would squeeze it into the terminal's)
        lines = out.render_lines(table, out.options.update(width=needed), new_lines=True)
        out.print(Segments(segment for line in lines for segment in line), crop=False,
                  soft_wrap=False)
    if hidden:
        out.print(f"--wide adds: {', '.join(hidden)}", style="dim", highlight=False,
                  markup=False)


def print_fields(out: Console, fields: Sequence[tuple[str, object]]) -> None:
    """Name-value lines, the values lined up: each value whole on its line (a terminal wraps
    a long one for the eye; it is copied, and grepped in a pipe, as one line)."""
    width = max((len(name) for name, _ in fields), default=0) + 2
    for name, value in fields:
        out.print(f"{name:<{width}}{_printable(value)}".rstrip(), markup=False,
                  highlight=False)


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


def one_line(exc: SeqlineError) -> str:
    """A failure as one line (the line the run store keeps, failures.error_line): a CI log
    is grepped, a traceback is read only when reporting a bug. With --debug, whole."""
    if output.debug:
        return str(exc)
    hint = ". Run with --debug for the traceback." if has_worker_traceback(exc) else ""
    return error_line(exc) + hint

"""Where the CLI prints: rich on a terminal; whole lines and whole tables in a pipe or a log."""

from __future__ import annotations

from rich.console import Console

__all__ = ["console"]

# Wide enough that no table cell is cut and no message is wrapped when the output goes to a
# file, a pipe or a CI log: grep then finds every line whole.
UNBOUNDED_WIDTH = 10_000


def console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr): fitted to the terminal, or unbounded, uncoloured and
    never wrapped when the stream is not a terminal (rich itself honours NO_COLOR)."""
    if Console(stderr=stderr).is_terminal:
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH, soft_wrap=True, no_color=True)

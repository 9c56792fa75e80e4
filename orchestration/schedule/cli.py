"""`seqline schedule …`, `seqline scheduler` and `seqline backfill` (being built)."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the schedule commands to the `seqline` app."""

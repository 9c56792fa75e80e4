"""`seqline dashboard` (being built)."""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the dashboard command to the `seqline` app."""

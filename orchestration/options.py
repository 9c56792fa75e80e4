"""Command-line options shared by the `seqline` commands, defined once."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["AsJson", "Root", "RunnerName", "Store"]


class RunnerName(StrEnum):
    local = "local"
    beam = "beam"
    ray = "ray"


Root = Annotated[Path, typer.Option(help="Artifact root; the store is ROOT/seqline.db unless "
                                         "--store says otherwise.")]
Store = Annotated[str | None, typer.Option(
    "--store", help="Run store URL, e.g. postgresql+psycopg://user@host/db (default: SQLite "
                    "under --root).")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the JSON contract, not a table.")]

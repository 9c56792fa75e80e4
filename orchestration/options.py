"""What the `seqline` commands share, defined once: options, opening the run store, failing
with one line, and tables that never wrap."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.table import Table
from sqlalchemy.exc import ArgumentError, OperationalError

from seqline.orchestration.store import RunStore
from seqline.pipeline.errors import SeqlineError
from seqline.pipeline.storage import open_root

__all__ = ["CONFIG_EXIT", "AsJson", "Output", "Root", "RunnerName", "Store", "fail", "opened",
           "output", "print_json", "say", "unwrapped_table"]

CONFIG_EXIT = 2  # as `seqline run`: a bad input, fixable by the user


class Output:
    """The top-level flags every command obeys: -q, -v and --debug (set by the app's callback)."""

    quiet = False  # only errors
    verbose = False  # the engines' own start-up and log lines too
    debug = False  # a failure re-raises with its traceback instead of one line


output = Output()


class RunnerName(StrEnum):
    local = "local"
    beam = "beam"
    ray = "ray"


Root = Annotated[Path, typer.Option(help="Artifact root; the store is ROOT/seqline.db unless "
                                         "--store says otherwise.")]
Store = Annotated[str | None, typer.Option(
    "--store", help="Run store URL, e.g. postgresql+psycopg://user@host/db (default: SQLite "
                    "under --root).")]
# `--root` as text: a local folder or an fsspec URL (a Path would turn s3://b into s3:/b).
RootUrl = Annotated[str, typer.Option(
    "--root", help="Artifact root: a folder or an fsspec URL (s3://bucket/prefix, gs://...); "
                   "the store is ROOT/seqline.db (for a URL, ~/.seqline/stores/<name>.db) "
                   "unless --store says otherwise.")]
AsJson = Annotated[bool, typer.Option(
    "--json", help="Print the answer as one JSON document on stdout (a contract scripts can "
                   "rely on), not a table; printed even with -q.")]


def print_json(document: object) -> None:
    """A command's answer as JSON on stdout, whatever -q says: it was asked for."""
    typer.echo(json.dumps(document, indent=2))


def say(line: str) -> None:
    """A line for the person at the terminal, on stdout; nothing under -q (the exit code
    tells)."""
    if not output.quiet:
        typer.echo(line)


def fail(message: str, code: int = CONFIG_EXIT) -> NoReturn:
    """Print `error: message` on stderr and exit with `code`; with --debug, re-raise the
    exception being handled (its traceback is what a bug report needs)."""
    reraise_if_debug()
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def reraise_if_debug() -> None:
    """Under --debug, raise the exception being handled again, traceback and all."""
    current = sys.exc_info()[1]
    if output.debug and current is not None:
        raise current


@contextmanager
def opened(root: Path | str, url: str | None) -> Iterator[RunStore]:
    """The store, closed afterwards; a bad URL or a seqline error exits 2 with one line."""
    from seqline.orchestration.api import store_url  # the run path's rule, one place

    try:
        store = RunStore.open(*store_url(open_root(root), url))
    except (ArgumentError, OperationalError) as exc:
        fail(f"cannot open the run store at {url or root}: {str(exc).splitlines()[0]}. "
             "Check --store (postgresql+psycopg://user@host:port/db) or --root.")
    except SeqlineError as exc:  # e.g. a store written by a newer seqline
        fail(str(exc))
    try:
        yield store
    except SeqlineError as exc:
        fail(str(exc))
    finally:
        store.close()


def unwrapped_table(*columns: str, title: str | None = None) -> Table:
    """A table whose cells never wrap: a time, an id or a path stays whole."""
    made = Table(title=title, title_justify="left")
    for name in columns:
        made.add_column(name, no_wrap=True)
    return made

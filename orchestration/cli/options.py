"""What the `seqline` commands share, defined once: options, opening the run store (readers
never create one), failing with one line, and tables that never wrap.

The CLI's modules import Typer, Rich and seqline's light modules (errors, statuses) at the
top: building the commands and printing `--help` must not load SQLAlchemy, Arrow or the
components, so each command imports its engine inside, when it runs (decision 49).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.table import Table

from seqline.orchestration.environment import ROOT_VARIABLE, STORE_VARIABLE, tell_launcher
from seqline.orchestration.store.errors import shown_url
from seqline.pipeline.errors import RunNotFound, SeqlineError

if TYPE_CHECKING:
    from seqline.orchestration.store import RunStore
    from seqline.pipeline.storage import Folder

__all__ = ["CONFIG_EXIT", "ROOT_HELP", "AsJson", "Output", "RootUrl", "RunnerName",
           "Store", "Wide", "fail",
           "missing_store", "no_run", "opened", "output", "print_json", "say", "shown_url",
           "unwrapped_table", "usage_line"]

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


ROOT_HELP = ("Artifact root: a folder or an fsspec URL (s3://bucket/prefix; "
             "credentials from the environment, never in the URL).")
# (a URL is not written whole here: rich's help table cuts a word wider than its column)
STORE_HELP = ("The run store: a database URL, postgresql+psycopg:// then user@host/db for "
              "PostgreSQL; default: SQLite at ROOT/seqline.db.")
Store = Annotated[str | None, typer.Option(
    "--store", envvar=STORE_VARIABLE,
    help=STORE_HELP)]
# `--root` as text: a local folder or an fsspec URL (a Path would turn s3://b into s3:/b).
RootUrl = Annotated[str, typer.Option(
    "--root", envvar=ROOT_VARIABLE,
    help="Artifact root: a folder or an fsspec URL (s3://bucket/prefix, gs://...); "
         "the store is ROOT/seqline.db (for a URL, ~/.seqline/stores/<name>.db) "
         "unless --store says otherwise.")]
Wide = Annotated[bool, typer.Option(
    "--wide", help="On a terminal, show every column of the table, even those that do not "
                   "fit its width (a pipe or a file always gets them all).")]
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
    tell_launcher(f"error: {message}")  # first: stderr may be a log on a full disk
    with contextlib.suppress(OSError):  # (which must not turn exit 2 into a traceback)
        typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def reraise_if_debug() -> None:
    """Under --debug, raise the exception being handled again, traceback and all."""
    current = sys.exc_info()[1]
    if output.debug and current is not None:
        raise current


def usage_line(exc: Exception) -> str:
    """A usage error of click (a bad option value, a missing argument, an unknown command) as
    the one line every seqline error is, `<what>; <how to fix>`, without click's three-line
    form nor the validation library's "Value error," prefix.

    Args:
        exc: a click UsageError (Typer's own copy of click: read by its methods).

    Examples:
        --runner nosuch -> "invalid --runner: 'nosuch' is not one of 'local', 'beam', 'ray';
        see `seqline run --help`"; a missing RUN_ID -> "missing argument 'run_id'; see
        `seqline runs show --help`".
    """
    what = exc.format_message().replace("Value error, ", "")  # type: ignore[attr-defined]
    found = re.fullmatch(r"Invalid value for '?(.+?)'?: (.*)", what, re.S)
    if found:
        detail = found.group(2)
        what = f"invalid {found.group(1)}: {detail[:1].lower()}{detail[1:]}"
    what = re.sub(r"\. Did you mean", "; did you mean", what.strip().rstrip("."))
    context = getattr(exc, "ctx", None)
    command = context.command_path if context is not None else "seqline"
    option = getattr(exc, "option_name", None)
    own = {o for p in context.find_root().command.params for o in p.opts} if context else set()
    if option in own and command != "seqline":  # `seqline run x.yaml -q`: seqline's own
        after = command.removeprefix("seqline ")
        return (f"no such option: {option}; it is seqline's own option, given before the "
                f"command: `seqline {option} {after} …`")
    return f"{what[:1].lower()}{what[1:]}; see `{command} --help`"


def no_run(run_id: str, root: str, store: str | None = None) -> NoReturn:
    """Exit 2 with the one message for a run that is not there (`runs show`, `verify`, …).

    Example: error: no run 'nosuch' under --root .seqline; list the runs there with
    `seqline runs list --root .seqline`, or pass the --root (or --store) the run used
    """
    where = f"in the run store {shown_url(store)}" if store else f"under --root {root}"
    if store is None and (absent := _no_store(root)) is not None:  # (runs list would fail)
        fail(f"no run {run_id!r} under --root {root}: nothing has run there (no run store at "
             f"{absent}); pass the --root (or --store) the run used")
    fail(str(RunNotFound(run_id, where, root)))


def _no_store(root: str) -> Path | None:
    from seqline.pipeline.storage import open_root

    try:
        return missing_store(open_root(root), None)
    except SeqlineError:  # a root that cannot be opened says so where it is opened
        return None


def missing_store(root: Folder, url: str | None) -> Path | None:
    """The SQLite file a run store at `root` (or `url`) would be, if there is none yet.

    Args:
        root: the artifact root, opened.
        url: `--store`, or None for the store `seqline run` uses for this root.

    Returns:
        The missing file; None when the store exists, or is a server (PostgreSQL) or an
        in-memory database, which only the server can answer for.
    """
    from sqlalchemy.engine import make_url

    from seqline.orchestration.store import DB_FILE
    from seqline.orchestration.store.engine import store_url

    base, found = store_url(root, url, create=False)
    if found is None:
        file = Path(base) / DB_FILE
    else:
        parsed = make_url(found)
        if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
            return None
        file = Path(parsed.database)
    return None if file.exists() else file


@contextmanager
def opened(root: Path | str, url: str | None, *, create: bool = False) -> Iterator[RunStore]:
    """The store, closed afterwards; a bad URL or a seqline error exits 2 with one line.

    Args:
        root: `--root`.
        url: `--store`, or None.
        create: make the store if there is none. Only the commands that write runs or
            schedules do (`run`, `schedule add`, `store rebuild`; `scheduler` at a --store
            URL: a root without a store has no schedules for it); a reader given
            a root with no store exits 2 and creates nothing (a typo in --root must not leave
            an empty store behind that answers every later question with nothing).
    """
    from sqlalchemy.exc import OperationalError

    from seqline.orchestration.store import RunStore
    from seqline.orchestration.store.engine import store_url
    from seqline.orchestration.store.errors import StoreFailed, database_words
    from seqline.pipeline.storage import open_root

    try:
        place = open_root(root)
        absent = None if create else missing_store(place, url)
        if absent is not None:
            fail(f"no run store at {absent}; run `seqline run` with this --root first, or "
                 "pass the --root (or --store) of an existing one")
        store = RunStore.open(*store_url(place, url))
    except StoreFailed as exc:  # the right store, on a full disk: no mistake of the user's
        fail(str(exc), 1)
    except SeqlineError as exc:  # not reached, not a URL, written by a newer seqline, …
        fail(str(exc))
    try:
        yield store
    except SeqlineError as exc:  # a name not there, one taken, a lease held, a bad input
        fail(str(exc))
    except OperationalError as exc:  # a write refused (a full disk), a database gone: exit 1
        fail(f"the run store at {store.url} failed ({database_words(exc)}); free space on its "
             "disk (or start its database), then run the same command again.", 1)
    finally:
        store.close()


def unwrapped_table(*columns: str, title: str | None = None) -> Table:
    """A table whose cells never wrap: a time, an id or a path stays whole."""
    made = Table(title=title, title_justify="left")
    for name in columns:
        made.add_column(name, no_wrap=True)
    return made

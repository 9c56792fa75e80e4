"""The `seqline` app: its global flags, its commands in the order --help lists them, and the
console script that prints click's usage errors in seqline's one-line voice."""

from __future__ import annotations

import inspect
import os
import stat
import sys
from typing import Annotated

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from seqline.orchestration.cli import (
    dashboard,
    lookup,
    run,
    runs,
    schedule,
    scheduler,
    store,
    verify,
)
from seqline.orchestration.cli.console import UNBOUNDED_WIDTH, out
from seqline.orchestration.cli.options import fail, output, usage_line
from seqline.orchestration.environment import quiet_engines, take_launcher_pipe
from seqline.pipeline.errors import disk_full, disk_full_message

__all__ = ["app", "main_command"]

# The exit status of a command whose output could not be written: CPython's own, when it
# cannot flush stdout at exit.
OUTPUT_FAILED = 120

# Help piped or in a CI log: click's plain text, one line per option and paragraph (rich would
# box it and cut it to 80 columns, or to COLUMNS). On a terminal, rich's panels.
PLAIN_HELP: dict = {} if sys.stdout.isatty() else {
    "rich_markup_mode": None,
    "context_settings": {"terminal_width": UNBOUNDED_WIDTH, "max_content_width": UNBOUNDED_WIDTH}}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="seqline: an ML pipeline that keeps every record in source order.",
                  **PLAIN_HELP)


def _show_version(value: bool) -> None:
    if value:
        from seqline import __version__  # read from the package's metadata on first use

        out.print(f"seqline {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[bool, typer.Option(
        "--version", callback=_show_version, is_eager=True,
        help="Print the installed version and exit.")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print errors only (the exit code tells the rest).")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also print the engines' own lines (TensorFlow's C++ logs, "
                                "absl, Beam, Ray), which are kept out by default.")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="On an error, print the full Python traceback, not one line (for a "
                        "bug report).")] = False,
) -> None:
    """seqline: an ML pipeline that keeps every record in source order."""
    output.quiet, output.verbose, output.debug = quiet, verbose, debug
    out.quiet = quiet
    quiet_engines(verbose, quiet)  # -q: a retry that succeeded is no error, nor its warning
    take_launcher_pipe()


def schema() -> None:
    """Print the JSON Schema of pipeline files (for editors: VS Code's YAML extension, ...)."""
    # Here, not at the top: the components load Arrow and pydantic; --help needs neither.
    from seqline.components import schema_text

    sys.stdout.write(schema_text())


# One module per command group (cli/<group>.py), listed in this order by --help.
app.add_typer(runs.runs_app, name="runs")
app.add_typer(store.store_app, name="store")
app.add_typer(schedule.schedule_app, name="schedule")
app.command()(scheduler.scheduler)
app.command()(scheduler.backfill)
app.command()(dashboard.dashboard)
app.command()(lookup.lookup)
app.command()(run.run)
app.command()(schema)
app.command()(verify.verify)


def _unwrapped(text: str) -> str:
    """A docstring's paragraphs each on one line, for help that the terminal wraps: typer's
    rich help keeps a docstring's line breaks inside a paragraph, so that at 80 columns a
    line broke in mid-sentence. A paragraph with an indented or listed line is kept as is."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        p if any(line[:1].isspace() or line.lstrip().startswith(("- ", "* ", "\b"))
                 for line in p.splitlines()) else " ".join(p.split("\n"))
        for p in paragraphs)


def _unwrap_help(typer_app: typer.Typer) -> None:
    for command in typer_app.registered_commands:
        if command.help is None and command.callback is not None and command.callback.__doc__:
            command.help = _unwrapped(command.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _unwrap_help(group.typer_instance)


_unwrap_help(app)


def main_command() -> None:
    """The `seqline` console script: the app, with click's usage errors (a bad option value,
    an unknown option or command, a missing argument) in seqline's one-line voice, exit 2,
    and a full disk nobody expected in the storage's one line, exit 1."""
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `seqline` alone (or a group alone): its help
        exc.show()
        code = exc.exit_code
    except UsageError as exc:
        try:
            fail(usage_line(exc))
        except typer.Exit as exit_:
            code = exit_.exit_code
    except ClickException as exc:  # (click's other errors: a file it could not open)
        exc.show()
        code = exc.exit_code
    except Exception as exc:
        # A full disk wherever seqline did not expect one (a run's folder made on it) is
        # said as the storage says it, in one line, exit 1: a traceback would go to a log on
        # that very disk. Anything else goes on to the excepthook (environment.py), which
        # tells the launcher its line, and to the traceback a bug report needs.
        full = disk_full(exc)
        if full is None:
            raise
        where = _output_full()
        try:
            if where is not None:  # the output itself (`> /dev/full`, a file on a full disk)
                fail(f"the output cannot be written: {where} is full ({full.strerror}). Send "
                     "it elsewhere, or free space there.", code=OUTPUT_FAILED)
            fail(disk_full_message(full, "."), code=1)
        except typer.Exit as exit_:
            code = exit_.exit_code
    sys.exit(code if isinstance(code, int) else 0)


def _output_full() -> str | None:
    """Where the standard output goes, if that is what is full: /dev/full, or a file on a
    filesystem with no space left (its path, as Linux tells it); None otherwise."""
    try:
        fd = sys.stdout.fileno()
        found = os.fstat(fd)
        full = (stat.S_ISCHR(found.st_mode) and found.st_rdev == os.makedev(1, 7)) or (
            stat.S_ISREG(found.st_mode) and os.fstatvfs(fd).f_bavail == 0)
    except (OSError, ValueError):  # no descriptor (a test's captured output), or closed
        return None
    if not full:
        return None
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "the standard output"

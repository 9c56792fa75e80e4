"""`seqline schedule add|list|show|pause|resume|remove|export`: schedules in the run store,
as tables fitted to a terminal or as JSON."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from seqline.orchestration.cli.console import (
    Column,
    console,
    format_time,
    print_fields,
    print_table,
)
from seqline.orchestration.cli.options import (
    AsJson,
    RootUrl,
    RunnerName,
    Store,
    Wide,
    fail,
    opened,
    print_json,
    say,
)
from seqline.orchestration.environment import DEFAULT_ROOT
from seqline.pipeline.errors import SeqlineError

__all__ = ["fire_time_cell", "schedule_app"]

schedule_app = typer.Typer(add_completion=False, no_args_is_help=True,
                           pretty_exceptions_enable=False,
                           help="Run pipelines on cron schedules (run `seqline scheduler`).")


class Overlap(StrEnum):
    skip = "skip"
    queue = "queue"
    allow = "allow"


class Catchup(StrEnum):
    none = "none"
    latest = "latest"
    all = "all"


class Target(StrEnum):
    airflow = "airflow"


Name = Annotated[str, typer.Argument(help="The schedule's name (see `seqline schedule list`).")]


@schedule_app.callback()
def schedule_main() -> None:
    """Run pipelines on cron schedules, in a time zone; `seqline scheduler` fires them."""


@schedule_app.command("add")
def add_command(
    name: Annotated[str, typer.Argument(help="A name for the schedule, e.g. nightly-train.")],
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    cron: Annotated[str, typer.Option(help="When: 5 cron fields (minute hour day-of-month "
                                           "month day-of-week), e.g. '30 2 * * *', or @daily.")],
    tz: Annotated[str, typer.Option(help="The IANA time zone the cron is read in.")] = "UTC",
    runner: Annotated[RunnerName, typer.Option(
        help="Where each run's map stages run.")] = RunnerName.local,
    workers: Annotated[int, typer.Option(min=1, help="Parallel workers of each run.")] = 2,
    overlap: Annotated[Overlap, typer.Option(
        help="While the previous run still goes: skip the tick, queue it, or allow both.")]
        = Overlap.skip,
    catchup: Annotated[Catchup, typer.Option(
        help="Ticks missed while no scheduler ran: skip them all (none), run the most "
             "recent (latest), or the most recent --max-catchup in order (all).")]
        = Catchup.latest,
    max_catchup: Annotated[int, typer.Option(min=0, help="How many missed ticks `all` runs.")]
        = 5,
    start: Annotated[str | None, typer.Option(
        help="No fire time before this ISO time (no offset: in --tz).")] = None,
    end: Annotated[str | None, typer.Option(help="No fire time after this ISO time.")] = None,
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
) -> None:
    """Add a schedule: PIPELINE runs at each fire time of --cron in --tz."""
    # Here, not at the top: the schedule and store modules load SQLAlchemy, which
    # `seqline --help` does not need (so in each command of this module).
    from seqline.orchestration.schedule.listing import schedule_summary
    from seqline.orchestration.schedule.spec import new_schedule
    from seqline.orchestration.store.rows import now

    with opened(root, store, create=True) as runs:
        at = now()
        schedule, explanation = new_schedule(
            name, pipeline, cron, tz=tz, runner=runner.value, workers=workers,
            overlap=overlap.value, catchup=catchup.value, max_catchup=max_catchup,
            start=start, end=end, at=at)
        runs.schedules.add_schedule(schedule)
        upcoming = schedule_summary(schedule, at)["next_fire"] or "none (past --end)"
    console().print(f"Schedule {name}: {explanation} ({tz}). Next fire time: {upcoming}. "
                    "Runs start while `seqline scheduler` is running.", markup=False,
                    highlight=False)


@schedule_app.command("list")
def list_command(root: RootUrl = DEFAULT_ROOT, store: Store = None,
                 wide: Wide = False, as_json: AsJson = False) -> None:
    """List the schedules with their next fire time."""
    from seqline.orchestration.schedule.listing import schedule_summary
    from seqline.orchestration.store.rows import now

    with opened(root, store) as runs:
        at = now()
        rows = [schedule_summary(s, at) for s in runs.schedules.list_schedules()]
    if as_json:
        print_json(rows)
    else:
        print_schedules(console(), rows, wide)


@schedule_app.command("show")
def show_command(
    name: Name,
    next_count: Annotated[int, typer.Option("--next", min=0, help="How many next fire "
                                                                  "times to list.")] = 5,
    ticks: Annotated[int, typer.Option(min=1, help="At most this many ticks, newest "
                                                   "first.")] = 50,
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """Show a schedule: its next fire times and its recorded ticks (newest first)."""
    from seqline.orchestration.schedule.listing import schedule_detail
    from seqline.orchestration.store.rows import now

    with opened(root, store) as runs:
        runs.reap_interrupted()
        detail = schedule_detail(runs.schedules, runs.schedules.get_schedule(name), now(),
                                 next_count, ticks)
    if as_json:
        print_json(detail)
        return
    print_detail(console(), detail, wide)


@schedule_app.command("pause")
def pause_command(name: Name, root: RootUrl = DEFAULT_ROOT,
                  store: Store = None) -> None:
    """Pause a schedule: no tick is recorded until it is resumed (runs going go on)."""
    _set_paused(name, True, root, store)


@schedule_app.command("resume")
def resume_command(name: Name, root: RootUrl = DEFAULT_ROOT,
                   store: Store = None) -> None:
    """Resume a schedule: it fires from now on (the paused time is not caught up)."""
    _set_paused(name, False, root, store)


def _set_paused(name: str, paused: bool, root: str, store: str | None) -> None:
    from seqline.orchestration.store.rows import now

    with opened(root, store) as runs:
        runs.schedules.get_schedule(name)  # an unknown name: exit 2, with the closest
        runs.schedules.set_paused(name, paused, now())
    say(f"Schedule {name} {'paused' if paused else 'resumed'}.")


@schedule_app.command("remove")
def remove_command(name: Name, root: RootUrl = DEFAULT_ROOT,
                   store: Store = None) -> None:
    """Remove a schedule and its ticks; its runs stay in the run store."""
    with opened(root, store) as runs:
        runs.schedules.get_schedule(name)
        gone = runs.schedules.delete_schedule(name)
    say(f"Schedule {name} removed, with its {gone} tick(s); its runs stay.")


@schedule_app.command("export")
def export_command(
    name: Name,
    to: Annotated[Target, typer.Option("--to", help="The orchestrator.")] = Target.airflow,
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
) -> None:
    """Print the schedule as an Airflow DAG file (same cron, zone, catch-up; one run at a time)."""
    from seqline.orchestration.schedule.airflow import airflow_dag
    from seqline.pipeline.storage import open_root

    with opened(root, store) as runs:  # a bad --root exits 2 here, with one line
        schedule = runs.schedules.get_schedule(name)
    try:
        sys.stdout.write(airflow_dag(schedule, open_root(root), store))
    except SeqlineError as exc:
        fail(str(exc))


# The name and whether it is paused are always shown; the rest by priority (console.Column).
SCHEDULE_COLUMNS = [Column("name"), Column("paused"), Column("next fire (UTC)", 1),
                    Column("cron", 1), Column("tz", 2), Column("runner", 4),
                    Column("overlap", 5), Column("catch-up", 5), Column("pipeline", 3)]
# A tick is its fire time (a skipped one has no run): it, the run and both statuses are always
# shown (to the minute, they fit 80 columns with a backfill's run ids for a name like `nightly`).
TICK_COLUMNS = [Column("fire time (UTC)"), Column("trigger", 1), Column("status"),
                Column("run"), Column("run status"), Column("reason", 2, wraps=20)]


def fire_time_cell(value: str | None) -> str:
    """A stored fire time for a table, to the minute (cron fires on whole minutes):
    "2026-11-28T00:00:00+00:00" -> "2026-11-28 00:00" (the column's header says UTC)."""
    shown = format_time(value)
    return shown[:16] if shown != value else shown


def print_schedules(out: Console, rows: list[dict[str, Any]], wide: bool = False) -> None:
    """`schedule list` for a terminal (or a pipe: every column)."""
    print_table(out, SCHEDULE_COLUMNS, [
        [r["name"], "yes" if r["paused"] else "", fire_time_cell(r["next_fire"]) or "-", r["cron"],
         r["tz"], r["runner"], r["overlap"], r["catchup"], r["pipeline"]] for r in rows],
        wide=wide)


def print_detail(out: Console, detail: dict[str, Any], wide: bool = False) -> None:
    """`schedule show` for a terminal: the schedule, its next fire times, its ticks."""
    print_fields(out, [(key, _field(detail[key])) for key in (
        "name", "pipeline", "cron", "explanation", "tz", "paused", "runner", "workers",
        "overlap", "catchup", "max_catchup", "start", "end", "created")])
    print_table(out, [Column("next fire times (UTC)")],
                [[fire_time_cell(fire)] for fire in detail["next"]], wide=wide)
    if not detail["ticks"]:
        out.print("ticks: none yet (the scheduler records one at each fire time)",
                  highlight=False)
        return
    print_table(out, TICK_COLUMNS, [
        [fire_time_cell(t["fire_time"]), t["trigger"], t["status"], t["run_id"],
         t["run_status"], t["reason"]] for t in detail["ticks"]], wide=wide,
        title="ticks, newest first")


def _field(value: object) -> object:
    """A field's value as a person reads it: yes/no for a flag (--json keeps the boolean)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "" if value is None else value

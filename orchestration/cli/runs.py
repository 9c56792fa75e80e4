"""`seqline runs list|show|logs`: what ran, read from the run store, as tables or JSON."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console

from seqline.orchestration.cli.console import (
    Column,
    console,
    format_count,
    format_metric,
    format_seconds,
    format_time,
    print_fields,
    print_table,
)
from seqline.orchestration.cli.options import (
    AsJson,
    RootUrl,
    Store,
    Wide,
    fail,
    no_run,
    opened,
    print_json,
)
from seqline.orchestration.environment import DEFAULT_ROOT
from seqline.orchestration.store.statuses import RunStatus, Trigger
from seqline.pipeline.errors import RunNotFound, SeqlineError

__all__ = ["run_document", "runs_app"]

runs_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                       help="What ran, when, with what, and how it went (the run store).")


class LogLevel(StrEnum):
    """What `runs logs --level` takes: the lowest level shown."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"
    critical = "critical"


@runs_app.callback()
def runs_main() -> None:
    """What ran, when, with what, and how it went (the run store)."""


@runs_app.command("list")
def list_command(
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
    pipeline: Annotated[str | None, typer.Option(help="Only this pipeline's runs.")] = None,
    status: Annotated[RunStatus | None, typer.Option(help="Only runs in this status.")] = None,
    trigger: Annotated[Trigger | None, typer.Option(
        help="Only runs started so: by hand, by a schedule, a backfill or a resume.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 50,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """List runs, newest first (runs whose driver died show as interrupted)."""
    with opened(root, store) as runs:
        runs.reap_interrupted()
        rows = runs.list_runs(pipeline=pipeline, status=status.value if status else None,
                              trigger=trigger.value if trigger else None, limit=limit)
    if as_json:
        print_json(rows)
    else:
        print_table(console(), RUN_COLUMNS, [_run_row(r) for r in rows], wide=wide)


@runs_app.command("show")
def show_command(
    run_id: Annotated[str, typer.Argument(help="The run's id (see `seqline runs list`).")],
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
    wide: Wide = False,
    as_json: AsJson = False,
    events: Annotated[bool, typer.Option(
        "--events", help="With --json: add the run's events, in the order they happened "
                         "(progress coalesced per second).")] = False,
) -> None:
    """Show one run: its stages, counts, waits, cache hits, artifacts, evaluation, error."""
    with opened(root, store) as runs:
        runs.reap_interrupted()
        try:
            run = runs.show_run(run_id)
        except RunNotFound:
            no_run(run_id, root, store)
        if events:
            run["events"] = runs.events_of(run_id)
        commands = [] if as_json else _commands(run, root, store, runs)
    if as_json:
        print_json(run)
        return
    out = console()
    print_fields(out, _run_fields(run))
    print_table(out, STAGE_COLUMNS, [_stage_row(s) for s in run["stages"]], wide=wide,
                title="stages")
    for stage in run["stages"]:
        if stage["evaluation"]:
            _print_evaluation(out, stage["name"], stage["evaluation"], wide)
    for command in commands:  # the dashboard's run page shows the same lines
        out.print(f"{command.action}: {command.text}", markup=False, highlight=False)


@runs_app.command("logs")
def logs_command(
    run_id: Annotated[str, typer.Argument(help="The run's id (see `seqline runs list`).")],
    root: RootUrl = DEFAULT_ROOT,
    stage: Annotated[str | None, typer.Option(
        help="Only this stage's lines (`-`: the run's own, of no stage).")] = None,
    level: Annotated[LogLevel | None, typer.Option(
        help="Only lines at this level or above (error: errors only).")] = None,
    search: Annotated[str | None, typer.Option(
        help="Only lines holding this text (any case) in their message or traceback.")]
        = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the lines as stored: one JSON object per line.")] = False,
) -> None:
    """Print a run's log: its stages' story and its log lines, filtered as on the dashboard.

    The log is ROOT/runs/RUN_ID/log.jsonl; the filters are those of the dashboard's log page."""
    from seqline.orchestration.log_search import LogQuery, log_lines
    from seqline.pipeline.artifacts import check_run_id, run_dir
    from seqline.pipeline.storage import open_root

    try:
        folder = run_dir(open_root(root), check_run_id(run_id))
    except SeqlineError as exc:
        fail(str(exc))
    if not (folder / "run.json").exists():
        no_run(run_id, root)
    query = LogQuery(stage, level.value if level else None, search)
    found = False
    for line in log_lines(folder):
        found = True
        if query.keeps(line):
            typer.echo(json.dumps(line, ensure_ascii=False) if as_json else _log_line(line))
    if not found:
        fail(f"run {run_id!r} has no log: runs before seqline kept logs have none, and on "
             "an object-store root the log is put in place when the run ends.", 1)


def _log_line(line: dict[str, Any]) -> str:
    """`01:02:03.456 ERROR features: message` (the traceback indented below it)."""
    where = f" {line['stage']}:" if line.get("stage") else ""
    text = f"{str(line.get('time') or '')[11:23]} {line.get('level')}{where} {line.get('message')}"
    trace = line.get("traceback")
    return text + ("\n" + "\n".join("    " + t for t in str(trace).splitlines()) if trace
                   else "")


def run_document(root: str, store: str | None, run_id: str) -> dict[str, Any] | None:
    """The run as `runs show --json` prints it, or None when the store has no such run (it
    failed before its row was written) or cannot be read."""
    # Here, not at the top: the store loads SQLAlchemy, which `seqline --help` does not need.
    from sqlalchemy.exc import SQLAlchemyError

    from seqline.orchestration.store import RunStore
    from seqline.orchestration.store.engine import store_url
    from seqline.pipeline.storage import open_root

    try:
        with RunStore.open(*store_url(open_root(root), store)) as runs:
            found: dict[str, Any] = runs.show_run(run_id)
            return found
    except (SeqlineError, SQLAlchemyError):
        return None


def _commands(run: dict[str, Any], root: str, store: str | None, runs: Any) -> list[Any]:
    """The rerun, resume and backfill commands (orchestration.reruns), root made absolute."""
    from seqline.orchestration.reruns import rerun_commands
    from seqline.orchestration.schedule.launch import root_text
    from seqline.pipeline.storage import open_root

    tick = runs.schedules.tick_of_run(run["run_id"])
    return rerun_commands(run, root_text(open_root(root)), store,
                          tick.schedule if tick else None, tick.fire_time if tick else None)


# What the next command needs (the id, the status) is always shown; the rest by priority.
RUN_COLUMNS = [Column("run"), Column("status"), Column("pipeline", 1),
               Column("started (UTC)", 2), Column("seconds", 3, "right"), Column("runner", 4),
               Column("trigger", 5), Column("finished (UTC)", 6)]
STAGE_COLUMNS = [Column("stage"), Column("status"), Column("component", 1),
                 Column("in", 2, "right"), Column("out", 2, "right"),
                 Column("seconds", 2, "right"), Column("dead", 3, "right"),
                 Column("filtered", 4, "right"), Column("exploded", 5, "right"),
                 Column("waited in", 4, "right"), Column("waited out", 4, "right"),
                 Column("attempts", 5, "right"), Column("cache", 3), Column("why", 4, wraps=20),
                 Column("artifacts", 7)]


def _run_row(r: dict[str, Any]) -> list[str]:
    return [r["run_id"], r["status"], r["pipeline"], format_time(r["started"]),
            format_seconds(r["seconds"]), r["runner"], r["trigger"], format_time(r["finished"])]


def _run_fields(run: dict[str, Any]) -> list[tuple[str, object]]:
    """The run's own figures; its error as the one line every surface shows (the traceback
    is in `--json` and on the dashboard's stage page)."""
    fields: list[tuple[str, object]] = [(name, _text(run[name])) for name in (
        "run_id", "pipeline", "status", "trigger", "runner", "started", "finished")]
    if run.get("resumed"):  # its seconds are its attempts', without the pause between them
        fields.append(("resumed", _text(run["resumed"])))
    fields += [("seconds", format_seconds(run["seconds"])),
               *((name, _text(run[name])) for name in ("host", "pid", "seqline_version"))]
    fields.append(("options", json.dumps(run["options"], sort_keys=True)))
    if run["error"]:  # (a store before revision 5 kept the traceback under the line)
        fields.append(("error", (run["error"]["message"] or "").strip().split("\n")[0]))
    return fields


def _stage_row(s: dict[str, Any]) -> list[str]:
    cache = f"from {s['cached_from']}" if s["cached_from"] else (s["cache_key"] or "")[:12]
    outputs = [a["uri"] for a in s["artifacts"] if a["role"] == "output"]
    return [s["name"], s["status"], s["component"], format_count(s["records_in"]),
            format_count(s["records_out"]), format_seconds(s["seconds"]),
            format_count(s["dead_lettered"]), format_count(s["filtered"]),
            format_count(s["exploded"]), format_seconds(s["waited_input"]),
            format_seconds(s["waited_output"]), format_count(s["attempts"]), cache,
            s.get("reason") or "", ", ".join(outputs)]


def _print_evaluation(out: Console, stage: str, evaluation: dict[str, Any], wide: bool) -> None:
    blessed = {True: "blessed", False: "not blessed", None: "no verdict"}[evaluation["blessed"]]
    rows = [["(overall)", metric, format_metric(value)]
            for metric, value in evaluation["metrics"].items()]
    for column, values in evaluation["slices"].items():
        for value, metrics in values.items():
            rows += [[f"{column}={value}", metric, format_metric(number)]
                     for metric, number in metrics.items()]
    print_table(out, [Column("slice"), Column("metric"), Column("value", 0, "right")], rows,
                wide=wide, title=f"{stage}: {blessed}")


def _text(value: Any) -> str:
    return "" if value is None else str(value)

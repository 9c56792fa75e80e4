"""`seqline runs list|show` and `seqline store rebuild`: what ran, read from the run store."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlalchemy.exc import SQLAlchemyError

from seqline.orchestration.console import console
from seqline.orchestration.environment import DEFAULT_ROOT, DEFAULT_STORE
from seqline.orchestration.options import (
    AsJson,
    RootUrl,
    Store,
    opened,
    print_json,
    say,
    unwrapped_table,
)
from seqline.orchestration.store import RunStore
from seqline.pipeline.errors import SeqlineError
from seqline.pipeline.storage import open_root

__all__ = ["run_document", "runs_app", "store_app"]

runs_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                       help="What ran, when, with what, and how it went (the run store).")
store_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                        help="The run store itself.")


class Status(StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    interrupted = "interrupted"
    cancelled = "cancelled"




@runs_app.callback()
def runs_main() -> None:
    """What ran, when, with what, and how it went (the run store)."""


@store_app.callback()
def store_main() -> None:
    """The run store itself (a group even with one command, so `store rebuild` stays)."""


@runs_app.command("list")
def list_command(
    root: RootUrl = str(DEFAULT_ROOT),
    store: Store = DEFAULT_STORE,
    pipeline: Annotated[str | None, typer.Option(help="Only this pipeline's runs.")] = None,
    status: Annotated[Status | None, typer.Option(help="Only runs in this status.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 50,
    as_json: AsJson = False,
) -> None:
    """List runs, newest first (runs whose driver died show as interrupted)."""
    with opened(root, store) as runs:
        runs.reap_interrupted()
        rows = runs.list_runs(pipeline=pipeline, status=status.value if status else None,
                                limit=limit)
    if as_json:
        print_json(rows)
    else:
        console().print(_runs_table(rows))


@runs_app.command("show")
def show_command(
    run_id: Annotated[str, typer.Argument(help="The run's id (see `seqline runs list`).")],
    root: RootUrl = str(DEFAULT_ROOT),
    store: Store = DEFAULT_STORE,
    as_json: AsJson = False,
) -> None:
    """Show one run: its stages, counts, waits, cache hits, artifacts, evaluation, error."""
    with opened(root, store) as runs:
        runs.reap_interrupted()
        run = runs.show_run(run_id)
    if as_json:
        print_json(run)
        return
    out = console()
    out.print(_run_grid(run))
    out.print(_stages_table(run["stages"]))
    for stage in run["stages"]:
        if stage["evaluation"]:
            out.print(_evaluation_table(stage["name"], stage["evaluation"]))


@store_app.command("rebuild")
def rebuild_command(root: RootUrl = str(DEFAULT_ROOT),
                    store: Store = DEFAULT_STORE) -> None:
    """Recreate the store's rows from ROOT/runs/*/run.json and the stage manifests."""
    with opened(root, store) as runs:
        added = runs.rebuild(root)
        url = runs.url
    say(f"indexed {added} run(s) from {str(root).rstrip('/')}/runs into {url}")


def run_document(root: str, store: str | None, run_id: str) -> dict[str, Any] | None:
    """The run as `runs show --json` prints it, or None when the store has no such run (it
    failed before its row was written) or cannot be read."""
    from seqline.orchestration.api import store_url  # the run path's rule, one place

    try:
        with RunStore.open(*store_url(open_root(root), store)) as runs:
            found: dict[str, Any] = runs.show_run(run_id)
            return found
    except (SeqlineError, SQLAlchemyError):
        return None


def _runs_table(rows: list[dict[str, Any]]) -> Table:
    table = unwrapped_table("run", "pipeline", "status", "runner", "trigger", "started",
                            "finished", "seconds")
    for r in rows:
        table.add_row(r["run_id"], r["pipeline"], r["status"], r["runner"], r["trigger"],
                      r["started"], r["finished"] or "", _text(r["seconds"]))
    return table


def _run_grid(run: dict[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    for name in ("run_id", "pipeline", "status", "trigger", "runner", "started", "finished",
                 "host", "pid", "seqline_version"):
        grid.add_row(name, _text(run[name]))
    grid.add_row("options", json.dumps(run["options"], sort_keys=True))
    if run["error"]:
        grid.add_row("error", " ".join(f"{k}={v}" for k, v in run["error"].items() if v))
    return grid


def _stages_table(stages: list[dict[str, Any]]) -> Table:
    table = unwrapped_table("stage", "component", "status", "attempts", "in", "out",
                            "filtered", "exploded", "dead", "seconds", "waited in",
                            "waited out", "cache", "artifacts")
    for s in stages:
        cache = f"from {s['cached_from']}" if s["cached_from"] else (s["cache_key"] or "")[:12]
        outputs = [a["uri"] for a in s["artifacts"] if a["role"] == "output"]
        table.add_row(s["name"], s["component"], s["status"], str(s["attempts"]),
                      *(_text(s[k]) for k in ("records_in", "records_out", "filtered",
                                              "exploded", "dead_lettered", "seconds",
                                              "waited_input", "waited_output")),
                      cache, ", ".join(outputs))
    return table


def _evaluation_table(stage: str, evaluation: dict[str, Any]) -> Table:
    blessed = {True: "blessed", False: "not blessed", None: "no verdict"}[evaluation["blessed"]]
    table = unwrapped_table("slice", "metric", "value", title=f"{stage}: {blessed}")
    for metric, value in evaluation["metrics"].items():
        table.add_row("(overall)", metric, _text(value))
    for column, values in evaluation["slices"].items():
        for value, metrics in values.items():
            for metric, number in metrics.items():
                table.add_row(f"{column}={value}", metric, _text(number))
    return table


def _text(value: Any) -> str:
    return "" if value is None else str(value)

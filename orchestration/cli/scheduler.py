"""`seqline scheduler` (the foreground daemon) and `seqline backfill`."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from seqline.orchestration.cli.console import Column, console, print_table
from seqline.orchestration.cli.options import (
    AsJson,
    RootUrl,
    Store,
    Wide,
    fail,
    missing_store,
    opened,
    output,
    print_json,
    say,
    shown_url,
)
from seqline.orchestration.cli.schedule import fire_time_cell
from seqline.orchestration.environment import DEFAULT_ROOT
from seqline.orchestration.store.statuses import RunStatus, TickStatus
from seqline.pipeline.errors import SeqlineError

if TYPE_CHECKING:
    from seqline.pipeline.storage import Folder

__all__ = ["backfill", "scheduler"]

Logs = Annotated[Path | None, typer.Option(
    help="Folder of the runs' output, one RUN_ID.log each (default: ROOT/logs; for an "
         "object-store root, ~/.seqline/logs/<root as a name>).")]


# Each row is a fire time: it, the run, its status and the tick's are always shown (to the
# minute, they fit 80 columns with a backfill's run ids for a name like `nightly`).
OUTCOME_COLUMNS = [Column("fire time (UTC)"), Column("run"), Column("run status"),
                   Column("tick"), Column("reason", 1, wraps=20)]

# The scheduler's lines carry no level; those that report a failure say so in these words
# (a launch that failed, a run that exited non-zero, the store failing a pass).
FAILURE = re.compile(r"\bfail|exit code [1-9]", re.I)


def log(line: str) -> None:
    """One line on stderr, time-stamped (journald and `kubectl logs` keep it whole); under -q
    only the lines that report a failure."""
    if not output.quiet or FAILURE.search(line):
        _write(line)


def _write(line: str) -> None:
    from seqline.orchestration.store.rows import iso, now

    sys.stderr.write(f"{iso(now())} {line}\n")
    sys.stderr.flush()


def scheduler(
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
    logs: Logs = None,
    interval: Annotated[float, typer.Option(
        min=0.1, help="Seconds between looks at the schedules.")] = 1.0,
) -> None:
    """Fire the schedules (foreground; stop it with SIGTERM or Ctrl-C, runs go on).

    Each due fire time is recorded as a tick in the run store, then its run starts as a
    `seqline run` process of its own. One scheduler per store: a second one exits 2.
    """
    # Here, not at the top: the scheduler's modules load SQLAlchemy, which `seqline --help`
    # does not need (so in each command of this module).
    from seqline.orchestration.schedule.daemon import LeaseLost, Scheduler
    from seqline.orchestration.schedule.launch import ProcessLauncher, logs_folder
    from seqline.orchestration.store.liveness import HOST

    stop = threading.Event()
    stopped_by: list[str] = []

    def on_signal(number: int, _frame: object) -> None:
        stopped_by.append(signal.Signals(number).name)
        stop.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, on_signal)
    where = _root(root)
    folder = logs_folder(where, logs)
    absent = None if store else missing_store(where, None)
    if absent is not None:  # no schedule can be there: idling on a new store helps nobody
        fail(f"no run store at {absent}, so no schedules; add one with `seqline schedule add "
             f"NAME PIPELINE --cron CRON --root {root}`, or pass the --root (or --store) "
             "where the schedules are")
    if not _store_opens(where, store, stop):
        log(f"scheduler stopped ({', '.join(stopped_by)}) before its run store opened")
        return
    with opened(root, store, create=True) as runs:  # a --store server's tables: made
        launcher = ProcessLauncher(where, store, folder)
        daemon = Scheduler(runs, launcher, log=log)
        if not daemon.wait_for_lease(stop):  # a second scheduler: LeaseHeld, exit 2 (`opened`)
            log(f"scheduler stopped ({', '.join(stopped_by)}) before it took the run store's "
                "lease")
            return
        active = [s for s in runs.schedules.list_schedules() if not s.paused]
        log(f"scheduler started on {HOST} (pid {os.getpid()}) for the run store at "
            f"{runs.url}: {len(active)} active schedule(s); run logs in {folder}")
        try:
            daemon.run(stop, interval)
        except LeaseLost as exc:
            _write(str(exc))  # an error: printed even under -q
            raise typer.Exit(1) from None
        going = sorted(launcher.children)
        log(f"scheduler stopped ({', '.join(stopped_by) or 'done'}); "
            + (f"runs still going on their own: {', '.join(going)}" if going
               else "no run of it is going"))


def backfill(
    name: Annotated[str, typer.Argument(help="The schedule.")],
    start: Annotated[str, typer.Option("--from", help="First time of the range (ISO; no "
                                                      "offset: in the schedule's zone).")],
    end: Annotated[str, typer.Option("--to", help="Last time of the range (ISO).")],
    max_active: Annotated[int, typer.Option(min=1, help="At most this many runs at once.")]
        = 1,
    root: RootUrl = DEFAULT_ROOT,
    store: Store = None,
    logs: Logs = None,
    wide: Wide = False,
    as_json: AsJson = False,
) -> None:
    """Run NAME once per fire time from --from to --to, oldest first (trigger `backfill`).

    Waits for the runs. Running the same backfill again launches the fire times left without
    a run; a run that failed is finished with `seqline run … --resume` (printed).
    """
    from sqlalchemy.exc import DBAPIError

    from seqline.orchestration.reruns import RESUMABLE
    from seqline.orchestration.schedule.backfill import Backfill
    from seqline.orchestration.schedule.launch import ProcessLauncher, logs_folder, root_text
    from seqline.orchestration.schedule.times import parse_time
    from seqline.orchestration.store.rows import iso

    where = _root(root)
    folder = logs_folder(where, logs)
    with opened(root, store) as runs:
        schedule = runs.schedules.get_schedule(name)
        first = parse_time(start, schedule.tz, "--from")
        last = parse_time(end, schedule.tz, "--to")
        launcher = ProcessLauncher(where, store, folder)
        try:
            outcome = Backfill(runs, launcher, log=log).run(schedule, first, last, max_active)
            launcher.wait_all(30.0)  # every run's log whole when the backfill ends
        except KeyboardInterrupt:
            fail("backfill stopped: launched runs go on; run the same command again to "
                 "launch the rest.", 130)
        except DBAPIError as exc:  # a full disk, a database gone: in the driver's words
            place = shown_url(store) if store else f"of --root {root}"
            words = str(exc.orig or exc).splitlines()[0]
            fail(f"backfill stopped: the run store {place} could not record a tick ({words}); "
                 "launched runs go on; run the same command again to launch the rest.", 1)
        failed = {o.tick.run_id: runs.show_run(o.tick.run_id) for o in outcome
                  if o.tick.run_id and o.run_status in RESUMABLE}
    rows: list[dict[str, Any]] = [
        {"fire_time": iso(o.tick.fire_time),
         "run_id": o.tick.run_id if o.tick.status == TickStatus.launched else None,
         "status": o.tick.status, "run_status": o.run_status, "reason": o.tick.reason,
         "launched_now": o.launched_now} for o in outcome]
    if as_json:
        print_json(rows)
    else:
        print_table(console(), OUTCOME_COLUMNS, [
            [fire_time_cell(r["fire_time"]), r["run_id"], r["run_status"], r["status"],
             r["reason"]] for r in rows], wide=wide, title=f"backfill {name}")
    _say_outcome(name, rows, failed, root_text(where), store, folder, as_json)


def _say_outcome(name: str, rows: list[dict[str, Any]], failed: dict[str, dict[str, Any]],
                 root: str, store: str | None, logs: Path, as_json: bool) -> None:
    """What the backfill did, and for each fire time that did not succeed, why and what to run
    next (on stderr, exit 1); `seqline run … --resume` for a run that failed."""
    from seqline.orchestration.reruns import resume_command

    launched = sum(r["launched_now"] for r in rows)
    # a failed launch is this backfill's: it queues every earlier one again before it starts
    tried = launched + sum(r["status"] == TickStatus.failed for r in rows)
    did = (f"launched {launched} of {len(rows)} fire time(s)"
           + (f" ({len(rows) - tried} already had runs)" if tried < len(rows) else "")
           if tried else f"nothing left to run: {len(rows)} of {len(rows)} fire time(s) "
                         "already have runs")
    problems = [p for p in (_problem(r, failed, logs) for r in rows) if p]
    if not problems:
        if not as_json:
            say(f"backfill {name}: {did}; every run succeeded.")
        return
    for problem in problems:
        typer.echo(f"error: {problem}", err=True)
    commands = [c for c in (resume_command(run, root, store) for run in failed.values()) if c]
    ending = [f"backfill {name}: {did}; {len(problems)} failed."]
    if any(r["status"] == TickStatus.failed or (r["run_id"] and r["run_status"] is None)
           for r in rows):  # the next backfill launches these
        ending.append("Fix the cause, then run the same backfill again: it launches the fire "
                      "times left without a run.")
    if commands:  # never launched again: resumed, its committed stages kept
        ending.append(f"Finish the failed run{'s' if len(commands) > 1 else ''} with:")
    typer.echo(" ".join(ending), err=True)
    for command in commands:
        typer.echo(f"  {command}", err=True)
    raise typer.Exit(1)


def _problem(row: dict[str, Any], failed: dict[str, dict[str, Any]], logs: Path) -> str | None:
    """Why a fire time did not succeed, in one line (its run's stored error); None if it did
    or needs nothing (a tick skipped: its run id was taken by an older run)."""
    run_id, status = row["run_id"], row["run_status"]
    if row["status"] == TickStatus.failed:
        return f"fire time {row['fire_time']}: {row['reason']}"
    if run_id is None or status == RunStatus.succeeded:
        return None
    if status is None:
        return f"run {run_id} ended before it reached the run store: see {logs / run_id}.log"
    error = (failed.get(run_id, {}).get("error") or {}).get("message") or ""
    words = error.strip().split("\n")[0]
    return f"run {run_id} {status}" + (f": {words}" if words else "")


def _store_opens(where: Folder, url: str | None, stop: threading.Event) -> bool:
    """Whether the run store opens, waiting (as for its lease) while the disk under its
    SQLite file refuses it: on a full disk SQLite cannot make its -shm file ("disk I/O
    error"). Any other failure (a bad URL, a database not there) is left to `opened` to say
    in one line, exit 2. False: stopped while waiting.
    """
    from seqline.orchestration.schedule.backoff import waits
    from seqline.orchestration.store import RunStore, sqlite_url
    from seqline.orchestration.store.engine import store_url
    from seqline.orchestration.store.errors import StoreFailed, database_words

    base, found = store_url(where, url)
    for wait in waits(stop):
        try:
            RunStore.open(base, found).close()
            return True
        except StoreFailed as exc:  # its disk refuses it (see store.errors.opening)
            log(f"the run store at {shown_url(found or sqlite_url(base))} failed to open "
                f"({database_words(exc.__cause__ or exc)}: its disk is full or failing); "
                f"trying again in {wait:.0f} s")
        except SeqlineError:
            return True
    return False


def _root(text: str) -> Folder:
    """--root opened (a bad URL: exit 2 with one line before anything starts)."""
    from seqline.pipeline.storage import open_root

    try:
        return open_root(text)
    except SeqlineError as exc:
        fail(str(exc))

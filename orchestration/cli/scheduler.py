"""`seqline scheduler` (the foreground daemon) and `seqline backfill`."""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from seqline.orchestration.cli.console import Column, console, format_time, print_table
from seqline.orchestration.cli.options import (
    AsJson,
    RootUrl,
    Store,
    Wide,
    fail,
    opened,
    output,
    print_json,
    shown_url,
)
from seqline.orchestration.environment import DEFAULT_ROOT
from seqline.orchestration.store.statuses import RunStatus, TickStatus
from seqline.pipeline.errors import SeqlineError

if TYPE_CHECKING:
    from seqline.pipeline.storage import Folder

__all__ = ["backfill", "scheduler"]

Logs = Annotated[Path | None, typer.Option(
    help="Folder of the runs' output, one RUN_ID.log each (default: ROOT/logs; for an "
         "object-store root, ~/.seqline/logs/<root as a name>).")]


# A tick's run id holds its fire time; the run, its status and the tick's are always shown.
OUTCOME_COLUMNS = [Column("fire time (UTC)", 1), Column("run"), Column("run status"),
                   Column("tick"), Column("reason", 2)]

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
    if not _store_opens(where, store, stop):
        log(f"scheduler stopped ({', '.join(stopped_by)}) before its run store opened")
        return
    with opened(root, store, create=True) as runs:  # it records ticks: a store of its own
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

    Waits for the runs. Running the same backfill again finishes what is left of it.
    """
    from sqlalchemy.exc import DBAPIError

    from seqline.orchestration.schedule.backfill import Backfill
    from seqline.orchestration.schedule.launch import ProcessLauncher, logs_folder
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
    rows = [{"fire_time": iso(t.fire_time), "run_id": t.run_id if t.status == TickStatus.launched
             else None, "status": t.status, "run_status": state, "reason": t.reason}
            for t, state in outcome]
    if as_json:
        print_json(rows)
    else:
        print_table(console(), OUTCOME_COLUMNS, [
            [format_time(r["fire_time"]), r["run_id"], r["run_status"], r["status"], r["reason"]]
            for r in rows], wide=wide, title=f"backfill {name}")
    if any(r["run_status"] != RunStatus.succeeded for r in rows
           if r["status"] == TickStatus.launched) \
            or any(r["status"] == TickStatus.failed for r in rows):
        raise typer.Exit(1)


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

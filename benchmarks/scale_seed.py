"""A run store of many runs of realistic shape, written call by call as the recorder writes.

Every row goes through `RunWriter` (and `ScheduleStore` for schedules and ticks), the methods
a real run's recorder calls in the same order: the run, every planned stage as pending, then
each stage begun, sampled, finished, its artifacts, epochs and evaluation; then the run's end.
Nothing is written with SQL of its own, so the seeded store cannot drift from the schema.

The writer stamps rows with the time now, as for a real run; to lay 10,000 runs over 90 days in
a couple of minutes, the writer's clock is a simulated one while seeding (`simulated`).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from seqline.components import COMPONENTS
from seqline.orchestration.schedule.times import run_id_for
from seqline.orchestration.store import RunStore, writes
from seqline.orchestration.store.liveness import INTERRUPTED, STAGE_INTERRUPTED
from seqline.orchestration.store.schedules import Schedule

__all__ = ["PIPELINES", "Seeded", "seed"]

# Four pipelines of 4-6 stages, named as users name them; (stage, component) in plan order.
PIPELINES: dict[str, tuple[tuple[str, str], ...]] = {
    "weather": (("read", "ingest"), ("examples", "tfrecord_write"), ("features", "preprocess"),
                ("batches", "batching"), ("model", "train"), ("evaluation", "evaluate")),
    "clicks-daily": (("read", "ingest"), ("clean", "preprocess"),
                     ("shards", "tfrecord_write"), ("features", "preprocess")),
    "sensor-backfill": (("read", "ingest"), ("parse", "preprocess"),
                        ("examples", "tfrecord_write"), ("batches", "batching"),
                        ("model", "train")),
    "churn": (("read", "ingest"), ("features", "preprocess"), ("examples", "tfrecord_write"),
              ("batches", "batching"), ("model", "train"), ("evaluation", "evaluate")),
}
SHARE = {"weather": 0.35, "clicks-daily": 0.30, "sensor-backfill": 0.15, "churn": 0.20}
# The schedules that launch some of the runs (one paused): name -> (pipeline, cron).
SCHEDULES = {"clicks-nightly": ("clicks-daily", "0 2 * * *"),
             "weather-hourly": ("weather", "0 * * * *"),
             "churn-weekly": ("churn", "30 3 * * 1"),
             "sensor-replay": ("sensor-backfill", "0 4 1 * *")}
# Seconds a stage takes, by component: training dominates, as on the demo.
SECONDS = {"ingest": (3, 20), "tfrecord_write": (5, 30), "preprocess": (5, 60),
           "batching": (1, 5), "train": (60, 600), "evaluate": (5, 20)}
SPAN = timedelta(days=90)  # the seeded history: about a quarter of a busy team's runs
SAMPLED_EVERY = 10  # every 10th run keeps its per-second samples (and the newest 50 all do)
MAX_SAMPLES = 60  # per stage: a minute of samples, as a short demo-sized stage has
LIVE = 3  # the newest runs are going while the pages are read (their driver: this process)


@dataclass
class Seeded:
    """What the seeding wrote: counts by status, pipeline and trigger; the going runs."""

    runs: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    pipelines: Counter[str] = field(default_factory=Counter)
    triggers: Counter[str] = field(default_factory=Counter)
    sampled: int = 0
    live: list[str] = field(default_factory=list)


class Clock:
    """The writer's `now` while seeding: the simulated time a call happens at."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@contextmanager
def simulated(clock: Clock) -> Iterator[None]:
    """RunWriter stamps rows with `rows.now()`, imported into `writes`; swap it for `clock`.
    The statements are the writer's own; only the times they carry are simulated."""
    real = writes.now
    writes.now = clock
    try:
        yield
    finally:
        writes.now = real


def seed(store: RunStore, count: int, *, rng_seed: int = 27) -> Seeded:
    """Write `count` runs ending now (the newest LIVE still going), a few schedules and the
    scheduled runs' ticks.

    Args:
        store: an open, empty store.
        count: how many runs.
        rng_seed: the same seed writes the same runs (ids, shapes and outcomes).

    Returns:
        What was written.
    """
    rng, facts, end = random.Random(rng_seed), Seeded(), datetime.now(UTC)
    clock = Clock(end - SPAN)
    _schedules(store, clock.at)
    ticks: list[dict[str, Any]] = []
    last: dict[str, str] = {}  # pipeline -> its previous run (what a cache hit reuses)
    gap = SPAN / count
    with simulated(clock):
        for i in range(count):
            start = end - SPAN + gap * i + gap * rng.uniform(0, 0.5)
            live = i >= count - LIVE
            if live:  # started 15, 10 and 5 minutes ago: the runs going now
                start = end - timedelta(minutes=5 * (count - i))
            clock.at = start
            pipeline = rng.choices(list(SHARE), weights=list(SHARE.values()))[0]
            run_id, trigger, tick = _identity(rng, pipeline, start)
            if tick is not None:
                ticks.append(tick)
            sampled = i % SAMPLED_EVERY == 0 or i >= count - 50
            status = _write_run(store, clock, rng, run_id, pipeline, trigger,
                                last.get(pipeline), sampled, live)
            last[pipeline] = run_id
            facts.runs += 1
            facts.statuses[status] += 1
            facts.pipelines[pipeline] += 1
            facts.triggers[trigger] += 1
            facts.sampled += sampled
            if live:
                facts.live.append(run_id)
    for k in range(0, len(ticks), 500):
        store.schedules.record_ticks(ticks[k:k + 500])
    return facts


def _schedules(store: RunStore, created: datetime) -> None:
    for name, (pipeline, cron) in SCHEDULES.items():
        store.schedules.add_schedule(Schedule(
            name=name, pipeline=f"/srv/pipelines/{pipeline}.yaml", cron=cron, tz="UTC",
            runner="local", workers=2, overlap="skip", catchup="latest", max_catchup=5,
            start=None, end=None, paused=name == "sensor-replay", since=created,
            created=created))


def _identity(rng: random.Random, pipeline: str,
              start: datetime) -> tuple[str, str, dict[str, Any] | None]:
    """The run's id and trigger, and its tick when a schedule launched it."""
    schedule = next((n for n, (p, _) in SCHEDULES.items() if p == pipeline), None)
    draw = rng.random()
    if schedule and draw < 0.6:
        trigger = "backfill" if draw < 0.05 else "schedule"
        fire = start.replace(second=0, microsecond=0)
        run_id = run_id_for(schedule, fire, trigger)
        return run_id, trigger, {"schedule": schedule, "fire_time": fire, "trigger": trigger,
                                 "status": "launched", "run_id": run_id, "reason": None}
    trigger = "resume" if draw > 0.97 else "manual"
    # As api.new_run_id names a run: its start, to the second, and 4 hex digits.
    return start.strftime("%Y%m%dT%H%M%SZ-") + f"{rng.getrandbits(16):04x}", trigger, None


def _write_run(store: RunStore, clock: Clock, rng: random.Random, run_id: str, pipeline: str,
               trigger: str, previous: str | None, sampled: bool, live: bool) -> str:
    """One run, as the recorder writes it; returns its status."""
    plan = PIPELINES[pipeline]
    store.create_run(run_id, pipeline, pipeline_file=f"/srv/pipelines/{pipeline}.yaml",
                     fingerprint=hashlib.sha256(pipeline.encode()).hexdigest(), runner=rng.choice(
                         ("local", "local", "local", "beam", "ray")),
                     options={"workers": 2, "window": 8, "queue": 4}, trigger=trigger)
    ids = [store.start_stage(run_id, stage, component, status="pending",
                             params={"batch_size": 32, "seed": 7}, cache_key=f"{run_id}/{stage}",
                             reason="no earlier run with this cache key")
           for stage, component in plan]
    draw = rng.random()
    outcome = ("going" if live else "succeeded" if draw < 0.80 else "failed" if draw < 0.89
               else "interrupted" if draw < 0.92 else "cancelled" if draw < 0.94
               else "succeeded")
    # A going run is in its first or second stage: what came before it ended in the past.
    stop = (len(plan) if outcome == "succeeded" else rng.randrange(2) if outcome == "going"
            else rng.randrange(len(plan)))
    reused = rng.randrange(1, 4) if previous and outcome == "succeeded" and draw < 0.3 else 0
    for k, ((stage, component), stage_run) in enumerate(zip(plan, ids, strict=True)):
        if k < reused:
            _reuse(store, stage_run, previous or "", stage, component)
        elif k < stop:
            _stage(store, clock, rng, run_id, stage_run, plan, k, sampled)
        elif k == stop:
            _stop(store, clock, rng, run_id, stage_run, plan, k, outcome, sampled)
        elif outcome in ("failed", "cancelled"):
            store.finish_stage(stage_run, "skipped", counts={}, seconds=0.0, waited_input=0.0,
                               waited_output=0.0, max_in_flight=0,
                               reason=f"upstream `{plan[stop][0]}` failed")
        elif outcome == "interrupted":
            store.finish_stage(stage_run, "failed", counts={}, seconds=0.0, waited_input=0.0,
                               waited_output=0.0, max_in_flight=0, error=STAGE_INTERRUPTED)
    if outcome == "going":
        return "running"
    failed = outcome == "failed"
    store.finish_run(
        run_id, outcome, error_stage=plan[stop][0] if failed else None,
        error_seq=rng.randrange(10_000) if failed else None,
        error_message=(f"stage '{plan[stop][0]}' failed on seq {rng.randrange(10_000)}: "
                       "ValueError: no humidity in record" if failed
                       else INTERRUPTED if outcome == "interrupted"
                       else "cancelled (SIGTERM)" if outcome == "cancelled" else None),
        error_traceback="Traceback (most recent call last):\n  ...\nValueError: no humidity"
        if failed else None)
    return outcome


def _reuse(store: RunStore, stage_run: int, previous: str, stage: str, component: str) -> None:
    store.begin_stage(stage_run)
    store.finish_stage(stage_run, "cached", counts={"records_in": 1461, "records_out": 1461},
                       seconds=0.0, waited_input=0.0, waited_output=0.0, max_in_flight=0,
                       cached_from=previous)
    store.record_artifact(stage_run, "output", f"/srv/seqline/runs/{previous}/{stage}",
                          COMPONENTS[component].writes, 1461, 180_000, "sha256:" + "0" * 64)


def _stage(store: RunStore, clock: Clock, rng: random.Random, run_id: str, stage_run: int,
           plan: tuple[tuple[str, str], ...], k: int, sampled: bool) -> None:
    """A stage that commits: begun, sampled, finished, its artifacts, epochs, evaluation."""
    stage, component = plan[k]
    seconds = _begin(store, clock, rng, run_id, stage_run, plan[k], sampled)
    records = 1461 - rng.randrange(3)
    store.finish_stage(stage_run, "succeeded",
                       counts={"records_in": 1461, "records_out": records,
                               "filtered": 1461 - records, "dead_lettered": 0},
                       seconds=seconds, waited_input=seconds * rng.uniform(0, 0.3),
                       waited_output=seconds * rng.uniform(0, 0.1), max_in_flight=8,
                       block_retries=0)
    folder = f"/srv/seqline/runs/{run_id}/{stage}"
    store.record_artifact(stage_run, "output", folder, COMPONENTS[component].writes, records,
                          rng.randrange(50_000, 5_000_000), "sha256:" + f"{stage_run:064x}")
    if k:
        store.record_artifact(stage_run, "input", f"/srv/seqline/runs/{run_id}/{plan[k - 1][0]}",
                              "", None, None, None)
    if component == "train":
        store.add_epochs(stage_run, [
            {"epoch": e, "metrics": {"loss": 300 / (e + 1), "mae": 15 / (e + 1),
                                     "val_loss": 320 / (e + 1), "val_mae": 16 / (e + 1)},
             "input_wait_seconds": 0.02, "seconds": seconds / 15} for e in range(15)])
    if component == "evaluate":
        store.add_eval_metrics(stage_run, {"mae": 2.8, "rmse": 3.7}, {"weather": {
            w: {"mae": 3.0, "rmse": 4.0} for w in ("drizzle", "fog", "rain", "sun")}},
            blessed=rng.random() < 0.9)


def _stop(store: RunStore, clock: Clock, rng: random.Random, run_id: str, stage_run: int,
          plan: tuple[tuple[str, str], ...], k: int, outcome: str, sampled: bool) -> None:
    """The stage the run ended in: failed (with a failed earlier attempt, sometimes),
    interrupted, cancelled; or, for a going run, still running."""
    stage, component = plan[k]
    if outcome == "going":
        _begin(store, clock, rng, run_id, stage_run, plan[k], True)
        return
    seconds = _begin(store, clock, rng, run_id, stage_run, plan[k], sampled)
    error = {"failed": f"ValueError: no humidity in record (seq {rng.randrange(10_000)})",
             "interrupted": STAGE_INTERRUPTED, "cancelled": "cancelled"}[outcome]
    store.finish_stage(stage_run, "failed", counts={"records_in": rng.randrange(1461)},
                       seconds=seconds, waited_input=0.0, waited_output=0.0, max_in_flight=8,
                       error=error)
    if outcome == "failed" and rng.random() < 0.3:  # retried once: a second attempt failed
        again = store.start_stage(run_id, stage, component, params={"batch_size": 32},
                                  cache_key=f"{run_id}/{stage}", attempt=2)
        clock.at += timedelta(seconds=seconds)
        store.finish_stage(again, "failed", counts={"records_in": 0}, seconds=seconds,
                           waited_input=0.0, waited_output=0.0, max_in_flight=8, error=error)


def _begin(store: RunStore, clock: Clock, rng: random.Random, run_id: str, stage_run: int,
           step: tuple[str, str], sampled: bool) -> float:
    """Begin a stage now, write its samples and progress events as the recorder's flushes
    do (a batch every 2 s of stage time, 10 here), and move the clock past it."""
    store.begin_stage(stage_run)
    seconds = rng.uniform(*SECONDS[step[1]])
    t0 = clock.at.timestamp()
    if sampled:
        n = min(MAX_SAMPLES, max(2, int(seconds)))
        rows = [{"stage_run_id": stage_run, "t": t0 + seconds * (j + 1) / n,
                 "records_done": 1461 * (j + 1) // n, "rows_per_s": 1461 / seconds,
                 "waited_input": 0.1 * j, "waited_output": 0.02 * j, "in_flight": 4,
                 "reorder_held": j % 3} for j in range(n)]
        for b in range(0, n, 10):
            store.add_samples(rows[b:b + 10])
            store.add_events([{"run_id": run_id, "t": r["t"], "stage": step[0], "kind": "progress",
                               "body": {key: r[key] for key in list(r)[2:]}}
                              for r in rows[b:b + 10]])
    clock.at += timedelta(seconds=seconds)
    return seconds

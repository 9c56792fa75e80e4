"""The run store's writer during a run: a subscriber of the run's events that records, through
RunWriter, its stages, artifacts and lineage, the events themselves, and per-second samples of
every running stage (LiveStage)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from seqline.orchestration.cache import artifact_checksum
from seqline.orchestration.events import (
    BlockRetried,
    BlocksDone,
    Event,
    HeadOfLine,
    Occupancy,
    RecordsConsumed,
    RunEnded,
    RunStarted,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StageReused,
    StageSkipped,
    StageStarted,
    StageStopped,
    WaitEnded,
    WaitStarted,
)
from seqline.orchestration.live_stage import HEAD, PROGRESS, LiveStage
from seqline.orchestration.plan import RunPlan
from seqline.orchestration.store import RunStore
from seqline.orchestration.store.errors import database_words
from seqline.pipeline.errors import SeqlineError, StageError
from seqline.pipeline.specs import ComponentSpec, PipelineSpec

__all__ = ["RunRecorder"]

log = logging.getLogger("seqline")

# Writes go in batches every FLUSH_SECONDS (short transactions while readers read) and carry
# the heartbeat, which the store's reaper calls stale after 30 s.
FLUSH_SECONDS = 2.0
# Published once per block or per training batch: kept in the samples (one per stage and
# sampling interval), not one row each in the events table.
COALESCED = (BlocksDone, HeadOfLine, Occupancy, RecordsConsumed, WaitStarted, WaitEnded)


class RunRecorder:
    """One run's record in the store, written from its events.

    Stage rows are written as stages are planned, start, commit, fail, are cancelled or
    skipped; a daemon thread samples every running stage about every `sample_seconds`
    (records done, rows/s, waits, the peaks of blocks in flight and held in the reorder
    buffer, and what holds that buffer back now: its watermark and the block it waits for)
    and writes the samples, the events and a heartbeat in batches.
    """

    def __init__(self, store: RunStore, plan: RunPlan, spec: PipelineSpec,
                 components: dict[str, ComponentSpec[Any]]) -> None:
        self.store, self.plan, self.spec, self.components = store, plan, spec, components
        self.run_id = plan.run_id
        self.sample_seconds = plan.options.sample_seconds
        self._ids: dict[str, int] = {}
        self._live: dict[str, LiveStage] = {}
        self._events: list[dict[str, Any]] = []
        self._samples: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unrecorded: list[tuple[str, str]] = []  # (what, the store's error)
        # A resumed run's stages have rows already: a stage's next row is numbered after them
        # (a new run's row was just made: it has none).
        self._attempts = {s["name"]: len(s["history"]) + 1
                          for s in store.show_run(self.run_id)["stages"]
                          } if plan.options.resume else {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, COALESCED):
            self._follow(event)
            return
        with self._lock:
            self._events.append({"run_id": self.run_id, "t": event.t, "stage": event.stage,
                                 "kind": event.kind, "body": event.body()})
        handle = self._HANDLERS.get(type(event))
        if handle is not None:
            handle(self, event)

    # -- the run ----------------------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        """A row for every stage that runs or is reused, pending, in plan order (a stage kept
        from the resumed attempt has its row); then sampling begins."""
        for step in self.plan.steps:
            if step.action == "keep":
                continue
            stage = self.spec.stage(step.stage)
            with self._storing("that the stage is planned", step.stage):
                self._ids[step.stage] = self.store.start_stage(
                    self.run_id, step.stage, step.component, status="pending",
                    params=stage.params.model_dump(mode="json"), cache_key=step.cache_key,
                    attempt=self._attempts.get(step.stage, 0) + 1, reason=step.reason,
                    key_parts=dict(step.key_parts or {}))
        self._thread = threading.Thread(target=self._loop, daemon=True, name="seqline-recorder")
        self._thread.start()

    def _run_ended(self, event: RunEnded) -> None:
        """Stop sampling, write what is left, and record how the run ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._flush()

        def finish() -> None:
            self.store.finish_run(self.run_id, event.status, error_stage=event.error_stage,
                                  error_seq=event.error_seq, error_message=event.message,
                                  error_traceback=event.traceback)
        if event.status == "succeeded":  # a run the store does not know succeeded has not
            with self._storing("that the run succeeded"):
                finish()
            return
        self._record_failure("the run was cancelled" if event.status == "cancelled"
                             else f"the run {event.status}", finish)
        if self._unrecorded:  # one line for all of them: the cause is the same
            what, cause = ", ".join(w for w, _ in self._unrecorded), self._unrecorded[-1][1]
            log.warning("run %s: the run store could not record that %s (%s); `seqline runs` "
                        "will call the run interrupted once this process ends", self.run_id,
                        what, cause)

    # -- stages -----------------------------------------------------------------------------

    def _stage_started(self, event: StageStarted) -> None:
        name = event.stage or ""
        with self._storing("that the stage started", name):
            self.store.begin_stage(self._ids[name])
        with self._lock:
            self._live[name] = LiveStage(self._ids[name], started=time.perf_counter(),
                                         sampled=(time.perf_counter(), 0))

    def _stage_reused(self, event: StageReused) -> None:
        """A stage reused from a cached run: about 0 s now, from that run, and its artifact.
        A stage kept from the resumed attempt keeps its row, marked as kept."""
        name = event.stage or ""
        if event.action == "keep":
            with self._storing("that the stage is kept", name):
                self.store.note_stage(self.run_id, name, self.plan.step(name).reason)
            return
        with self._storing("what the stage reused", name):
            self.store.finish_stage(self._ids[name], "cached", counts=asdict(event.counts),
                                    seconds=0.0, waited_input=0.0, waited_output=0.0,
                                    max_in_flight=0, cached_from=event.reused_from)
            self._artifacts(name, event.path, event.manifest or {})

    def _stage_committed(self, event: StageCommitted) -> None:
        name = event.stage or ""
        self._end_sampling(name)
        with self._storing("what the stage committed", name):
            self.store.finish_stage(
                self._ids[name], "succeeded", counts=asdict(event.counts),
                seconds=event.seconds, waited_input=event.waited_input,
                waited_output=event.waited_output, max_in_flight=event.max_in_flight,
                block_retries=event.block_retries)
            self._artifacts(name, event.path, event.manifest or {})

    def _artifacts(self, name: str, path: Any, manifest: dict[str, Any]) -> None:
        """The stage's output artifact, the one it read, its epochs and evaluation."""
        stage_run, step = self._ids[name], self.plan.step(name)
        folder = (path or Path()).resolve()
        self.store.record_artifact(stage_run, "output", str(folder),
                                   self.components[step.component].writes,
                                   manifest.get("records_out"), _bytes(manifest),
                                   artifact_checksum(folder, _hashed(manifest)))
        if step.source is not None:
            source = folder.parent / step.source
            self.store.record_artifact(stage_run, "input", str(source), "", None, None, None)
        if manifest.get("epochs"):
            self.store.add_epochs(stage_run, manifest["epochs"])
        if "metrics" in manifest and "slices" in manifest:
            self.store.add_eval_metrics(stage_run, manifest["metrics"], manifest["slices"],
                                        blessed=manifest.get("blessed"))

    def _stage_ended(self, event: StageStopped | StageSkipped) -> None:
        """A stage that did not commit: failed or cancelled, with its account as the event
        tells it (the Python API's too), or skipped (it never started, or only waited for its
        input: no seconds, waits or records); and its error, or what stopped it."""
        name = event.stage or ""
        self._end_sampling(name)
        stage_run = self._ids.get(name)
        if stage_run is None:  # (a stage the plan did not run)
            return
        account: dict[str, Any] = {"counts": {}, "seconds": None, "waited_input": None,
                                   "waited_output": None, "max_in_flight": None}
        if isinstance(event, StageStopped):
            account = {"counts": {"records_in": event.records_in}, "seconds": event.seconds,
                       "waited_input": event.waited_input,
                       "waited_output": event.waited_output,
                       "max_in_flight": event.max_in_flight,
                       "block_retries": event.block_retries}
        status = "failed" if isinstance(event, StageFailed) else \
            "cancelled" if isinstance(event, StageCancelled) else "skipped"
        self._record_failure(f"stage {name} ended", lambda: self.store.finish_stage(
            stage_run, status, **account,
            error=event.message if isinstance(event, StageFailed) else None,
            reason=event.reason if isinstance(event, StageCancelled | StageSkipped) else None))

    _HANDLERS: dict[type, Callable[[RunRecorder, Any], None]] = {
        RunStarted: _run_started, RunEnded: _run_ended, StageStarted: _stage_started,
        StageReused: _stage_reused, StageCommitted: _stage_committed,
        StageFailed: _stage_ended, StageCancelled: _stage_ended, StageSkipped: _stage_ended,
        BlockRetried: lambda self, e: self._follow(e),
    }

    # -- live figures -----------------------------------------------------------------------

    def _follow(self, event: Event) -> None:
        """Keep a running stage's live figures (each sample takes them, and the peaks)."""
        with self._lock:
            live = self._live.get(event.stage or "")
            if live is not None:
                live.follow(event)

    def _sample(self, name: str, live: LiveStage, now: float) -> dict[str, Any]:
        """One sample of a stage (see LiveStage.sample), also kept as a progress event."""
        row = live.sample(now)
        body = {k: row[k] for k in PROGRESS} | {k: row[k] for k in HEAD if row[k] is not None}
        self._events.append({"run_id": self.run_id, "t": row["t"], "stage": name,
                             "kind": "progress", "body": body})
        return row

    def _end_sampling(self, name: str) -> LiveStage | None:
        """A stage that ends gets a last sample, so that one shorter than a sampling interval
        still shows its figures (and its peaks) on a chart."""
        with self._lock:
            live = self._live.pop(name, None)
            if live is not None and self.sample_seconds:
                self._samples.append(self._sample(name, live, time.perf_counter()))
        return live

    def _loop(self) -> None:
        flushed = time.perf_counter()
        while not self._stop.wait(self.sample_seconds or FLUSH_SECONDS):
            if self.sample_seconds:
                with self._lock:
                    now = time.perf_counter()
                    self._samples.extend(self._sample(n, live, now)
                                         for n, live in self._live.items())
            if time.perf_counter() - flushed >= FLUSH_SECONDS:
                self._flush()
                flushed = time.perf_counter()

    def _flush(self) -> None:
        """Write samples, events and a heartbeat. Charts are not worth a run: if the store
        cannot take them (locked for longer than its timeout, a full disk), say so, go on."""
        with self._lock:
            samples, events = self._samples, self._events
            self._samples, self._events = [], []
        try:
            self.store.add_samples(samples)
            self.store.add_events(events)
            self.store.heartbeat(self.run_id)
        except Exception as exc:  # the store's own errors vary by database driver
            log.warning("run %s: the run store could not record progress: %s", self.run_id,
                        database_words(exc))

    # -- when the store fails ---------------------------------------------------------------

    @contextmanager
    def _storing(self, what: str, stage: str | None = None) -> Iterator[None]:
        """A store that cannot take a write (a full disk, a database gone) fails the run in
        one line naming the stage (or the run); what was committed is kept for --resume."""
        try:
            yield
        except SQLAlchemyError as exc:  # (any database driver's errors, wrapped)
            where = f"stage {stage!r}: the" if stage else \
                f"run {self.run_id}: every stage committed, but the"
            message = (f"{where} run store at {self.store.url} could not record {what} "
                       f"({database_words(exc)}). Fix the store (free space on its disk, or start "
                       "its database), then finish the run with `seqline run … --resume "
                       f"--run-id {self.run_id}`: committed stages are kept.")
            raise (StageError(message, stage=stage) if stage else SeqlineError(message)) from exc

    def _record_failure(self, what: str, write: Callable[[], None]) -> None:
        """Record how a run or stage failed, if the store can. The run's own error is what the
        user must read: when the store fails too (a full disk holds both), say so in one line
        and let that error through rather than a traceback of the store's."""
        try:
            write()
        except Exception as exc:  # the store's own errors vary by database driver
            self._unrecorded.append((what, database_words(exc)))  # said once, as the run ends


def _hashed(manifest: dict[str, Any]) -> dict[str, str]:
    """The files whose SHA-256 the stage's writers recorded: shards, dead letters."""
    files = [*(manifest.get("shards") or []), manifest.get("dead_letters") or {}]
    return {f["path"]: f["sha256"] for f in files if "sha256" in f}


def _bytes(manifest: dict[str, Any]) -> int | None:
    shards = manifest.get("shards")
    return sum(s["bytes"] for s in shards) if shards else None

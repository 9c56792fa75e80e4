"""Writing a run into the run store as it goes: stages, artifacts and lineage, samples, beats."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import SQLAlchemyError

from seqline.orchestration.cache import artifact_checksum
from seqline.orchestration.store import RunStore
from seqline.pipeline.errors import SeqlineError, StageError
from seqline.pipeline.specs import ComponentSpec, StageSpec

if TYPE_CHECKING:
    from seqline.orchestration.executor import StageReport
    from seqline.orchestration.runners import Runner

__all__ = ["RunRecorder"]

log = logging.getLogger("seqline")

# One sample per running stage a second is what a live chart needs; writes go in batches
# every FLUSH_SECONDS (short transactions while readers read) and carry the heartbeat, which
# the store's reaper calls stale after 30 s.
SAMPLE_SECONDS = 1.0
FLUSH_SECONDS = 2.0


class RunRecorder:
    """One run's record in the store, kept current by the stage threads and a sampler.

    Stage threads call `started`, `committed` and `reused`; a daemon thread samples every
    running stage about once a second (records done, rows/s, waits, blocks in flight,
    reorder-buffer occupancy) and writes the samples and a heartbeat in batches.
    """

    def __init__(self, store: RunStore, run_id: str, components: dict[str, ComponentSpec[Any]],
                 keys: dict[str, str], sample_seconds: float | None = SAMPLE_SECONDS) -> None:
        self.store, self.run_id, self.components, self.keys = store, run_id, components, keys
        self.sample_seconds = sample_seconds
        self._ids: dict[str, int] = {}
        self._running: dict[str, StageReport] = {}
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unrecorded: list[tuple[str, str]] = []  # (what, the store's error)
        self.runner: Runner | None = None
        # A resumed run's stages have attempts already: a stage run again is the next one.
        self._attempts = {s["name"]: s["attempts"] for s in store.show_run(run_id)["stages"]}

    def plan(self, stages: list[StageSpec[Any]], skip: set[str]) -> None:
        """Every stage that will run, pending, in pipeline order (before any starts)."""
        for stage in stages:
            if stage.name not in skip:
                self._ids[stage.name] = self.store.start_stage(
                    self.run_id, stage.name, stage.component, status="pending",
                    params=stage.params.model_dump(mode="json"),
                    cache_key=self.keys.get(stage.name),
                    attempt=self._attempts.get(stage.name, 0) + 1)

    def start(self, runner: Runner) -> None:
        """Begin sampling and beating (until `close`)."""
        self.runner = runner
        self._thread = threading.Thread(target=self._loop, daemon=True, name="seqline-recorder")
        self._thread.start()

    def started(self, stage: StageSpec[Any], report: StageReport) -> None:
        stage_run = self._ids.get(stage.name)
        with self._storing("that the stage started", stage.name):
            if stage_run is None:
                stage_run = self.store.start_stage(
                    self.run_id, stage.name, stage.component,
                    params=stage.params.model_dump(mode="json"),
                    cache_key=self.keys.get(stage.name),
                    attempt=self._attempts.get(stage.name, 0) + 1)
            else:
                self.store.begin_stage(stage_run)
        with self._lock:
            self._ids[stage.name] = stage_run
            self._running[stage.name] = report
            self._last[stage.name] = (time.perf_counter(), 0)

    def committed(self, stage: StageSpec[Any], report: StageReport, manifest: dict[str, Any],
                  source: Path | None, cached_from: str | None = None) -> None:
        """A stage committed (or was taken from the cache): its account, artifact, lineage."""
        if stage.name not in self._ids:
            self.started(stage, report)
        with self._lock:
            self._running.pop(stage.name, None)
        with self._storing("what the stage committed", stage.name):
            self._committed(stage, report, manifest, source, cached_from)

    def _committed(self, stage: StageSpec[Any], report: StageReport, manifest: dict[str, Any],
                   source: Path | None, cached_from: str | None) -> None:
        stage_run = self._ids[stage.name]
        self.store.finish_stage(
            stage_run, "cached" if cached_from else "succeeded", counts=asdict(report.counts),
            seconds=report.seconds, waited_input=report.waited_input,
            waited_output=report.waited_output, max_in_flight=report.max_in_flight,
            cached_from=cached_from, block_retries=manifest.get("block_retries"))
        path = (report.path or Path()).resolve()
        self.store.record_artifact(stage_run, "output", str(path), self._kind(stage),
                                   manifest.get("records_out"), _bytes(manifest),
                                   artifact_checksum(path, _hashed(manifest)))
        if source is not None:
            self.store.record_artifact(stage_run, "input", str(source.resolve()), "", None, None,
                                       None)
        if manifest.get("epochs"):
            self.store.add_epochs(stage_run, manifest["epochs"])
        if "metrics" in manifest and "slices" in manifest:
            self.store.add_eval_metrics(stage_run, manifest["metrics"], manifest["slices"],
                                        blessed=manifest.get("blessed"))

    def failed(self, stage: str, report: StageReport, error: BaseException) -> None:
        """The run stopped before this stage committed: it failed, or never started."""
        with self._lock:
            begun = self._running.pop(stage, None) is not None
            stage_run = self._ids.get(stage)
        if stage_run is not None:
            self._record_failure(f"stage {stage} ended", lambda: self.store.finish_stage(
                stage_run, "failed" if begun else "skipped", counts=asdict(report.counts),
                seconds=report.seconds, waited_input=report.waited_input,
                waited_output=report.waited_output, max_in_flight=report.max_in_flight,
                error=_one_line(error), block_retries=self._retries(stage)))

    def close(self, status: str, error: BaseException | None = None) -> None:
        """Stop sampling, write what is left, and record how the run ended."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        stage = error.stage if isinstance(error, StageError) else None
        seq = error.seq if isinstance(error, StageError) else None

        def finish() -> None:
            self.store.finish_run(self.run_id, status, error_stage=stage, error_seq=seq,
                                  error_message=_one_line(error) if error else None)
        if error is None:  # a run the store does not know succeeded has not: an error
            with self._storing("that the run succeeded"):
                finish()
        else:
            self._record_failure("the run was cancelled" if status == "cancelled"
                                 else f"the run {status}", finish)
            if self._unrecorded:  # one line for all of them: the cause is the same
                what, cause = ", ".join(w for w, _ in self._unrecorded), self._unrecorded[-1][1]
                log.warning("run %s: the run store could not record that %s (%s); `seqline "
                            "runs` will call the run interrupted once this process ends",
                            self.run_id, what, cause)

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
                       f"({_store_error(exc)}). Fix the store (free space on its disk, or start "
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
            self._unrecorded.append((what, _store_error(exc)))  # said once, in close()

    def _kind(self, stage: StageSpec[Any]) -> str:
        return self.components[stage.component].writes

    def _loop(self) -> None:
        pending: list[dict[str, Any]] = []
        flushed = time.perf_counter()
        while not self._stop.wait(self.sample_seconds or FLUSH_SECONDS):
            if self.sample_seconds:
                pending.extend(self._sample())
            if time.perf_counter() - flushed >= FLUSH_SECONDS:
                self._flush(pending)
                pending, flushed = [], time.perf_counter()
        if self.sample_seconds:
            pending.extend(self._sample())
        self._flush(pending)

    def _flush(self, samples: list[dict[str, Any]]) -> None:
        """Write samples and a heartbeat. Charts are not worth a run: if the store cannot
        take them (locked for longer than its timeout, a full disk), say so and go on."""
        try:
            if samples:
                self.store.add_samples(samples)
            self.store.heartbeat(self.run_id)
        except Exception as exc:  # the store's own errors vary by database driver
            log.warning("run %s: the run store could not record progress: %s", self.run_id,
                        _store_error(exc))

    def _sample(self) -> list[dict[str, Any]]:
        now, rows = time.perf_counter(), []
        with self._lock:
            running = list(self._running.items())
        for name, report in running:
            done = records_done(report)
            before, done_before = self._last.get(name, (now, 0))
            self._last[name] = (now, done)
            waited_in, waited_out = report.live_waits() if report.live_waits else (
                report.waited_input, report.waited_output)
            in_flight, held = self._occupancy(name)
            rows.append({"stage_run_id": self._ids[name], "t": time.time(),
                         "records_done": done, "waited_input": waited_in,
                         "waited_output": waited_out, "in_flight": in_flight,
                         "reorder_held": held,
                         "rows_per_s": (done - done_before) / max(now - before, 1e-9)})
        return rows

    def _retries(self, stage: str) -> int | None:
        return self.runner.block_retries.get(stage) if self.runner is not None else None

    def _occupancy(self, stage: str) -> tuple[int, int]:
        runner = self.runner
        if runner is None:
            return 0, 0
        return runner.in_flight.get(stage, 0), runner.held.get(stage, 0)


def _store_error(exc: Exception) -> str:
    """The database's own words, on one line: SQLAlchemy's message adds the statement and its
    parameters, which are no help to a user and may hold a record's text."""
    return " ".join(str(getattr(exc, "orig", None) or exc).split())[:300]


def records_done(report: StageReport) -> int:
    """The records a running stage has consumed so far.

    A data stage's counts grow block by block. A driver stage (train, batching) sets its
    counts only when it ends; while it runs, its progress is what it reports through the
    report's `live_records` callable (train: the examples fed so far, over all epochs), when
    the executor gives it one.
    """
    live = getattr(report, "live_records", None)  # None: this stage reports no progress
    if callable(live):
        try:
            return max(int(live()), report.counts.records_in)
        except Exception as exc:  # a chart is not worth a run
            log.debug("%s: reading its progress failed: %s", report.stage, exc)
    return report.counts.records_in


def _hashed(manifest: dict[str, Any]) -> dict[str, str]:
    """The files whose SHA-256 the stage's writers recorded: shards, dead letters."""
    files = [*(manifest.get("shards") or []), manifest.get("dead_letters") or {}]
    return {f["path"]: f["sha256"] for f in files if "sha256" in f}


def _bytes(manifest: dict[str, Any]) -> int | None:
    shards = manifest.get("shards")
    return sum(s["bytes"] for s in shards) if shards else None


def _one_line(error: BaseException | None) -> str:
    text = f"{type(error).__name__}: {error}" if error is not None else ""
    return " ".join(text.split())[:2000]  # one line a person can paste into a search box


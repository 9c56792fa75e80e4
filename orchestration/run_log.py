"""A run's log stored with it: its Python log lines and its stages' story, as JSON lines."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import IO, Any

from seqline.orchestration.events import (
    BlockRetried,
    Event,
    RunEnded,
    RunStarted,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StagePlanned,
    StageReused,
    StageSkipped,
    StageStarted,
)
from seqline.pipeline.storage import Folder, scratch, storage_of

__all__ = ["ERROR_BYTES", "LOG_FILE", "MAX_BYTES", "MESSAGE_CHARS", "RunLog"]

LOG_FILE = "log.jsonl"  # in the run's folder, beside run.json: never an artifact of a stage
# What one attempt of a run may write: a chatty engine at -v writes ~1 MB a minute, so a day
# of it fits, and a runaway loop of warnings cannot fill a disk.
MAX_BYTES = 8 * 2**20
# Past MAX_BYTES only errors are kept, up to this much more: the failure that ends a noisy
# run is the line its reader needs most.
ERROR_BYTES = 2**20
# One line's message, and its traceback, at most: a logged DataFrame is not a log line.
MESSAGE_CHARS = 16_000
THREAD_PREFIX = "seqline-"  # the assembly line names each stage's thread seqline-<stage>
# Beam relays its SDK workers' log lines with the transform they ran in, and a stage's
# transform is labelled with the stage's name: `transform_id: "features/RunStage"`.
BEAM_TRANSFORM = re.compile(r'transform_id: "([^"]+)/')
# seqline's own lines name their stage first, as repr() writes it: `stage 'features': …`.
SAID_STAGE = re.compile(r"""stage (['"])(.+?)\1[: ]""")


class RunLog(logging.Handler):
    """The run's log: a `logging.Handler` on the root logger while the run goes, and a
    subscriber of its events, both writing one JSON object per line to `log.jsonl`.

    A line is `{"time", "level", "logger", "stage", "message"}` (+ `"traceback"`): time in
    UTC to the millisecond; stage the stage whose thread logged it (or the event's), else
    null. Locally the file is in the run's folder, appended and flushed line by line (a
    live page reads it); on an object store it is written on this machine and put into the
    run's folder when the run ends. Writing never fails the run: a full disk stops the log.

    Example line:
        {"time": "2026-11-25T01:02:03.456Z", "level": "ERROR", "logger": "seqline.run",
         "stage": "features", "message": "stage 'features' failed: ValueError: bad"}
    """

    def __init__(self, run: Folder, stages: Iterable[str], *, resume: bool = False,
                 max_bytes: int = MAX_BYTES, error_bytes: int = ERROR_BYTES) -> None:
        super().__init__()
        self.run = run
        self.stages = frozenset(stages)
        self.max_bytes, self.error_bytes = max_bytes, error_bytes
        self.local = scratch(run) / LOG_FILE
        self.uploads = storage_of(run).on_disk(run) is None  # an object store: put at the end
        self.written = 0  # bytes this attempt wrote
        self.cut = 0  # lines not kept past the cap
        self.failure_told = False  # a stage's failure is in the log: the run's end repeats it
        self._writing = threading.Lock()  # stage threads log and publish at once
        self._file: IO[str] | None = self._open(resume)
        self._loggers: list[logging.Logger] = []  # where it is attached

    def _open(self, resume: bool) -> IO[str] | None:
        try:
            self.local.parent.mkdir(parents=True, exist_ok=True)
            if self.uploads and resume and (self.run / LOG_FILE).exists():
                self.local.write_bytes((self.run / LOG_FILE).read_bytes())  # the earlier tries
            elif self.uploads:
                self.local.unlink(missing_ok=True)  # a stale copy of another attempt
            return open(self.local, "a", encoding="utf-8")  # noqa: SIM115 - held for the run
        except OSError:
            return None  # no log rather than no run

    # -- Python logging ------------------------------------------------------------------------

    def attach(self) -> None:
        """Receive every log record of this process until `detach`: on the root logger, and
        on each logger that keeps its records from it (`propagate = False`: Ray's, set up by
        `ray.init` before the stages run), where a record stops, so none is written twice."""
        self._loggers = [logging.getLogger(), *(
            logger for logger in list(logging.Logger.manager.loggerDict.values())
            if isinstance(logger, logging.Logger) and not logger.propagate)]
        for logger in self._loggers:
            logger.addHandler(self)

    def detach(self) -> None:
        for logger in self._loggers:
            logger.removeHandler(self)
        self._loggers = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stage = self._stage_of(record)
            trace = None
            if record.exc_info and record.exc_info[0] is not None:
                trace = logging.Formatter().formatException(record.exc_info)
            self.write(record.created, record.levelno, record.name, stage, record.getMessage(),
                       trace)
            self._print_as_before(record)
        except Exception:  # noqa: BLE001 - logging's own rule: a handler never raises
            self.handleError(record)

    def _stage_of(self, record: logging.LogRecord) -> str | None:
        """The stage a record came from: said by the record, its thread's name, the stage a
        seqline line names first (a retry told on a worker pool's thread), or the transform
        a Beam worker's line relayed on one of Beam's threads names."""
        stage = getattr(record, "stage", None)
        if stage in self.stages:
            return str(stage)
        thread = record.threadName or ""
        if thread.startswith(THREAD_PREFIX) and thread[len(THREAD_PREFIX):] in self.stages:
            return thread[len(THREAD_PREFIX):]
        if record.name.startswith("seqline"):  # "stage 'features': …", from a pool's thread
            said = SAID_STAGE.match(record.getMessage())
            if said and said.group(2) in self.stages:
                return said.group(2)
        if record.name.startswith("apache_beam"):
            found = BEAM_TRANSFORM.search(record.getMessage())
            if found and found.group(1) in self.stages:
                return found.group(1)
        return None

    def _print_as_before(self, record: logging.LogRecord) -> None:
        """What Python printed for this record before the run's log was installed: with no
        handler on the logger's way up, `logging.lastResort` writes warnings and errors to
        stderr (the terminal's lines must not change because the log keeps them too)."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(not isinstance(handler, RunLog) for handler in logger.handlers):
                return
            logger = logger.parent if logger.propagate else None
        # Two runs at once in one process: the first run's log prints, once.
        if next((h for h in logging.getLogger().handlers if isinstance(h, RunLog)), self) \
                is not self:
            return
        last = logging.lastResort
        if last is not None and record.levelno >= last.level:
            last.handle(record)

    # -- the run's events ------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        """A subscriber: the stages' lifecycle as lines (per-block progress is not told)."""
        if event.kind not in TOLD:  # most events: one per block; a set lookup, then gone
            return
        told = _told(event)
        if told is None:
            return
        level, message, trace = told
        if isinstance(event, StageFailed):
            self.failure_told = True
        if isinstance(event, RunEnded) and event.status == "failed" and self.failure_told:
            # The stage's line said why: "errors only" shows the failure once.
            level, trace = logging.INFO, None
            message = (f"run failed: stage {event.error_stage!r} failed (its error above); "
                       f"{_ran(event)}")
        try:
            self.write(event.t, level, "seqline.run", event.stage, message, trace)
        except Exception:  # noqa: BLE001 - a subscriber that raises would fail the run
            self._file = None
        if isinstance(event, RunEnded):
            self.close()

    # -- the file ------------------------------------------------------------------------------

    def write(self, t: float, level: int, logger: str, stage: str | None, message: str,
              trace: str | None = None) -> None:
        """One line, unless the cap holds it back (then it is counted)."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": logging.getLevelName(level), "logger": logger, "stage": stage,
            "message": _cut(message)}
        if trace:
            line["traceback"] = _cut(trace)
        text = json.dumps(line, ensure_ascii=False) + "\n"
        with self._writing:
            if self._file is None:
                return
            size = len(text.encode())
            limit = self.max_bytes + (self.error_bytes if level >= logging.ERROR else 0)
            if self.written + size > limit:
                if not self.cut:
                    self._put(self._cap_line(t))
                self.cut += 1
                return
            self._put(text)
            self.written += size

    def _cap_line(self, t: float) -> str:
        return json.dumps({
            "time": datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"), "level": "WARNING", "logger": "seqline.run", "stage": None,
            "message": f"the log reached its cap of {self.max_bytes / 2**20:g} MiB: from here "
                       "on only errors are kept"}) + "\n"

    def _put(self, text: str) -> None:
        if self._file is None:
            return
        try:
            self._file.write(text)
            self._file.flush()  # a live page and a crash see every line written
        except OSError:  # a full disk: the run goes on without its log
            self._file = None

    def close(self) -> None:
        """Detach, say how much the cap cut, and on an object store put the log in place."""
        self.detach()
        with self._writing:
            file, self._file = self._file, None
        if file is None:
            super().close()
            return
        if self.cut:
            file.write(json.dumps({
                "time": datetime.now(UTC).isoformat(timespec="milliseconds")
                .replace("+00:00", "Z"), "level": "WARNING", "logger": "seqline.run",
                "stage": None, "message": f"{self.cut:,} lines past the log's cap were not "
                                          "kept"}) + "\n")
        file.close()
        # Any SDK error: the local copy stays in $SEQLINE_HOME/scratch, and the run's result
        # does not depend on its log.
        with contextlib.suppress(Exception):
            if self.uploads:
                storage_of(self.run).write_atomically(self.run / LOG_FILE,
                                                      self.local.read_bytes())
        super().close()


TOLD = frozenset(e.kind for e in (RunStarted, StagePlanned, StageStarted, StageReused,
                                  BlockRetried, StageCommitted, StageFailed, StageCancelled,
                                  StageSkipped, RunEnded))


def _cut(text: str) -> str:
    if len(text) <= MESSAGE_CHARS:
        return text
    return f"{text[:MESSAGE_CHARS]}… ({len(text) - MESSAGE_CHARS:,} more characters cut)"


def _told(event: Event) -> tuple[int, str, str | None] | None:
    """An event as a log line (level, message, traceback), or None for progress."""
    info = logging.INFO
    if isinstance(event, RunStarted):
        how = "resumed" if event.resume else "started"
        return info, (f"run {event.run_id} {how}: pipeline {event.pipeline} on {event.runner}, "
                      f"{event.workers} workers, window {event.window}"), None
    if isinstance(event, StagePlanned):
        return info, f"plan: {event.action} — {event.reason}", None
    if isinstance(event, StageStarted):
        return info, "started", None
    if isinstance(event, StageReused):
        return info, ("kept from the earlier attempt" if event.action == "keep" else
                      f"reused from run {event.reused_from} (took {event.took:.2f} s)"), None
    if isinstance(event, BlockRetried):
        block = "a block" if event.block is None else f"block {event.block}"
        first = "" if event.first_seq is None else f" (first seq {event.first_seq})"
        return logging.WARNING, f"{block}{first} runs again: its worker died", None
    if isinstance(event, StageCommitted):
        c = event.counts
        return info, (f"committed in {event.seconds:.2f} s: {c.records_in:,} records in, "
                      f"{c.records_out:,} out, {c.filtered:,} filtered, "
                      f"{c.dead_lettered:,} dead-lettered"), None
    if isinstance(event, StageFailed):
        return logging.ERROR, event.message, event.traceback
    if isinstance(event, StageCancelled | StageSkipped):
        return logging.WARNING, event.reason, None
    if isinstance(event, RunEnded):
        level = {"succeeded": info, "cancelled": logging.WARNING}.get(event.status,
                                                                       logging.ERROR)
        said = f": {event.message}" if event.message else ""
        return level, f"run {event.status}{said}; {_ran(event)}", \
            event.traceback if level == logging.ERROR else None
    return None


def _ran(event: RunEnded) -> str:
    """Example: "ran 1 stage, reused 2"; "ran 1 stage, reused 0, 3 not run"; a resume's
    "ran 4 stages, reused 0, kept 2 from the earlier attempt" (as the terminal says it)."""
    not_run = f", {event.not_run} not run" if event.not_run else ""
    kept = f", kept {event.kept} from the earlier attempt" if event.kept else ""
    return (f"ran {event.ran} stage{'s' * (event.ran != 1)}, reused {event.reused - event.kept}"
            f"{kept}{not_run}")

"""What a stage's results add up to as they arrive: the account its manifest gives."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from seqline.components import COMPONENTS
from seqline.orchestration.events import (
    BlocksDone,
    Event,
    Occupancy,
    RecordsConsumed,
    StageStarted,
    WaitEnded,
)
from seqline.orchestration.live_stage import LiveStage
from seqline.orchestration.shard_reads import ShardReads
from seqline.pipeline.audit import SeqDigest
from seqline.pipeline.blocks import seq_of
from seqline.pipeline.deadletters import DeadLetterFile
from seqline.pipeline.drift import ProfileWindows
from seqline.pipeline.errors import StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.specs import StageSpec
from seqline.pipeline.storage import Folder, storage_of, write_json
from seqline.pipeline.tasks import BlockResult, Counts
from seqline.pipeline.tfrecord import schema_to_text

if TYPE_CHECKING:
    from seqline.orchestration.runners import Runner

__all__ = ["PROFILE", "StageOutput", "Tally", "manifest_of"]

PROFILE = "profile.json"  # the stage's data profile, beside its manifest


class StageOutput:
    """What a stage's results add up to: seq range and digest, dead letters, shards, schema.

    Dead letters are appended to the stage's file as they arrive and held to its error budget;
    shard descriptions are kept in block order, which is seq order. Unless the stage says
    `profile: false`, its blocks are profiled as they arrive (in seq order, so the profile has
    windows along source order) into profile.json.
    """

    def __init__(self, stage: StageSpec[Any], folder: Folder, feed: ShardFeed | None,
                 reads: ShardReads | None = None) -> None:
        self.stage, self.feed, self.folder, self.reads = stage, feed, folder, reads
        self.component = COMPONENTS[stage.component]
        self.digest = SeqDigest()
        self.dead = DeadLetterFile(folder)
        self.shards: list[dict[str, Any]] = []
        self.schema: pa.Schema | None = None
        self.seq_min: int | None = None
        self.seq_max: int | None = None
        self.forwarded = 0
        self.profile = ProfileWindows() if stage.profile else None

    def add(self, result: BlockResult) -> None:
        self.dead.add(result.dead_letters)
        if self.stage.errors:
            self.stage.errors.check_running(self.stage.name, self.dead.count, self.dead.first)
        batch = result.batch
        if batch is None or not batch.num_rows:
            return
        seq = seq_of(batch)
        self.digest.update(seq)
        self.seq_min = int(seq[0]) if self.seq_min is None else self.seq_min
        self.seq_max = int(seq[-1])
        if self.profile is not None:
            self.profile.add(batch)
        if result.shard is not None:
            self._check_schema(result, batch.schema)
            self.shards.append(result.shard)
            if self.reads is not None and result.read is not None:  # read by its worker
                self.reads.done(self.stage.name, len(self.shards) - 1, result.shard, result.read)
            elif self.reads is not None:  # read back now, for verify at the run's end
                self.reads.read(self.stage.name, len(self.shards) - 1, self.folder,
                                result.shard, self.stage.params.compression)
            if self.feed is not None:  # readers following the stage may read it now
                self.feed.add(result.shard, batch.schema, batch)

    def _check_schema(self, result: BlockResult, schema: pa.Schema) -> None:
        if self.schema is None:
            self.schema = schema
        elif schema != self.schema:
            raise StageError(
                f"stage {self.stage.name!r}: block {result.index} (first seq "
                f"{result.first_seq}) returned columns {_describe(schema)}, but earlier blocks "
                f"returned {_describe(self.schema)}. Return the same columns and types from "
                "every block (cast explicitly where a type depends on the data).",
                stage=self.stage.name, block=result.index, seq=result.first_seq)

    def finish(self, counts: Counts) -> dict[str, Any]:
        """The manifest's account of the output; raises if the error budget is exceeded."""
        dead = self.dead.close()
        if self.stage.errors:
            self.stage.errors.check_final(self.stage.name, self.dead.count, counts.records_in,
                                          self.dead.first)
        stored: dict[str, Any] = {"seq_digest": self.digest.hexdigest(), "dead_letters": dead}
        if self.profile is not None and self.profile.windows:
            # named per attempt where attempts share the folder (an object store), as dead
            # letters are; the manifest names it
            name = storage_of(self.folder).attempt_name(PROFILE)
            write_json(self.folder / name, self.profile.finish(), durable=True)
            stored["profile"] = {"path": name}
        if self.component.stores_records:
            stored |= {
                "format": "tfrecord",
                "compression": self.stage.params.compression,
                "schema": schema_to_text(self.schema) if self.schema else None,
                "features": {f.name: str(f.type) for f in self.schema or []},
                "shards": self.shards,
            }
        return stored


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


class Tally:
    """A subscriber: each stage followed as it runs (a LiveStage), for its manifest (the most
    blocks in flight and the blocks run again: the runner publishes them, it keeps no
    figures), for the account of a stage that stops before its commit, and for how a stop
    tells it (cancelled after its seconds once it had work, or skipped: never started, or only
    waited for its input)."""

    def __init__(self) -> None:
        self._live: dict[str, LiveStage] = {}
        self._started: dict[str, float] = {}
        self._fed: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        name = event.stage or ""
        with self._lock:
            if isinstance(event, StageStarted):
                self._started[name] = event.t
                self._live[name] = LiveStage(0, started=time.perf_counter())
                return
            live = self._live.get(name)
            if live is not None:
                live.follow(event)
            if isinstance(event, Occupancy) and event.in_flight or \
                    isinstance(event, BlocksDone | RecordsConsumed) or \
                    isinstance(event, WaitEnded) and event.on == "input":
                # a block in flight or done, records consumed, or a wait for input that
                # something ended
                self._fed.add(name)

    def peak(self, stage: str) -> int:
        with self._lock:
            live = self._live.get(stage)
            return live.max_in_flight if live else 0

    def retries(self, stage: str) -> int:
        with self._lock:
            live = self._live.get(stage)
            return live.retries if live else 0

    def account(self, stage: str) -> dict[str, Any]:
        """What a stage stopping now has done (StageStopped's figures): records in, its waits
        (one under way counted to now), the most blocks in flight, the blocks run again."""
        with self._lock:
            live = self._live.get(stage)
            if live is None:
                return {}
            waited_input, waited_output = live.waits(time.perf_counter())
            taken = live.records if live.taken is None else live.taken  # (train: see there)
            return {"records_in": taken, "waited_input": waited_input,
                    "waited_output": waited_output, "max_in_flight": live.max_in_flight,
                    "block_retries": live.retries}

    def started(self, stage: str) -> float | None:
        """When the stage's StageStarted was published (Unix seconds); None: not (yet)."""
        with self._lock:
            return self._started.get(stage)

    def fed(self, stage: str) -> bool:
        """Whether any of the stage's input reached it (a stage on the assembly line starts
        with the run, and may only have waited for its input)."""
        with self._lock:
            return stage in self._fed


def manifest_of(stage: StageSpec[Any], source: str | None, runner: Runner, counts: Counts,
                blocks: int, seq_min: int | None, seq_max: int | None, seconds: float,
                started: float, waited_input: float, waited_output: float, peak: int,
                retries: int, stored: dict[str, Any]) -> dict[str, Any]:
    """A committed stage's manifest.json: its account, its output, and how it ran."""
    return {
        "stage": stage.name,
        "component": stage.component,
        "status": "succeeded",
        **asdict(counts),
        "blocks": blocks,
        "seq_min": seq_min,
        "seq_max": seq_max,
        **stored,
        "input": source,
        "errors": stage.errors.model_dump() if stage.errors else None,
        "seconds": round(seconds, 4),
        "waited": {"input": round(waited_input, 4), "output": round(waited_output, 4)},
        "timeline": {"started": started, "finished": time.time()},
        "params": stage.params.model_dump(mode="json"),
        "runner": {"name": runner.name, "workers": runner.workers, "window": runner.window},
        "max_in_flight": peak,
        "block_retries": retries,
        "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }

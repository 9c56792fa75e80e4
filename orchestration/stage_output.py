"""What a stage's results add up to as they arrive: the account its manifest gives."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from seqline.components import COMPONENTS
from seqline.components.tfrecords import schema_to_text
from seqline.pipeline.audit import SeqDigest
from seqline.pipeline.blocks import seq_of
from seqline.pipeline.deadletters import DeadLetterFile
from seqline.pipeline.errors import StageError
from seqline.pipeline.feed import ShardFeed
from seqline.pipeline.specs import StageSpec
from seqline.pipeline.stage import BlockResult, Counts
from seqline.pipeline.storage import Folder

__all__ = ["StageOutput"]


class StageOutput:
    """What a stage's results add up to: seq range and digest, dead letters, shards, schema.

    Dead letters are appended to the stage's file as they arrive and held to its error budget;
    shard descriptions are kept in block order, which is seq order.
    """

    def __init__(self, stage: StageSpec[Any], folder: Folder, feed: ShardFeed | None) -> None:
        self.stage, self.feed = stage, feed
        self.component = COMPONENTS[stage.component]
        self.digest = SeqDigest()
        self.dead = DeadLetterFile(folder)
        self.shards: list[dict[str, Any]] = []
        self.schema: pa.Schema | None = None
        self.seq_min: int | None = None
        self.seq_max: int | None = None
        self.forwarded = 0

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
        if result.shard is not None:
            self._check_schema(result, batch.schema)
            self.shards.append(result.shard)
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

"""Where two runs' stored records first differ, along source order: a record, then a batch.

For each stage both runs stored as shards, the two artifacts are read shard by shard in
manifest (seq) order and compared a shard's records at a time, stopping at the first record
that differs (in seq or in any field): when the first record differs, one shard of each is
read. Artifacts with the same seq digest and the same shard checksums are identical unread.
The first diverging batch is the first training batch (from each run's train audit) whose
seq range differs, or which holds an example built from the first diverging record.

    first_divergences(root, "a", "b")
    -> [StageDivergence("features", identical=False, seq=3,
                        fields={"rained": (0, 1)}), ...]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from seqline.pipeline.artifacts import read_manifest, read_run_record, run_dir
from seqline.pipeline.blocks import SEQ
from seqline.pipeline.storage import Folder, open_root
from seqline.pipeline.tfrecord.coding import decode, schema_from_text
from seqline.pipeline.tfrecord.reading import read_shard

__all__ = ["BatchDivergence", "StageDivergence", "first_batch", "first_divergences"]


@dataclass(frozen=True)
class StageDivergence:
    """One stage's stored records in two runs: identical, or the first record that differs."""

    stage: str
    identical: bool
    seq: int | None = None  # A's seq at the first differing position (B's when A ran out)
    position: int | None = None  # 0-based rank of that record in the artifact
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # name -> (A, B)
    why: str = ""  # "B has fewer records", "different seq", ...


@dataclass(frozen=True)
class BatchDivergence:
    """The first training batch that differs: its index and each run's seq range."""

    index: int
    a: tuple[int, int] | None
    b: tuple[int, int] | None


def first_divergences(root: Folder | str, run_a: str, run_b: str) -> list[StageDivergence]:
    """For each stage that both runs stored as shards, in A's order, where they first differ."""
    place = open_root(root) if isinstance(root, str) else root
    a, b = run_dir(place, run_a), run_dir(place, run_b)
    found = []
    for name in _stages(a):
        ma, mb = _manifest(a, name), _manifest(b, name)
        if ma and mb and ma.get("shards") is not None and mb.get("shards") is not None:
            found.append(_compare(name, a / name, ma, b / name, mb))
    return found


def first_batch(root: Folder | str, run_a: str, run_b: str, seq: int | None
                ) -> BatchDivergence | None:
    """The first training batch whose seq range differs between the runs, or that holds an
    example built from record `seq` (the first diverging record); None when neither trained
    or nothing differs."""
    place = open_root(root) if isinstance(root, str) else root
    ba, bb = (_train_batches(run_dir(place, r)) for r in (run_a, run_b))
    if ba is None or bb is None:
        return None
    for i in range(max(len(ba), len(bb))):
        ra, rb = (ba[i] if i < len(ba) else None), (bb[i] if i < len(bb) else None)
        # An example's seq is its label's: a window's records come before it, so a record
        # first reaches the batch whose last example seq is at or past it.
        if ra != rb or (seq is not None and ra is not None and ra[1] >= seq):
            return BatchDivergence(i, ra, rb)
    return None


def _stages(run: Folder) -> list[str]:
    return list(read_run_record(run).get("stages") or [])


def _manifest(run: Folder, stage: str) -> dict[str, Any] | None:
    return read_manifest(run / stage) if (run / stage / "manifest.json").exists() else None


def _train_batches(run: Folder) -> list[tuple[int, int]] | None:
    for stage in _stages(run):
        m = _manifest(run, stage)
        if m and m.get("component") == "train" and m.get("epochs"):
            return [(x["first"], x["last"]) for x in m["epochs"][0].get("batches") or []]
    return None


def _same_bytes(ma: dict[str, Any], mb: dict[str, Any]) -> bool:
    """Same digest of seq and same shard checksums: the same records, without reading them."""
    return ma.get("seq_digest") == mb.get("seq_digest") and \
        [s.get("sha256") for s in ma["shards"]] == [s.get("sha256") for s in mb["shards"]]


def _compare(name: str, dir_a: Folder, ma: dict[str, Any], dir_b: Folder,
             mb: dict[str, Any]) -> StageDivergence:
    if _same_bytes(ma, mb):
        return StageDivergence(name, True)
    rows_a, rows_b = _Records(dir_a, ma), _Records(dir_b, mb)
    position = 0
    while True:
        chunk_a, chunk_b = rows_a.take(), rows_b.take()
        if chunk_a is None or chunk_b is None:
            return _ran_out(name, position, chunk_a, chunk_b)
        n = min(chunk_a.num_rows, chunk_b.num_rows)
        head_a, head_b = chunk_a.slice(0, n), chunk_b.slice(0, n)
        if not _equal(head_a, head_b):
            return _first_row(name, position, head_a, head_b)
        rows_a.give_back(chunk_a.slice(n))
        rows_b.give_back(chunk_b.slice(n))
        position += n


def _equal(a: pa.RecordBatch, b: pa.RecordBatch) -> bool:
    names = sorted(set(a.schema.names) | set(b.schema.names))
    return all(n in a.schema.names and n in b.schema.names and a.column(n).equals(b.column(n))
               for n in names)


def _first_row(name: str, position: int, a: pa.RecordBatch, b: pa.RecordBatch
               ) -> StageDivergence:
    """The first row where two equally long chunks differ (only this chunk is walked)."""
    names = [n for n in a.schema.names if n in b.schema.names]
    only = sorted(set(a.schema.names) ^ set(b.schema.names))
    rows_a, rows_b = a.to_pylist(), b.to_pylist()
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b, strict=True)):
        differs = {n: (ra[n], rb[n]) for n in names if ra[n] != rb[n]}
        differs.update({n: (ra.get(n), rb.get(n)) for n in only})
        if differs:
            why = "different seq" if SEQ in differs else "different values"
            return StageDivergence(name, False, ra.get(SEQ), position + i, differs, why)
    return StageDivergence(name, False, None, position, {}, "different column types")


def _ran_out(name: str, position: int, a: pa.RecordBatch | None, b: pa.RecordBatch | None
             ) -> StageDivergence:
    if a is None and b is None:  # same records, other bytes (compression level, schema)
        return StageDivergence(name, True)
    longer, side = (a, "B") if a is not None else (b, "A")
    seq = longer.column(SEQ)[0].as_py() if longer is not None and SEQ in longer.schema.names \
        else None
    return StageDivergence(name, False, seq, position, {}, f"{side} has fewer records")


class _Records:
    """An artifact's records in seq order, a shard at a time, read only when needed."""

    def __init__(self, stage_dir: Folder, manifest: dict[str, Any]) -> None:
        self.shards: Iterator[dict[str, Any]] = iter(manifest["shards"])
        self.stage_dir, self.manifest = stage_dir, manifest
        self.schema = schema_from_text(manifest["schema"])
        self.held: pa.RecordBatch | None = None

    def take(self) -> pa.RecordBatch | None:
        """The records not compared yet (the rest of the last shard, or the next shard)."""
        if self.held is not None and self.held.num_rows:
            held, self.held = self.held, None
            return held
        for shard in self.shards:
            records = read_shard(self.stage_dir / shard["path"],
                                 self.manifest.get("compression") or "auto")
            if records:
                return decode(records, self.schema)
        return None

    def give_back(self, rest: pa.RecordBatch) -> None:
        self.held = rest

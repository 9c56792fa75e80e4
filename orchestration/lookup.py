"""Where one seq is in a stored run: source file and line, shard and offset, batch, training step.

One function, `lookup_seq`, read by `seqline lookup` and the dashboard's lookup page alike.
It reads manifests (which list shards with their seq ranges, so only the one shard that can
hold the seq is read) and the run's dead letters (which keep seq), through pipeline/storage.py
only, so a run on S3 answers as one on disk.

    lookup_seq(".seqline", "demo", 100)
    -> read: seattle-weather.csv, line 102 (record 100 of the file)
       examples: shard-000000.tfrecord.gz, record 100 (seq 0-255)
       batches: batch 2 (seq 78-109) of 37 training batches per epoch
       model: step 3 of 37 (one step per batch; 1 epoch)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from seqline.components import Source  # an input file, opened as ingest opens it
from seqline.pipeline.artifacts import read_manifest, read_run_record, run_dir
from seqline.pipeline.deadletters import read_dead_letters
from seqline.pipeline.errors import RunNotFound
from seqline.pipeline.storage import Folder, open_root, storage_of
from seqline.pipeline.tfrecord.coding import decode, schema_from_text
from seqline.pipeline.tfrecord.framing import CorruptRecord
from seqline.pipeline.tfrecord.reading import read_shard
from seqline.pipeline.tfrecord.seq_scan import scan_seq

__all__ = ["SeqPlace", "StagePlace", "lookup_seq"]

# Formats whose records are lines: a record's line can be counted (a record is a non-empty
# line, and a CSV file's first line is its header: components/ingest/readers.py).
_LINE_FORMATS = {"csv": 1, "jsonl": 0}  # format -> header lines before the first record
_GONE = {"out_of_range", "dead_lettered", "filtered", "absent"}


@dataclass(frozen=True)
class StagePlace:
    """Where the seq is in one stage's output, or what happened to it there, in one line."""

    stage: str
    component: str
    found: bool
    line: str  # what a person reads: "shard-000000.tfrecord.gz, record 100"
    detail: dict[str, Any] = field(default_factory=dict)  # the same, as fields for --json


@dataclass(frozen=True)
class SeqPlace:
    """A seq's places in every committed stage of a run, in pipeline order."""

    run_id: str
    seq: int
    stages: list[StagePlace]

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def lookup_seq(root: Folder | str, run_id: str, seq: int) -> SeqPlace:
    """Where `seq` is in each committed stage of the run (stages not committed are left out).

    Raises:
        RunNotFound: there is no such run under `root`.
        ConfigError: `run_id` is not a name.
    """
    given = str(root)
    run = run_dir(open_root(root) if isinstance(root, str) else root, run_id)
    if not (run / "run.json").exists():
        raise RunNotFound(run_id, f"under --root {given}", given)
    names = read_run_record(run).get("stages") or []
    manifests = {n: read_manifest(run / n) for n in names if (run / n / "manifest.json").exists()}
    train = next((m for m in manifests.values() if m.get("component") == "train"), None)
    places: list[StagePlace] = []
    for name, m in manifests.items():
        place = _place(run / name, m, seq, train)
        if place is not None:
            places.append(place)
        # A record dropped (or never read) stays gone: the stages after say nothing more.
        if place is not None and not place.found and place.detail.get("fate") in _GONE:
            break
    return SeqPlace(run_id, seq, places)


def _place(stage_dir: Folder, m: dict[str, Any], seq: int, train: dict[str, Any] | None
           ) -> StagePlace | None:
    component = m.get("component", "")
    if component == "ingest":
        return _in_source(stage_dir, m, seq)
    if m.get("shards") is not None:
        return _in_shards(stage_dir, m, seq)
    if component == "batching" and train is not None:
        return _in_batches(m, seq, train)
    if component == "train":
        return _in_steps(m, seq) if not _trained_shuffled(stage_dir, m) else _place_of(
            m, False, "trained on shuffled batches: no step is named", fate="shuffled")
    return None  # evaluate: metrics over the eval split, no place per record


def _place_of(m: dict[str, Any], found: bool, line: str, **detail: Any) -> StagePlace:
    return StagePlace(m["stage"], m.get("component", ""), found, line, detail)


def _not_here(stage_dir: Folder, m: dict[str, Any], seq: int) -> StagePlace:
    """Why a stage does not hold the seq: dead-lettered, filtered, or never given it."""
    for letter in read_dead_letters(stage_dir, m) if m.get("dead_lettered") else []:
        if letter.seq == seq:
            return _place_of(m, False, f"dead-lettered: {letter.reason} ({letter.where()})",
                             fate="dead_lettered", reason=letter.reason, file=letter.file,
                             source_line=letter.line)
    if m.get("filtered"):
        return _place_of(m, False, f"not in its output: filtered (or dropped upstream); "
                         f"{m['filtered']:,} records filtered here", fate="filtered")
    return _place_of(m, False, "not in its output (it never reached this stage)",
                     fate="absent")


# ------------------------------------------------------------------------ ingest: file, line

def _in_source(stage_dir: Folder, m: dict[str, Any], seq: int) -> StagePlace:
    total = int(m.get("records_in") or 0)
    if not 0 <= seq < total:
        return _place_of(m, False, f"out of range: the run read {total:,} records "
                         f"(seq 0-{total - 1})", fate="out_of_range")
    if not _is_output(stage_dir, m, seq):
        return _not_here(stage_dir, m, seq)  # a dead letter names its own file and line
    files = m.get("files")
    if not files:
        return _place_of(m, True, "read, but this run's manifest does not list its files "
                         "(a run made before seqline recorded them)")
    where = _file_and_line(files, m.get("params", {}).get("format", ""), seq)
    if where is None:
        return _place_of(m, True, "read; its file's records could not be counted")
    name, record, line = where
    text = f"{name}, line {line} (record {record} of the file)" if line is not None else \
        f"{name}, record {record} of the file"
    return _place_of(m, True, text, file=name, record=record, source_line=line)


def _is_output(stage_dir: Folder, m: dict[str, Any], seq: int) -> bool:
    """Ingest's records all come out but its dead letters (it has no filter)."""
    if not m.get("dead_lettered"):
        return True
    return all(letter.seq != seq for letter in read_dead_letters(stage_dir, m))


def _file_and_line(files: list[str], fmt: str, seq: int) -> tuple[str, int, int | None] | None:
    """(file, record index in it, 1-based line or None) of the input's record `seq`: seq is
    the rank across files (bad records included), so count each file's records in turn."""
    base = 0
    for name in files:
        if fmt in _LINE_FORMATS:
            hit, count = _line_of(name, seq - base, _LINE_FORMATS[fmt])
            if hit is not None:
                return name, seq - base, hit
        elif len(files) == 1:  # Parquet, TFRecord: the record's rank; no lines to count
            return name, seq, None
        else:
            return None
        base += count
    return None


def _line_of(name: str, record: int, header: int) -> tuple[int | None, int]:
    """(line of the file's record `record`, or None; the file's record count), reading its
    lines up to that record only; empty lines are no records, as for the readers."""
    count = -header
    with Source(name, local="://" not in name).open() as f:
        for number, text in enumerate(f, start=1):
            if not text.strip(b"\r\n"):
                continue
            if count == record:
                return number, count
            count += 1
    return None, max(count, 0)


# ----------------------------------------------------------------- stored shards: shard, offset

def _in_shards(stage_dir: Folder, m: dict[str, Any], seq: int) -> StagePlace:
    for shard in m["shards"]:
        if shard["seq_first"] is not None and shard["seq_first"] <= seq <= shard["seq_last"]:
            try:
                offsets = np.flatnonzero(_shard_seq(stage_dir, m, shard) == seq)
            except (CorruptRecord, OSError) as exc:  # damaged or gone: said, not raised
                why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                return _place_of(m, False, f"{shard['path']} cannot be read ({why}); "
                                 "`seqline verify` checks every shard, and the run's --resume "
                                 "writes a damaged one again", fate="unreadable",
                                 shard=shard["path"], reason=why)
            if len(offsets):
                return _shard_place(m, shard, offsets)
    return _not_here(stage_dir, m, seq)


def _shard_seq(stage_dir: Folder, m: dict[str, Any], shard: dict[str, Any]) -> np.ndarray:
    """The shard's seq per record: scanned from its bytes, or decoded when the scan declines."""
    path = stage_dir / shard["path"]
    compression = m.get("compression") or "auto"
    with storage_of(path).open(path, "rb") as f:
        scanned = scan_seq(f.read(), compression)
    if scanned is not None:
        return scanned
    batch = decode(read_shard(path, compression), schema_from_text(m["schema"]))
    return np.asarray(batch.column("__seq__"), dtype=np.int64)


def _shard_place(m: dict[str, Any], shard: dict[str, Any], offsets: np.ndarray) -> StagePlace:
    first = int(offsets[0])
    more = f"; {len(offsets)} records (exploded) from offset {first}" if len(offsets) > 1 else ""
    text = (f"{shard['path']}, record {first} (0-based; the shard holds seq "
            f"{shard['seq_first']:,}-{shard['seq_last']:,}){more}")
    return _place_of(m, True, text, shard=shard["path"], offset=first,
                     records=len(offsets), shard_seq_first=shard["seq_first"],
                     shard_seq_last=shard["seq_last"])


# -------------------------------------------------------------- batches and steps (train audit)

def _batch_index(epoch: dict[str, Any], seq: int) -> int | None:
    """The batch whose seq range holds `seq` (batches are in seq order unless shuffled)."""
    for i, batch in enumerate(epoch.get("batches") or []):
        if batch["first"] <= seq <= batch["last"]:
            return i
    return None


def _shuffled(m: dict[str, Any]) -> StagePlace | None:
    """Shuffled batches are no seq ranges: the audit's first and last seq do not say which
    examples a batch holds, so no batch is named rather than a wrong one."""
    if not (m.get("plan") or {}).get("shuffle"):
        return None
    return _place_of(m, False, "batches are shuffled (seeded): the audit records each "
                     "batch's first and last seq, not its members", fate="shuffled")


def _trained_shuffled(stage_dir: Folder, m: dict[str, Any]) -> bool:
    """Whether the batches the trainer read (its input stage's) were shuffled."""
    batching = stage_dir.parent / m["input"] if m.get("input") else None
    if batching is None or not (batching / "manifest.json").exists():
        return False
    return _shuffled(read_manifest(batching)) is not None


def _in_batches(m: dict[str, Any], seq: int, train: dict[str, Any]) -> StagePlace:
    """The batching stage stores its plan, not its batches; the trainer's audit records each
    batch it consumed (first and last seq), the batches as batching cut them."""
    if (shuffled := _shuffled(m)) is not None:
        return shuffled
    epochs = train.get("epochs") or []
    first = epochs[0] if epochs else {}
    i = _batch_index(first, seq)
    if i is None:
        return _place_of(m, False, _why_no_batch(m, seq, first), fate="no_batch")
    batch = first["batches"][i]
    n = len(first["batches"])
    return _place_of(m, True, f"training batch {i} (seq {batch['first']:,}-{batch['last']:,}) of "
                     f"{n} per epoch", batch=i, batch_seq_first=batch["first"],
                     batch_seq_last=batch["last"], batches_per_epoch=n)


def _why_no_batch(m: dict[str, Any], seq: int, epoch: dict[str, Any]) -> str:
    batches = epoch.get("batches") or []
    last = batches[-1]["last"] if batches else None
    plan = m.get("plan") or {}
    if last is not None and seq > last and plan.get("split", "tail") == "tail":
        return (f"in no training batch: after the last trained seq {last:,}, in the eval split "
                f"(the last {plan.get('eval_fraction', 0):.0%} of the records) or its windows' "
                "inputs")
    if plan.get("window") and batches and seq < batches[0]["first"]:
        return (f"in no batch as an example: an example's seq is its label's, and the first "
                f"is {batches[0]['first']:,}; seq {seq:,} is only a window input")
    return "in no training batch (eval split, a window input only, or dropped)"


def _in_steps(m: dict[str, Any], seq: int) -> StagePlace:
    """Keras takes one step per batch: step = batches of earlier epochs + index + 1."""
    steps: list[tuple[int, int]] = []  # (epoch, global step), 1-based
    done = 0
    for e, epoch in enumerate(m.get("epochs") or [], start=1):
        i = _batch_index(epoch, seq)
        if i is not None:
            steps.append((e, done + i + 1))
        done += len(epoch.get("batches") or [])
    if not steps:
        return _place_of(m, False, "no training step consumed it", fate="not_trained")
    per_epoch = len(m["epochs"][0].get("batches") or [])
    shown = ", ".join(f"{s} (epoch {e})" for e, s in steps[:5])
    more = f", … ({len(steps)} in all)" if len(steps) > 5 else ""
    epochs = len(m["epochs"])
    return _place_of(m, True, f"step {shown}{more}; one step per batch, {per_epoch} steps per "
                     f"epoch, {epochs} epoch{'s' * (epochs != 1)}", steps=[s for _, s in steps],
                     epochs=[e for e, _ in steps], steps_per_epoch=per_epoch)

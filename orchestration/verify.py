"""`seqline verify`: check every artifact of a run against the ordering contract and accounting."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from seqline.components import COMPONENTS
from seqline.orchestration.seq_gaps import duplicated, missing, said
from seqline.orchestration.shard_reads import ShardRead, ShardReads, check_shard
from seqline.pipeline.artifacts import VERDICT, read_manifest, read_run_record, run_dir
from seqline.pipeline.audit import seq_digest
from seqline.pipeline.deadletters import DEAD_LETTERS
from seqline.pipeline.errors import RunNotFound
from seqline.pipeline.storage import Folder, open_root, storage_of, write_json

__all__ = ["UNCOMMITTED", "StageCheck", "breaks_contract", "verdict", "verify_run"]

UNCOMMITTED = "no committed output"  # the problem of a planned stage that did not commit


def breaks_contract(problems: Iterable[str]) -> bool:
    """Whether any of a verdict's problems is one of order or bytes: a planned stage without
    committed output breaks nothing (what the run committed may still hold the contract)."""
    return any(not p.startswith(UNCOMMITTED) for p in problems)

# Shards read at once: inflating, hashing and reading from an object store release the GIL, so
# a thread per core (and two more to cover a store's latency) keeps every core busy.
_READERS = min(8, (os.cpu_count() or 1) + 2)



@dataclass
class StageCheck:
    """One stage's verdict: what it holds and every way it breaks the contract."""

    stage: str
    component: str
    records: int = 0
    shards: int = 0
    dead_letters: int = 0
    problems: list[str] = field(default_factory=list)
    # The gap finder's intervals of seq, by kind ("missing", "duplicated"): seq_gaps.missing
    gaps: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_run(root: Folder | str, run_id: str, reads: ShardReads | None = None
               ) -> list[StageCheck]:
    """Check each stage of a run, in pipeline order: a stage it planned and did not commit
    is a problem (a run that failed, was cancelled or is running vouches for nothing more
    than it committed).

    Checks: the accounting (records_in + exploded = records_out + filtered + dead_lettered);
    for stored records, each shard's bytes, checksum, count and seq range, seq order within
    and across shards; the seq digest of the whole output; and coverage against the stage's
    input (every output seq and dead letter comes from the input, the rest are counted as
    filtered).

    `reads`: the shards the run read back as it went (`seqline run`), taken where clean;
    verify reads the others, and closes it.

    Raises:
        RunNotFound: there is no such run.
        ConfigError: the run id is not a name (`check_run_id`).
    """
    given = str(root)
    root = open_root(root) if isinstance(root, str) else root
    folder = run_dir(root, run_id)
    if not (folder / "run.json").exists():
        raise RunNotFound(run_id, f"under --root {given}", given)
    outputs: dict[str, np.ndarray | None] = {}
    checks = []
    previous: str | None = None
    pool = ThreadPoolExecutor(_READERS, thread_name_prefix="verify")
    try:
        # every stage's shards are read ahead, in pipeline order, while earlier stages are
        # checked; each stage then takes its shards' results in manifest order
        record = read_run_record(folder)
        stages = [(d, read_manifest(d)) for d in _stage_dirs(folder, record)]
        shard_reads = [_read_shards(pool, d, m, reads) for d, m in stages]
        for (stage_dir, manifest), stage_reads in zip(stages, shard_reads, strict=True):
            check = StageCheck(manifest["stage"], manifest["component"],
                               manifest["records_out"], len(manifest.get("shards") or []))
            source = manifest.get("input") or previous
            seq = _check_stage(stage_dir, manifest, outputs.get(source) if source else None,
                               check, stage_reads)
            outputs[check.stage] = seq
            checks.append(check)
            previous = check.stage
    finally:  # on an error, shards not yet read are not read
        pool.shutdown(cancel_futures=True)
        if reads is not None:
            reads.close()
    checks = _with_uncommitted(checks, record)
    if record.get("status") != "running":  # a run going on would outdate it
        _save_verdict(folder, checks)
    return checks


def verdict(checks: list[StageCheck]) -> dict[str, Any]:
    """The checks as verify.json holds them, and as `seqline verify --json` prints them.

    Example: {"ok": false, "stages": [{"stage": "examples", "component": "tfrecord_write",
    "records": 600, "shards": 3, "dead_letters": 0, "problems": ["shard 1 (...): checksum
    differs from the manifest's: the bytes changed"], "ok": false}, ...]}
    """
    return {"ok": all(c.ok for c in checks),
            "stages": [{**asdict(c), "ok": c.ok} for c in checks]}


def _save_verdict(folder: Folder, checks: list[StageCheck]) -> None:
    """The verdict beside the run's stages (verify.json), for the dashboard's run page."""
    write_json(folder / VERDICT, verdict(checks), sort_keys=False)


def _planned(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's stages in pipeline order, as run.json's plan gives them (none for a run
    from before run.json held its plan while running)."""
    if record.get("plan"):
        return list(record["plan"])
    return [{"stage": name} for name in record.get("stages") or []]


def _stage_dirs(folder: Folder, record: dict[str, Any]) -> list[Folder]:
    """The committed stages' folders, in pipeline order."""
    names = [step["stage"] for step in _planned(record)]
    if names:
        return [folder / n for n in names if (folder / n / "manifest.json").exists()]
    committed = [p for p in storage_of(folder).entries(folder) if (p / "manifest.json").exists()]
    return sorted(committed, key=lambda p: (read_manifest(p).get("timeline") or {}).get(
        "started", 0.0))


def _with_uncommitted(checks: list[StageCheck], record: dict[str, Any]) -> list[StageCheck]:
    """Every planned stage, in pipeline order: one with no committed output is a problem
    (a run that did not succeed vouches for nothing it did not commit)."""
    found = {c.stage: c for c in checks}
    status = record.get("status")
    why = {"failed": "the run failed", "cancelled": "the run was cancelled",
           "succeeded": "its manifest is gone (removed since the run)"}.get(
        str(status), "the run has not ended (it is running, or its driver was stopped: "
        "`seqline runs show` tells which)")
    return [found.get(step["stage"]) or StageCheck(
                step["stage"], step.get("component") or "-",
                problems=[f"{UNCOMMITTED}: {why}."])
            for step in _planned(record)] or checks


def _check_stage(stage_dir: Folder, m: dict[str, Any], upstream: np.ndarray | None,
                 check: StageCheck, shard_reads: list[ShardRead]) -> np.ndarray | None:
    problems = check.problems
    if m["records_in"] + m["exploded"] != m["records_out"] + m["filtered"] + m["dead_lettered"]:
        problems.append(
            f"accounting: records_in {m['records_in']} + exploded {m['exploded']} != "
            f"records_out {m['records_out']} + filtered {m['filtered']} + dead_lettered "
            f"{m['dead_lettered']}")
    dead = _check_dead_letters(stage_dir, m, problems)
    _check_uploaded(stage_dir, m, problems)
    check.dead_letters = len(dead)
    if m.get("format") == "tfrecord":
        seq = _check_shards(shard_reads, m, problems)
    elif COMPONENTS[m["component"]].reads == "files":  # seq: the rank among all records read
        seq = np.arange(m["records_in"], dtype=np.int64)
        if len(dead):
            keep = np.ones(m["records_in"], bool)
            keep[dead[(dead >= 0) & (dead < len(keep))]] = False
            seq = seq[keep]
    else:
        hook = COMPONENTS[m["component"]].verify
        if hook is not None:
            hook(stage_dir.parent, m, problems)  # type: ignore[arg-type]  # Folder
        return None
    if seq is None:
        return None
    disordered = _check_order(seq, m, problems)
    if disordered and not m["exploded"]:
        _add_gap(check, "duplicated", duplicated(seq))
    if len(seq) != m["records_out"]:
        problems.append(f"count: {len(seq)} records stored, manifest says {m['records_out']}")
    if seq_digest(seq) != m.get("seq_digest"):
        problems.append("seq digest: the stored seq stream is not the one the stage emitted "
                        "(a record is missing, repeated or moved)")
    if upstream is not None:
        # strictly ascending (checked just now): its own distinct values, sorted
        parents = seq if not disordered and not m["exploded"] else _distinct(seq)
        _check_coverage(seq, parents, dead, upstream, m, check)
    return seq


def _add_gap(check: StageCheck, kind: str, found: dict[str, Any] | None) -> None:
    """A kind of gap in the verdict, with its line among the problems."""
    if found:
        check.gaps[kind] = found
        check.problems.append(said(kind, found))


def _check_dead_letters(stage_dir: Folder, m: dict[str, Any], problems: list[str]) -> np.ndarray:
    entry = m.get("dead_letters")
    if not entry:
        if m["dead_lettered"]:
            problems.append(f"dead letters: {m['dead_lettered']} counted but no file listed")
        return np.empty(0, np.int64)
    path = stage_dir / entry["path"]
    if not path.exists():
        problems.append(f"dead letters: {entry['path']} is missing")
        return np.empty(0, np.int64)
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        problems.append(f"dead letters: {DEAD_LETTERS} changed since the stage wrote it")
    seq = np.array([json.loads(line)["seq"] for line in data.splitlines()], np.int64)
    if len(seq) != m["dead_lettered"]:
        problems.append(f"dead letters: {len(seq)} in the file, manifest counts "
                        f"{m['dead_lettered']}")
    return seq


def _check_uploaded(stage_dir: Folder, m: dict[str, Any], problems: list[str]) -> None:
    """On an object store: the files a driver stage uploaded before its manifest (TensorFlow's
    SavedModel, checkpoints, logs) are there, at the sizes uploaded."""
    uploaded = m.get("uploaded") or {}
    if not uploaded:  # a local stage's files were written in place: nothing was uploaded
        return
    stored = storage_of(stage_dir).files(stage_dir)
    for name, size in uploaded.items():
        if stored.get(name) != size:
            problems.append(f"uploaded file {name}: " + (
                "missing" if name not in stored else
                f"{stored[name]} bytes, manifest says {size}"))


def _read_shards(pool: ThreadPoolExecutor, stage_dir: Folder, m: dict[str, Any],
                 reads: ShardReads | None) -> list[ShardRead]:
    if m.get("format") != "tfrecord":
        return []
    return [pool.submit(_read_shard, stage_dir, i, shard, m["compression"], m["stage"], reads)
            for i, shard in enumerate(m["shards"])]


def _read_shard(stage_dir: Folder, i: int, shard: dict[str, Any], compression: str, stage: str,
                reads: ShardReads | None) -> tuple[list[str], np.ndarray | None]:
    """A clean read of the shard during the run, if there was one; else a read now."""
    seq = reads.taken(stage, i, shard) if reads is not None else None
    return ([], seq) if seq is not None else check_shard(stage_dir, i, shard, compression)


def _check_shards(reads: list[ShardRead], m: dict[str, Any], problems: list[str]
                  ) -> np.ndarray | None:
    """The stage's seq, shard after shard; None from the first shard that cannot be read.

    The shards were read at once; their problems are taken in manifest order, up to the
    first unreadable one, so the verdict does not depend on which thread finished first.
    """
    parts: list[np.ndarray] = []
    try:
        for i, (read, shard) in enumerate(zip(reads, m["shards"], strict=True)):
            found, seq = read.result()
            problems.extend(found)
            if seq is None:
                return None
            parts.append(seq)
            if i and len(seq) and len(parts[i - 1]):
                before = parts[i - 1][-1]
                if seq[0] < before or (seq[0] == before and not m["exploded"]):
                    problems.append(
                        f"shard order: shard {i} ({shard['path']}, seq {seq[0]}..{seq[-1]}) "
                        f"comes after seq {before}; shards must be listed in seq order")
    finally:
        for read in reads:  # after an unreadable shard, the rest are not needed
            read.cancel()
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def _check_order(seq: np.ndarray, m: dict[str, Any], problems: list[str]) -> bool:
    """The first seq out of order (or repeated); True when there is one."""
    steps = np.diff(seq)
    bad = np.flatnonzero(steps < 0 if m["exploded"] else steps <= 0)
    if len(bad):
        k = int(bad[0])
        what = "repeated" if seq[k + 1] == seq[k] else "out of order"
        problems.append(f"order: seq {seq[k + 1]} {what} after seq {seq[k]} (record {k + 1})")
    return bool(len(bad))


def _check_coverage(seq: np.ndarray, parents: np.ndarray, dead: np.ndarray,
                    upstream: np.ndarray, m: dict[str, Any], check: StageCheck) -> None:
    """`parents`: the distinct values of `seq`, sorted."""
    # Sorted-array set operations: seq streams are (nearly) sorted, so sorting is cheap and
    # searchsorted beats hashing (np.unique took 0.6 s per million here).
    problems = check.problems
    upstream, dead = _sorted(upstream), _sorted(dead)
    if m["records_in"] != len(upstream):
        problems.append(f"coverage: records_in {m['records_in']}, the input holds "
                        f"{len(upstream)}")
    strays = 0
    for values in (parents, dead):
        stray = values[~_within(values, upstream)]
        strays += len(stray)
        if len(stray):
            problems.append(f"coverage: seq {stray[0]} is not in the stage's input")
    both = dead[_within(dead, parents)]
    if len(both):
        problems.append(f"coverage: seq {both[0]} is both output and a dead letter")
    filtered = len(upstream) - len(parents) - len(dead)
    if filtered != m["filtered"]:
        problems.append(f"coverage: {filtered} input records are neither output nor dead "
                        f"letters, manifest counts {m['filtered']} filtered")
    if len(seq) - len(parents) != m["exploded"]:
        problems.append(f"coverage: {len(seq) - len(parents)} extra rows from explode, "
                        f"manifest counts {m['exploded']}")
    if filtered != m["filtered"] or strays or len(both):
        # Only then: else every absent input seq is one the stage counted as filtered.
        kept = parents if not len(dead) else _distinct(np.concatenate([parents, dead]))
        _add_gap(check, "missing", _unfiltered(missing(_distinct(upstream), kept), m))


def _unfiltered(found: dict[str, Any] | None, m: dict[str, Any]) -> dict[str, Any] | None:
    """Missing seq, told apart from a filter's: the input's seq the stage neither output nor
    dead-lettered are its filtered ones plus any lost; the artifacts cannot say which is
    which, so a stage that filters has its absent seq listed with its filtered count."""
    if found and m["filtered"]:
        return {**found, "filtered": m["filtered"]}
    return found


def _sorted(values: np.ndarray) -> np.ndarray:
    """`values` sorted; a stream that already is (every stage's that verify passes) is not
    sorted again, which was a third of the coverage check's time."""
    return values if not len(values) or (values[1:] >= values[:-1]).all() else np.sort(values)


def _distinct(values: np.ndarray) -> np.ndarray:
    ordered = _sorted(values)
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]] if len(ordered) else ordered


def _within(values: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """Which of `values` occur in the sorted array `ordered`."""
    if len(values) == len(ordered) and np.array_equal(values, ordered):
        return np.ones(len(values), bool)  # a stage that kept every record: no search (40 ms/1M)
    at = np.searchsorted(ordered, values)
    found = at < len(ordered)
    found[found] = ordered[at[found]] == values[found]
    return found

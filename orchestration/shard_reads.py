"""One shard read back and checked, for `seqline verify`; and shards read back during the run,
as their stage hands them on, so that verify at the run's end finds them read already."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from seqline.pipeline.blocks import SEQ, seq_of
from seqline.pipeline.storage import Folder, folder
from seqline.pipeline.tasks import ShardCheck
from seqline.pipeline.tfrecord import CorruptRecord, decode, iter_records
from seqline.pipeline.tfrecord.seq_scan import scan_seq

__all__ = ["ShardRead", "ShardReads", "check_shard", "read_back"]

_SEQ_ONLY = pa.schema([pa.field(SEQ, pa.int64())])

ShardRead = Future  # of a ShardCheck: one shard checked by check_shard


def check_shard(stage_dir: Folder, i: int, shard: dict[str, Any], compression: str,
                framed: np.ndarray | None = None) -> ShardCheck:
    """One shard's problems and seq (None if it cannot be read), from one read of its bytes;
    `framed`: each record's length as its writer framed it, if known (scan_seq checks it)."""
    name = f"shard {i} ({shard['path']})"
    path = stage_dir / shard["path"]
    if not path.exists():
        return [f"{name}: file missing"], None
    problems = []
    data = path.read_bytes()
    if len(data) != shard["bytes"]:
        problems.append(f"{name}: {len(data)} bytes, manifest says {shard['bytes']}")
    vouched = hashlib.sha256(data).hexdigest() == shard["sha256"]
    if not vouched:
        problems.append(f"{name}: checksum differs from the manifest's: the bytes changed")
    seq = scan_seq(data, compression, vouched=vouched, framed=framed)  # Examples undecoded
    if seq is None:  # not as seqline writes shards: the exact reader says what is wrong
        try:
            records = [r for chunk in iter_records(io.BytesIO(data), str(path), compression)
                       for r in chunk]  # the bytes just checked, not a second read
            seq = seq_of(decode(records, _SEQ_ONLY))
        except CorruptRecord as exc:
            return [*problems, f"{name}: unreadable: {exc}"], None
    if len(seq) != shard["records"]:
        problems.append(f"{name}: {len(seq)} records, manifest says {shard['records']}")
    if len(seq) and (seq[0], seq[-1]) != (shard["seq_first"], shard["seq_last"]):
        problems.append(f"{name}: seq {seq[0]}..{seq[-1]}, manifest says "
                        f"{shard['seq_first']}..{shard['seq_last']}")
    return problems, seq


def read_back(stage_dir: str, compression: str, shard: dict[str, Any],
              framed: np.ndarray | None = None) -> ShardCheck:
    """`check_shard` in the worker that just wrote the shard (MapTask.read_back): the cores
    the stage runs on read it, not the driver's one thread. `stage_dir` as text (picklable);
    `framed`: the writer's record lengths (Written.framed)."""
    return check_shard(folder(stage_dir), 0, shard, compression, framed)


def _yield_to_the_run() -> None:
    """This thread runs at the lowest priority (Linux: a thread's niceness is its own), so
    that it reads in the cores' idle moments rather than slowing the stages it follows."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


class ShardReads:
    """Shards read back while the run goes, each as soon as its stage has it (decision 50).

    verify at the run's end must read every shard the run wrote; read at the end, that is
    time added to the run, while during the run the cores have idle moments (a stage waiting
    on another). Each shard is read here from the stage's attempt folder, on one thread, as the
    stage accounts for it; verify then takes a clean read (no problem found) of the same shard
    (index, name, SHA-256) instead of reading it again. A shard not read yet, or read with a
    problem (the stage's folder renamed at commit under the read, the bytes changed), verify
    reads at the end as before, so its verdict and messages are those of a read at the end.
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="seqline-shard-reads",
                                        initializer=_yield_to_the_run)
        self._reads: dict[tuple[str, int, str, str], ShardRead] = {}

    def read(self, stage: str, i: int, folder: Folder, shard: dict[str, Any],
             compression: str) -> None:
        """Read shard `i` of `stage`, stored in `folder`, soon."""
        key = (stage, i, shard["path"], shard["sha256"])
        self._reads[key] = self._pool.submit(check_shard, folder, i, shard, compression)

    def done(self, stage: str, i: int, shard: dict[str, Any], read: ShardCheck) -> None:
        """Shard `i` of `stage` was read back already (by the worker that wrote it)."""
        key = (stage, i, shard["path"], shard["sha256"])
        self._reads[key] = ShardRead()
        self._reads[key].set_result(read)

    def taken(self, stage: str, i: int, shard: dict[str, Any]) -> np.ndarray | None:
        """The seq of a clean read of this very shard, waiting for it if it is under way;
        None if there is none."""
        read = self._reads.pop((stage, i, shard["path"], shard["sha256"]), None)
        if read is None or (not read.done() and read.cancel()):  # not started: verify reads it
            return None
        try:
            problems, seq = read.result()
        except OSError:  # the attempt folder renamed at commit under the read
            return None
        return None if problems else seq

    def close(self) -> None:
        """Stop reading: the run failed, or verify has taken what it needs."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._reads.clear()

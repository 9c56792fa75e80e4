"""SeqlineMap: a map stage as one composite PTransform, runnable on any Beam runner."""

from __future__ import annotations

import logging
import os
import pickle
from typing import Any

import apache_beam as beam
import pyarrow as pa
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from seqline.orchestration.runners.base import poisoned
from seqline.pipeline.blocks import Block, batch_from_ipc
from seqline.pipeline.stage import BlockResult, MapTask

__all__ = ["ReadBlocks", "SeqlineMap", "block_name", "put", "read_result", "result_name"]

log = logging.getLogger("seqline")


def block_name(index: int) -> str:
    return f"block-{index:09d}.arrow"  # zero-padded: names sort in block order


def result_name(index: int) -> str:
    return f"block-{index:09d}.result"


def put(url: str, data: bytes | pa.Buffer) -> None:
    """Write `data` at `url` so that a reader sees all of it or nothing.

    An object store's upload (a PUT, or a multipart upload completed at close) is already
    all-or-nothing; a local file is written under a temporary name and renamed, so a worker
    killed mid-write leaves no half result.
    """
    fs, path = url_to_fs(url)
    if not isinstance(fs, LocalFileSystem):
        with fs.open(path, "wb") as f:
            f.write(memoryview(data))
        return
    partial = f"{os.path.dirname(path)}/.{os.path.basename(path)}.tmp-{os.getpid()}"
    with open(partial, "wb") as f:
        f.write(memoryview(data))
    os.replace(partial, path)


def read_result(url: str) -> BlockResult:
    fs, path = url_to_fs(url)
    result: BlockResult = pickle.loads(fs.cat_file(path))
    return result


def _read_block(element: tuple[int, str]) -> tuple[int, bytes]:
    index, url = element
    fs, path = url_to_fs(url)
    return index, fs.cat_file(path)


def _run_block(element: tuple[int, bytes], task: MapTask, results: str,
               count_attempts: bool) -> tuple[int, str]:
    """Run one block, once, and write its result under `results`; return (index, name).

    A result already there means Beam ran the bundle again after the block was done (its
    worker died later, or a cluster runner retried the bundle): the block is not run twice.
    With `count_attempts` (the FnApiRunner's local worker processes, which it does not
    retry by itself, see BeamRunner._run_surviving) each attempt leaves a marker while it runs,
    so one that killed its worker is still there at the next attempt: a block that killed its
    worker `task.retries` + 1 times is given up as poisoned instead of killing workers for ever.
    """
    index, data = element
    fs, folder = url_to_fs(results)
    name = result_name(index)
    target = f"{folder}/{name}"
    if fs.exists(target):
        return index, name
    block = Block(index, batch_from_ipc(pa.py_buffer(data)))
    marker = None
    if not count_attempts:
        result = task(block)
    elif (attempt := 1 + len(fs.glob(f"{target}.attempt-*"))) > task.retries + 1:
        result = poisoned(task.stage, block, attempt - 1)
    else:
        if attempt > 1:
            log.warning("stage %r: the worker running block %d (first seq %s) died; running "
                        "it again (attempt %d of %d)", task.stage, block.index,
                        block.first_seq, attempt, task.retries + 1)
        marker = f"{target}.attempt-{attempt}.{os.getpid()}"  # the pid: see _run_surviving
        fs.touch(marker)
        result = task(block)
    # protocol 5: the output batch is Arrow IPC (BlockResult.__reduce__) without extra copies
    put(f"{results}/{name}", pickle.dumps(result, protocol=5))
    if marker is not None:
        fs.rm_file(marker)
    return index, name


class ReadBlocks(beam.PTransform):
    """(index, URL of a block's Arrow IPC bytes) -> (index, bytes), read in the workers.

    Blocks reach the workers through storage they all see, not through the job's graph: a
    Create over the bytes themselves would put the whole stage input into the pipeline
    (Dataflow caps a job's graph at 10 MB) and, on the FnApiRunner, into the driver's memory.
    The URLs are spread over the workers first, else one bundle runs on one worker.
    """

    def expand(self, urls: Any) -> Any:
        return (urls
                | "SpreadBlocks" >> beam.Reshuffle()
                | "ReadBlock" >> beam.Map(_read_block))


class SeqlineMap(beam.PTransform):
    """A seqline map stage on any Beam runner: (index, Arrow IPC bytes) -> (index, result name).

    Each element is one block: its dense index and its records (with `__seq__`) as the bytes
    of `seqline.pipeline.blocks.batch_to_ipc`. The task runs on the block in a worker, where
    its sink (if any) writes the block's shard into the stage folder it was built with; the
    BlockResult (output batch, counts, dead letters, shard entry, or the failure) is written
    to `results`/block-NNNNNNNNN.result, a fsspec URL every worker and the reader can reach
    (`gs://…`, `s3://…`; a local folder only where the workers share the machine).

    PCollections have no order, so nothing here trusts element order: results are named by
    block index and the reader reads them back in index order (`read_result`). A block whose
    result exists is not run again, so a bundle the runner retries costs no second shard.

    Example, on Dataflow (the user's own Pipeline and options):

        blocks = p | beam.Create([(0, batch_to_ipc(batch0)), (1, batch_to_ipc(batch1))])
        blocks | SeqlineMap(task, "gs://bucket/tmp/features")
        # -> gs://bucket/tmp/features/block-000000000.result, block-000000001.result
    """

    def __init__(self, task: MapTask, results: str, *, count_attempts: bool = False) -> None:
        super().__init__()
        self.task, self.results, self.count_attempts = task, results, count_attempts

    def expand(self, blocks: Any) -> Any:
        return blocks | "RunStage" >> beam.Map(_run_block, self.task, self.results,
                                               self.count_attempts)

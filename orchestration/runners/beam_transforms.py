"""SeqlineMap: a map stage as one composite PTransform, runnable on any Beam runner."""

from __future__ import annotations

import logging
import os
import pickle
from typing import Any

import apache_beam as beam
import pyarrow as pa
from fsspec.core import url_to_fs

from seqline.orchestration.runners.base import poisoned
from seqline.pipeline.blocks import Block, batch_from_ipc, batch_to_ipc
from seqline.pipeline.storage import folder, storage_of
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["MarkDone", "ReadBlocks", "SeqlineMap", "attempts_folder", "block_name", "done_name",
           "put", "read_result", "result_name"]

log = logging.getLogger("seqline")


def block_name(index: int) -> str:
    return f"block-{index:09d}.arrow"  # zero-padded: names sort in block order


def result_name(index: int) -> str:
    return f"block-{index:09d}.result"


def done_name(index: int) -> str:
    return f"block-{index:09d}.done"


def attempts_folder(results: str) -> str:
    """Where the attempt markers of a stage's blocks are (`_run_block`): a folder of their
    own, holding the blocks running now, so that counting one block's markers lists a few
    names rather than every result of the stage so far (1-4 ms a block, in the workers)."""
    return f"{results}/attempts"


def put(url: str, data: bytes | pa.Buffer) -> None:
    """Write `data` at `url` so that a reader sees all of it or nothing.

    An object store's upload (one PUT) is already
    all-or-nothing; a local file is written under a temporary name and renamed, so a worker
    killed mid-write leaves no half result.
    """
    place = folder(url)
    storage_of(place).write_atomically(place, memoryview(data))


def read_result(url: str) -> BlockResult:
    fs, path = url_to_fs(url)
    result: BlockResult = pickle.loads(fs.cat_file(path))
    return result


def _read_block(element: tuple[int, str]) -> tuple[int, bytes]:
    index, url = element
    fs, path = url_to_fs(url)
    return index, fs.cat_file(path)


def _run_block(element: tuple[int, bytes | None], task: MapTask, results: str,
               count_attempts: bool) -> tuple[int, bytes | None]:
    """Run one block, once, and write its result under `results`; pass its output on.

    Returns (index, Arrow IPC bytes of the output), the next SeqlineMap's input; the bytes are
    None where there is nothing to pass on (the block failed or kept no rows), and a None in
    is passed on as it is: an earlier fused stage stopped on this block.

    A result already there means Beam ran the bundle again after the block was done (its
    worker died later, or a cluster runner retried the bundle): the block is not run twice.
    With `count_attempts` (the FnApiRunner's local worker processes, which it does not
    retry by itself, see BeamRunner._run_surviving) each attempt leaves a marker while it runs,
    so one that killed its worker is still there at the next attempt: a block that killed its
    worker `task.retries` + 1 times is given up as poisoned instead of killing workers for ever.
    """
    index, data = element
    if data is None:
        return index, None
    fs, folder = url_to_fs(results)
    target = f"{folder}/{result_name(index)}"
    if fs.exists(target):
        return index, _passed_on(read_result(f"{results}/{result_name(index)}"))
    block = Block(index, batch_from_ipc(pa.py_buffer(data)))
    marker = None
    tried = f"{attempts_folder(folder)}/{result_name(index)}.attempt-"
    if not count_attempts:
        result = task(block)
    elif (attempt := 1 + len(fs.glob(f"{tried}*"))) > task.retries + 1:
        result = poisoned(task.stage, block, attempt - 1)
    else:
        if attempt > 1:
            log.warning("stage %r: the worker running block %d (first seq %s) died; running "
                        "it again (attempt %d of %d)", task.stage, block.index,
                        block.first_seq, attempt, task.retries + 1)
        marker = f"{tried}{attempt}.{os.getpid()}"  # the pid: see _run_surviving
        fs.touch(marker)
        result = task(block)
    # protocol 5: the output batch is Arrow IPC (BlockResult.__reduce__) without extra copies
    put(f"{results}/{result_name(index)}", pickle.dumps(result, protocol=5))
    if marker is not None:
        fs.rm_file(marker)
    return index, _passed_on(result)


def _passed_on(result: BlockResult) -> bytes | None:
    if result.failure is not None or result.batch is None or not result.batch.num_rows:
        return None
    return batch_to_ipc(result.batch).to_pybytes()


def _mark_done(element: tuple[int, bytes | None], folder: str) -> None:
    put(f"{folder}/{done_name(element[0])}", b"")


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
    """A seqline map stage on any Beam runner: (index, Arrow IPC bytes) in, the same out.

    Each element is one block: its dense index and its records (with `__seq__`) as the bytes
    of `seqline.pipeline.blocks.batch_to_ipc`. The task runs on the block in a worker, where
    its sink (if any) writes the block's shard into the stage folder it was built with; the
    BlockResult (output batch, counts, dead letters, shard entry, or the failure) is written
    to `results`/block-NNNNNNNNN.result, a fsspec URL every worker and the reader can reach
    (`gs://…`, `s3://…`; a local folder only where the workers share the machine). The output
    element is (index, the output's IPC bytes), or (index, None) where the block failed or
    kept no rows, so SeqlineMaps follow each other: Beam fuses them, and each block goes
    through every stage in one bundle, with no trip through storage in between.

    PCollections have no order, so nothing here trusts element order: results are named by
    block index and the reader reads them back in index order (`read_result`). A block whose
    result exists is not run again, so a bundle the runner retries costs no second shard.

    Example, on Dataflow (the user's own Pipeline and options):

        blocks = p | beam.Create([(0, batch_to_ipc(batch0)), (1, batch_to_ipc(batch1))])
        (blocks | "Write" >> SeqlineMap(write, "gs://bucket/tmp/write")
                | "Features" >> SeqlineMap(features, "gs://bucket/tmp/features"))
        # -> gs://bucket/tmp/features/block-000000000.result, block-000000001.result
    """

    def __init__(self, task: MapTask, results: str, *, count_attempts: bool = False) -> None:
        super().__init__()
        self.task, self.results, self.count_attempts = task, results, count_attempts

    def expand(self, blocks: Any) -> Any:
        return blocks | "RunStage" >> beam.Map(_run_block, self.task, self.results,
                                               self.count_attempts)


class MarkDone(beam.PTransform):
    """(index, anything) -> an empty `folder`/block-N.done: the block went through every stage.

    What tells a job that stopped half way (a worker died) which blocks are still to run: a
    block stopped early (failed, or no rows left) has no result for its later fused stages.
    """

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder

    def expand(self, outputs: Any) -> Any:
        return outputs | "Mark" >> beam.Map(_mark_done, self.folder)

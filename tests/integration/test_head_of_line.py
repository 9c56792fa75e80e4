"""Head-of-line blocking as the windowed loop tells it: one slow block (a user function that
sleeps on one seq) is named as the block the others wait for while it runs, and the watermark
stalls, then jumps; a block costs no more events than before (one Occupancy as it is
admitted, one HeadOfLine per wait for results, in place of that wait's Occupancy)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pyarrow as pa
import pytest

from seqline.components import preprocess
from seqline.components import stage as new_stage
from seqline.orchestration.events import HeadOfLine, Occupancy
from seqline.orchestration.runners import make_runner
from seqline.pipeline.blocks import to_blocks
from tests.conftest import RUNNER_CASES, USERFNS

pytestmark = pytest.mark.integration

SLOW_SEQ = 30  # in block 3 of 10-record blocks


def _run(name: str, options: dict, seconds: float = 1.5) -> tuple[list[object], float]:
    """Run 10 blocks of 10 records, block 3 slow, on a runner; every event told."""
    task = dataclasses.replace(preprocess.make_task(new_stage("work", "preprocess", {
        "fn": "slow_block:sleep_at", "fn_kwargs": {"seq": SLOW_SEQ, "seconds": seconds,
                                                   "base_ms": 5}}), USERFNS, USERFNS),
        sink=None)
    blocks = to_blocks([pa.record_batch({"x": np.arange(100, dtype=np.int64)})], 10)
    told: list[object] = []
    with make_runner(name, workers=2, window=6, **options) as runner:
        # Both workers warm first (seqs 0-29: none slow): on a loaded machine a Ray worker
        # that imports the block's modules for seconds held back the blocks after the slow
        # one too, so nothing waited in the reorder buffer for it (CI: never named).
        list(runner.map_blocks(task, to_blocks([pa.record_batch({"x": np.arange(30)})], 5)))
        runner.publish = told.append
        start = time.time()
        results = list(runner.map_blocks(task, blocks))
    assert [r.index for r in results] == list(range(10))
    return told, start


@pytest.mark.parametrize("case", ["local-thread", "local", "ray"])
def test_a_slow_block_is_named_while_it_holds_the_others_and_the_watermark_stalls(case, request):
    """Beam is not here: its stages are batch jobs with no reorder buffer on the driver
    (decision 55)."""
    name, options = RUNNER_CASES[case]
    if name == "ray":
        request.getfixturevalue("ray_session")
    told, start = _run(name, options)
    heads = [e for e in told if isinstance(e, HeadOfLine)]
    occupancy = [e for e in told if isinstance(e, Occupancy)]
    assert len(occupancy) == 10  # one per block admitted
    assert 1 <= len(heads) <= 10  # one per wait, and a wait returns at least one block
    held_up = [e for e in heads if e.blocker_block == 3]
    assert held_up, "the slow block was never named as the blocker"
    for e in held_up:
        assert (e.blocker_seq, e.blocker_attempt) == (SLOW_SEQ, 1)
        assert e.watermark == 29  # released in order up to the block before it
        assert e.seq_done is not None and e.seq_done > SLOW_SEQ  # later blocks are done
        assert e.held_records > 0 and e.held_records % 10 == 0 and e.held_bytes > 0
        assert start - 1 <= (e.blocker_since or 0) <= time.time()
        if case == "local":  # the worker's marker names it
            assert e.blocker_worker is not None and e.blocker_worker.startswith("pid ")
        else:  # threads and Ray do not say which worker runs a block
            assert e.blocker_worker is None
    assert max(e.held_records for e in held_up) >= 20  # blocks 4, 5, … wait for it
    # The watermark stalls at 29 while block 3 runs, then jumps past several blocks at once.
    marks = [e.watermark for e in heads]
    after = marks[heads.index(held_up[-1]) + 1]
    assert after is not None and after >= 29 + 10 * 3
    assert marks == sorted(marks, key=lambda m: -1 if m is None else m)  # never goes back
    last = heads[-1]
    assert (last.watermark, last.seq_done, last.held_records, last.held_bytes) == (99, 99, 0, 0)
    assert last.blocker_block is None

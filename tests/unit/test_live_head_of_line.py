"""A running stage's head of line in its samples: the newest HeadOfLine's figures, the blocker's
seconds counted to the sample's time, and its peaks taken as Occupancy's."""

from __future__ import annotations

import time

from seqline.orchestration.events import HeadOfLine, Occupancy
from seqline.orchestration.live_stage import HEAD, LiveStage


def _stage() -> LiveStage:
    now = time.perf_counter()
    return LiveStage(7, started=now, sampled=(now - 1.0, 0))


def test_a_sample_tells_the_block_that_holds_the_others_and_for_how_long():
    live = _stage()
    live.follow(Occupancy(stage="s", in_flight=6, held=0))
    live.follow(HeadOfLine(stage="s", in_flight=6, held=4, watermark=99, seq_done=179,
                           held_records=40, held_bytes=1_280, blocker_block=10,
                           blocker_seq=100, blocker_attempt=2, blocker_worker="pid 812",
                           blocker_since=time.time() - 3.0))
    row = live.sample(time.perf_counter())
    assert (row["in_flight"], row["reorder_held"]) == (6, 4)  # peaks, as Occupancy's
    assert {k: row[k] for k in HEAD if k != "blocker_seconds"} == {
        "watermark": 99, "seq_done": 179, "held_records": 40, "held_bytes": 1_280,
        "blocker_block": 10, "blocker_seq": 100, "blocker_attempt": 2,
        "blocker_worker": "pid 812"}
    assert 3.0 <= row["blocker_seconds"] < 4.0
    # Released: nothing waits, the watermark jumps.
    live.follow(HeadOfLine(stage="s", in_flight=2, held=5, watermark=189, seq_done=189,
                           held_records=0, held_bytes=0))
    row = live.sample(time.perf_counter())
    assert (row["watermark"], row["blocker_seq"], row["blocker_seconds"]) == (189, None, None)


def test_a_stage_without_a_reorder_buffer_has_no_head_of_line():
    row = _stage().sample(time.perf_counter())
    assert all(row[k] is None for k in HEAD)

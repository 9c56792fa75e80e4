"""LiveStage: a running stage's figures from its events, and the samples the recorder writes."""

from __future__ import annotations

import time

import numpy as np

from seqline.components.train.audit import EpochAudit
from seqline.orchestration.events import (
    BlockRetried,
    BlocksDone,
    Occupancy,
    RecordsConsumed,
    StageStarted,
    WaitEnded,
    WaitStarted,
)
from seqline.orchestration.live_stage import PROGRESS, LiveStage
from seqline.orchestration.stage_output import Tally
from seqline.pipeline.tasks import Counts


def _stage() -> LiveStage:
    now = time.perf_counter()
    return LiveStage(7, started=now, sampled=(now - 2.0, 0))


def test_a_sample_takes_the_peaks_since_the_last_one_then_resets_them():
    live = _stage()
    live.follow(BlocksDone(stage="s", counts=Counts(records_in=512), blocks=4, waited_input=0.5,
                           waited_output=0.25))
    live.follow(Occupancy(stage="s", in_flight=6, held=2))
    live.follow(Occupancy(stage="s", in_flight=3, held=0))
    row = live.sample(time.perf_counter())
    assert (row["stage_run_id"], row["records_done"]) == (7, 512)
    assert (row["in_flight"], row["reorder_held"]) == (6, 2)
    assert (row["waited_input"], row["waited_output"]) == (0.5, 0.25)
    assert 200 < row["rows_per_s"] < 300  # 512 records over about 2 s
    assert set(PROGRESS) < set(row)
    again = live.sample(time.perf_counter())
    assert (again["in_flight"], again["reorder_held"]) == (3, 0)  # what is in flight now
    assert live.max_in_flight == 6


def test_a_wait_under_way_counts_until_now_and_a_driver_stages_ended_waits_add_up():
    live = _stage()
    live.follow(WaitEnded(stage="s", on="input", seconds=1.0))
    live.follow(WaitStarted(stage="s", on="output"))
    waited_in, waited_out = live.waits(time.perf_counter() + 2.0)
    assert waited_in == 1.0 and 1.9 < waited_out < 2.5
    live.follow(WaitEnded(stage="s", on="output", seconds=2.0))
    assert live.waits(time.perf_counter() + 5.0)[1] == 0.0  # ended: runners report its total


def test_records_consumed_never_go_back_and_retries_count():
    live = _stage()
    live.follow(RecordsConsumed(stage="s", records=100))
    live.follow(RecordsConsumed(stage="s", records=90))
    live.follow(BlockRetried(stage="s", block=3, first_seq=384, attempt=2))
    assert (live.records, live.retries) == (100, 1)


def test_a_driver_stage_that_measures_its_own_waits_is_sampled_by_them():
    """Train tells its steps' input waits as each epoch ends: its live figure is that one (the
    measure its result holds), not the line's, and a later count without one keeps it."""
    live = _stage()
    live.follow(WaitEnded(stage="s", on="input", seconds=1.0))  # waiting for the plan
    assert live.waits(time.perf_counter())[0] == 1.0
    live.follow(RecordsConsumed(stage="s", records=64, waited_input=0.25))
    live.follow(RecordsConsumed(stage="s", records=96))
    assert live.waits(time.perf_counter() + 1.0)[0] == 0.25


def test_a_stopped_train_stage_took_its_epochs_records_once_however_many_epochs_it_fed():
    """Train tells the examples fed over all epochs (its live rows/s) and those taken: a
    train stage stopped in its third epoch of 10 records had taken 10, not the 25 it fed."""
    tally = Tally()
    tally(StageStarted(stage="model"))
    audit = EpochAudit(1, progress=lambda fed, waited, taken: tally(
        RecordsConsumed(stage="model", records=fed, waited_input=waited, taken=taken)))
    for epoch in range(3):
        audit.begin(epoch)
        for first in range(0, 10 if epoch < 2 else 5, 5):  # the third epoch stops halfway
            audit.record(np.arange(first, first + 5, dtype=np.int64), 0.01)
        if epoch < 2:
            audit.end(epoch, {"loss": 1.0})
    assert tally.account("model")["records_in"] == 10
    assert tally._live["model"].records == 25  # the rate chart's: every example fed

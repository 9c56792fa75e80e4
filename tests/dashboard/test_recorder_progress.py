"""The run recorder, fed real events on a real store: a driver stage's live progress makes its
rows/s over time, a peak shorter than one sampling interval still reaches the chart, and the
events it stores are the run's story, coalesced."""

from __future__ import annotations

import threading

from seqline.orchestration.events import (
    Occupancy,
    RecordsConsumed,
    RunEnded,
    StageCancelled,
    StageCommitted,
    StageStarted,
)
from seqline.orchestration.stage_output import Tally
from seqline.pipeline.tasks import Counts
from tests.recorded import recording


def test_progress_peaks_and_events_reach_the_store(tmp_path):
    with recording(tmp_path) as (store, bus):
        tally = Tally()  # as the executor follows each stage, for a stopped one's account
        bus.subscribe(tally)
        # A stage shorter than a sampling interval whose window filled up to 6 blocks.
        bus.publish(StageStarted(stage="write"))
        for in_flight in (3, 6, 2, 0):
            bus.publish(Occupancy(stage="write", in_flight=in_flight, held=in_flight // 2))
        bus.publish(StageCommitted(stage="write", counts=Counts(2, 2), blocks=1, seq_min=0,
                                   seq_max=1, seconds=0.01, waited_input=0.0,
                                   waited_output=0.0, max_in_flight=6, block_retries=0,
                                   path=tmp_path, manifest={}))
        # A driver stage's progress, as a trainer reports the examples it fed so far.
        bus.publish(StageStarted(stage="pre"))
        ids = {s["name"]: s["stage_run_id"] for s in store.show_run("r")["stages"]}
        fed, stop = 0, threading.Event()
        while len(store.samples_of(ids["pre"])) < 6 and not stop.wait(0.05):
            fed += 1000
            bus.publish(RecordsConsumed(stage="pre", records=fed))
        bus.publish(StageCancelled(stage="pre", seconds=0.5,
                                   reason="stopped after 0.50 s: a test", **tally.account("pre")))
        bus.publish(RunEnded(status="succeeded", ran=3, reused=0))
        write, pre = store.samples_of(ids["write"]), store.samples_of(ids["pre"])
        shown = {s["name"]: s for s in store.show_run("r")["stages"]}
        events = store.events_of("r")
    assert max(s["in_flight"] for s in write) == 6  # the chart shows what the table says
    assert max(s["reorder_held"] for s in write) == 3
    done = [s["records_done"] for s in pre]
    assert done == sorted(done) and done[-1] > done[0]
    assert max(s["rows_per_s"] for s in pre) > 0
    assert shown["write"]["status"] == "succeeded" and shown["write"]["max_in_flight"] == 6
    assert shown["pre"]["status"] == "cancelled" and shown["pre"]["error"] is None
    assert shown["pre"]["reason"] == "stopped after 0.50 s: a test"
    assert shown["pre"]["records_in"] == fed  # what it did until it was stopped
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert {"stage_started", "stage_committed", "stage_cancelled", "progress"} <= set(kinds)
    assert "occupancy" not in kinds and "records_consumed" not in kinds  # coalesced

"""The run recorder samples a driver stage's live progress (train's examples fed so far), so
its rows/s over time is not flat while it runs."""

from __future__ import annotations

import threading

from seqline.orchestration.executor import StageReport
from seqline.orchestration.recorder import RunRecorder, records_done
from seqline.orchestration.store import RunStore
from seqline.pipeline.stage import Counts


def test_a_driver_stage_without_progress_counts_what_it_reports():
    report = StageReport("train", "train", counts=Counts(records_in=7, records_out=7))
    assert records_done(report) == 7


def test_a_failing_progress_reader_falls_back_to_the_counts():
    report = StageReport("train", "train")
    report.live_records = lambda: 1 // 0  # type: ignore[attr-defined]
    assert records_done(report) == 0


def test_train_progress_reaches_the_samples_and_its_rate_is_not_flat(tmp_path):
    """A real store and recorder thread; the stage reports examples fed as a trainer would
    (a counter that grows while the stage runs)."""
    with RunStore.open(tmp_path) as store:
        store.create_run("r", "p", pipeline_file=None, fingerprint=None, runner="local",
                         options={})
        recorder = RunRecorder(store, "r", {}, {}, sample_seconds=0.05)
        stage_run = store.start_stage("r", "train", "train", params={}, cache_key=None)
        recorder._ids["train"] = stage_run
        fed = {"n": 0}
        report = StageReport("train", "train")
        report.live_records = lambda: fed["n"]  # type: ignore[attr-defined]
        recorder.started(_Stage("train"), report)
        recorder.start(runner=None)  # type: ignore[arg-type]
        stop = threading.Event()
        while len(store.samples_of(stage_run)) < 6 and not stop.wait(0.05):
            fed["n"] += 1000  # examples fed by the training steps
        recorder.close("succeeded")
        samples = store.samples_of(stage_run)
    done = [s["records_done"] for s in samples]
    assert done == sorted(done) and done[-1] > done[0]
    assert max(s["rows_per_s"] for s in samples) > 0


class _Stage:
    def __init__(self, name: str) -> None:
        self.name, self.component = name, "train"

"""batching on in-memory records: exact batches, windows at the split, replicas, shuffles."""

import json
import time
from dataclasses import asdict

import numpy as np
import pyarrow as pa
import pytest

from seqline.components import batching, train
from seqline.components import stage as new_stage
from seqline.components.batching import make_plan
from seqline.components.batching.examples import Batches, load_batches
from seqline.components.batching.plan import Plan
from seqline.components.train import EpochAudit
from seqline.pipeline.errors import ConfigError, StageError
from seqline.pipeline.specs import StageContext
from seqline.pipeline.tfrecord import schema_to_text


def _plan(**overrides) -> Plan:
    base = dict(source="features", batch_size=4, label="y", features=("x",), remainder="keep",
                eval_fraction=0.25, split="tail", seed=7, window=None, shuffle=None)
    return Plan(**{**base, **overrides})


def _batches(n=20, **overrides) -> Batches:
    seq = np.arange(100, 100 + n, dtype=np.int64)  # seq need not start at 0
    x = np.arange(n, dtype=np.float32)[:, None]
    return Batches(_plan(**overrides), x, np.arange(n) * 10.0, seq, {"__seq__": seq})


def test_batching_cuts_exact_batches_in_seq_order_and_keeps_or_drops_the_rest():
    kept = list(_batches(n=14, eval_fraction=0.0).batches("train"))
    assert [len(seq) for _, _, seq in kept] == [4, 4, 4, 2]
    assert np.concatenate([seq for _, _, seq in kept]).tolist() == list(range(100, 114))
    dropped = list(_batches(n=14, eval_fraction=0.0, remainder="drop").batches("train"))
    assert [len(seq) for _, _, seq in dropped] == [4, 4, 4]


def test_batching_tail_split_puts_the_last_records_in_eval():
    b = _batches(n=20)
    assert b.example_seq("train").tolist() == list(range(100, 115))
    assert b.example_seq("eval").tolist() == list(range(115, 120))


def _starts(b: Batches, split: str) -> list[int]:
    """The first row of every example (x is the row number here)."""
    return [int(s) for x, _, _ in b.batches(split) for s in x[:, 0, 0]]


def test_batching_windows_never_cross_the_train_eval_boundary():
    b = _batches(n=20, window={"length": 3, "stride": 1, "label_offset": 1})
    # boundary at row 15: a train window's rows and label are < 15, an eval window's >= 15
    assert _starts(b, "train") == list(range(0, 12))
    assert b.label_rows("train").max() == 14
    assert _starts(b, "eval") == [15, 16]
    assert b.label_rows("eval").tolist() == [18, 19]
    x, y, seq = next(b.batches("train"))
    assert x.shape == (4, 3, 1)
    assert x[1, :, 0].tolist() == [1.0, 2.0, 3.0] and y[1] == 40.0 and seq[1] == 104


def test_batching_window_stride_and_offset():
    b = _batches(n=20, eval_fraction=0.0, window={"length": 4, "stride": 3, "label_offset": 0})
    assert _starts(b, "train") == [0, 3, 6, 9, 12, 15]
    assert b.label_rows("train").tolist() == [3, 6, 9, 12, 15, 18]


def test_batching_hash_split_depends_on_seq_only():
    b = _batches(n=2000, split="hash", eval_fraction=0.2)
    evals = set(b.example_seq("eval").tolist())
    assert 300 < len(evals) < 500
    again = _batches(n=3000, split="hash", eval_fraction=0.2)  # more data: same old decisions
    assert evals == {s for s in again.example_seq("eval").tolist() if s < 2100}


def test_batching_shuffle_is_seeded_per_epoch_and_never_touches_eval():
    b = _batches(n=40, shuffle="examples")
    epoch0, epoch1 = b.example_seq("train", 0), b.example_seq("train", 1)
    assert sorted(epoch0.tolist()) == list(range(100, 130)) and epoch0.tolist() != sorted(epoch0)
    assert epoch1.tolist() != epoch0.tolist()
    assert _batches(n=40, shuffle="examples").example_seq("train", 0).tolist() == epoch0.tolist()
    assert _batches(n=40, shuffle="examples", seed=8).example_seq("train", 0).tolist() != \
        epoch0.tolist()
    assert b.example_seq("eval", 3).tolist() == list(range(130, 140))


def test_batching_record_shuffle_scrambles_window_contents_inside_train_only():
    b = _batches(n=40, shuffle="records", window={"length": 3, "stride": 1, "label_offset": 1})
    x, _, _ = next(b.batches("train", 0))
    assert not all(np.diff(x[0, :, 0]) == 1)  # a window of unrelated records
    assert max(x.max() for x, _, _ in b.batches("train", 0)) < 30  # eval records never used
    x_eval, _, _ = next(b.batches("eval"))
    assert x_eval[0, :, 0].tolist() == [30.0, 31.0, 32.0]


def test_batching_statistics_read_the_first_train_records_unshuffled():
    for shuffle in (None, "examples", "records"):
        window = {"length": 3, "stride": 1, "label_offset": 1}
        first = _batches(n=40, shuffle=shuffle, window=window).first(5)
        assert first is not None
        assert first[0][:, 0].tolist() == [0, 1, 2, 3, 4]
        assert first[1].tolist() == [0, 10, 20, 30, 40]
    hashed = _batches(n=40, split="hash", eval_fraction=0.5)
    rows = hashed.first(100)
    assert rows is not None and rows[0][:, 0].tolist() == [
        s - 100 for s in hashed.example_seq("train")]


def test_batching_audit_records_contiguous_replica_slices():
    audit = EpochAudit(replicas=2)
    audit.begin(0)
    audit.record(np.arange(8, 16), 0.0)
    assert audit.batches == [{"first": 8, "last": 15, "replicas": [[8, 11], [12, 15]]}]


def test_the_audit_tells_examples_as_fed_and_the_steps_waits_as_each_epoch_ends():
    told = []
    audit = EpochAudit(replicas=1,
                       progress=lambda n, waited, taken: told.append((n, waited, taken)))
    for epoch in range(2):
        audit.begin(epoch)
        audit.step_begins()
        time.sleep(0.02)  # the step waits for its batch
        audit.record(np.arange(8), 0.0)
        audit.end(epoch, {"loss": 1.0})
    waits = [e["input_wait_seconds"] for e in audit.epochs]
    assert all(w >= 0.02 for w in waits)
    assert told == [(8, None, 8), (8, waits[0], 8), (16, None, 8),
                    (16, waits[0] + waits[1], 8)]  # fed over all epochs; taken: 8


SCHEMA = pa.schema([("x", pa.float32()), ("weather", pa.string()), ("y", pa.float32()),
                    ("__seq__", pa.int64())])
BAD_PLANS = [
    ({"label": "temp"}, r"label column 'temp' is not in the records of 'features'"),
    ({"features": ["x", "weather"]},
     r"feature 'weather' is string, not a number.*Encode it in a preprocess function"),
    ({"window": {"length": 0}}, r"parameter window.length: expected greater than or equal to 1"),
    ({"split": "hash", "window": {"length": 3}},
     r"parameter window: expected no window with split 'hash'"),
]


@pytest.mark.parametrize(("params", "message"), BAD_PLANS)
def test_batching_bad_parameters_are_named(params, message):
    with pytest.raises(ConfigError, match=message):
        stage = new_stage("batches", "batching", {"batch_size": 4, "label": "y", **params})
        make_plan(stage, "features", SCHEMA)


def test_batching_default_features_are_the_numeric_columns_and_the_labels_past():
    stage = new_stage("b", "batching", {"batch_size": 4, "label": "y"})
    assert make_plan(stage, "f", SCHEMA).features == ("x",)
    windowed = new_stage("b", "batching", {"batch_size": 4, "label": "y", "window": {"length": 3}})
    assert make_plan(windowed, "f", SCHEMA).features == ("x", "y")


def _empty_source(tmp_path, shuffle=None):
    """A run whose `features` stage stored no records, and a batching plan over it."""
    run = tmp_path / "runs" / "r"
    (run / "features").mkdir(parents=True)
    (run / "features" / "manifest.json").write_text(json.dumps(
        {"stage": "features", "schema": schema_to_text(SCHEMA), "shards": [],
         "compression": "gzip"}))
    plan = Plan("features", 4, "y", ("x",), "keep", 0.25, "tail", 7, None, shuffle)
    (run / "batches").mkdir()
    (run / "batches" / "manifest.json").write_text(json.dumps(
        {"stage": "batches", "plan": asdict(plan)}))
    (tmp_path / "out").mkdir()
    return run, plan


def test_batching_an_input_without_records_fails_naming_the_stage(tmp_path):
    run, plan = _empty_source(tmp_path)
    with pytest.raises(StageError, match=r"stage 'features' stored no records to batch") as e:
        batching.run_stage(new_stage("batches", "batching", {"batch_size": 4, "label": "y"}),
                           StageContext(run, tmp_path / "out", "features", tmp_path, "p"))
    assert e.value.stage == "batches"
    with pytest.raises(StageError, match=r"stage 'model': its input 'features' stored no "
                       r"records to batch") as e:
        load_batches(run, plan, "model")
    assert e.value.stage == "model"


def test_training_a_shuffled_plan_without_records_fails_naming_the_stage(tmp_path):
    """A shuffled plan is read into memory (load_batches) before TensorFlow is started."""
    run, _ = _empty_source(tmp_path, shuffle="examples")
    stage = new_stage("model", "train", {"model": "tabular_regression"})
    with pytest.raises(StageError, match=r"stage 'model': its input 'features' stored no "
                       r"records to batch") as e:
        train.run_stage(stage, StageContext(run, tmp_path / "out", "batches", tmp_path, "p"))
    assert e.value.stage == "model"
    problems: list[str] = []
    train.verify_audit(run, {"stage": "model", "input": "batches", "epochs": []}, problems)
    assert problems == ["audit: cannot rebuild the batches: stage 'model': its input "
                        "'features' stored no records to batch."]

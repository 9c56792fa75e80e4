"""evaluate's blessing: thresholds, and comparison with the last blessed model of the pipeline."""

import json

import pytest

from seqline.components import stage as new_stage
from seqline.components.evaluate import _bless
from seqline.pipeline.specs import StageContext

STAGE = new_stage("evaluation", "evaluate")


def _past_run(root, run_id, pipeline, mae, blessed, committed):
    folder = root / "runs" / run_id
    (folder / "evaluation").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"pipeline": pipeline}))
    (folder / "evaluation" / "manifest.json").write_text(json.dumps(
        {"metrics": {"mae": mae}, "blessed": blessed, "committed_at": committed}))


@pytest.fixture
def ctx(tmp_path):
    run = tmp_path / "runs" / "now"
    run.mkdir(parents=True)
    return StageContext(run, run / "out", "model", tmp_path, "weather")


def test_evaluate_first_model_is_blessed_if_thresholds_hold(ctx):
    verdict = _bless(STAGE, ctx, "mae", {"mae": 2.5}, {"mae": {"max": 3.0}})
    assert verdict["blessed"] and verdict["baseline"] is None
    assert verdict["thresholds"]["mae"] == {"max": 3.0, "value": 2.5, "ok": True}


def test_evaluate_threshold_missed_is_not_blessed_and_says_why(ctx):
    verdict = _bless(STAGE, ctx, "mae", {"mae": 3.5}, {"mae": {"max": 3.0}})
    assert not verdict["blessed"]
    assert verdict["reasons"] == ["mae 3.5 is outside its threshold {'max': 3.0}"]


def test_evaluate_compares_with_the_newest_blessed_run_of_the_same_pipeline(ctx):
    root = ctx.root
    _past_run(root, "old", "weather", 1.0, True, "2026-01-01T00:00:00+00:00")
    _past_run(root, "new", "weather", 2.0, True, "2026-02-01T00:00:00+00:00")
    _past_run(root, "rejected", "weather", 0.5, False, "2026-03-01T00:00:00+00:00")
    _past_run(root, "other", "taxi", 0.1, True, "2026-03-01T00:00:00+00:00")
    worse = _bless(STAGE, ctx, "mae", {"mae": 2.1}, {})
    assert not worse["blessed"] and worse["baseline"]["run_id"] == "new"
    assert worse["reasons"] == ["mae 2.1 is worse than the last blessed model's 2.0 (run new)"]
    better = _bless(STAGE, ctx, "mae", {"mae": 1.9}, {})
    assert better["blessed"]
    assert better["reasons"] == ["every threshold holds and mae is no worse than run new's"]

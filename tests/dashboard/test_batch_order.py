"""An epoch's batches as a picture: a gap or a step back in the seqs stands out."""

from __future__ import annotations

from seqline.orchestration.dashboard import batch_order as picture
from seqline.orchestration.dashboard.batch_order import batch_order


def _batches(*ranges: tuple[int, int]) -> list[dict]:
    return [{"first": first, "last": last} for first, last in ranges]


def test_batches_that_go_on_from_each_other_are_all_ok():
    drawn = batch_order(_batches((14, 45), (46, 77), (78, 109)))
    assert drawn is not None
    assert [b["kind"] for b in drawn["bars"]] == ["ok"] * 3
    assert (drawn["gaps"], drawn["backs"], drawn["first"], drawn["last"]) == (0, 0, 14, 109)
    tops = [b["y"] for b in drawn["bars"]]
    assert tops == sorted(tops, reverse=True)  # later seqs drawn higher
    assert [b["x"] for b in drawn["bars"]] == sorted(b["x"] for b in drawn["bars"])


def test_a_gap_and_a_step_back_are_told_and_marked():
    drawn = batch_order(_batches((0, 31), (32, 63), (70, 90), (80, 99)))
    assert drawn is not None
    assert [b["kind"] for b in drawn["bars"]] == ["ok", "ok", "gap", "back"]
    assert (drawn["gaps"], drawn["backs"]) == (1, 1)


def test_a_long_epoch_is_drawn_in_groups_that_keep_a_break(monkeypatch):
    monkeypatch.setattr(picture, "MAX_BARS", 10)
    ranges = [(32 * i, 32 * i + 31) for i in range(95)]
    ranges[57] = (32 * 57 + 5, 32 * 57 + 31)  # five records skipped before batch 57
    drawn = batch_order(_batches(*ranges))
    assert drawn is not None
    assert len(drawn["bars"]) == 10  # groups of 10 batches
    assert [b["kind"] for b in drawn["bars"]].count("gap") == 1
    assert drawn["bars"][5]["kind"] == "gap" and drawn["gaps"] == 1
    assert all(b["x"] + b["w"] <= picture.WIDTH for b in drawn["bars"])


def test_no_batches_no_picture():
    assert batch_order([]) is None

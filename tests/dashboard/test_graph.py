"""The run page's graph: layers from the stages' sources, records on the edges, a look per
state (ran, reused, stopped or not run because another stage failed, not run), boxes that
never overlap and edges that never cross a box."""

from __future__ import annotations

import itertools

import pytest

from seqline.orchestration.dashboard.graph import ACROSS_MAX_WIDTH, graph, node_words


def _stage(name: str, source: str | None, status: str = "succeeded", records_in: int | None = 10,
           **more: object) -> dict[str, object]:
    out = records_in if status in ("succeeded", "cached") else None
    return {"name": name, "source": source, "status": status, "records_in": records_in,
            "records_out": out, "live": {}, "not_run": None, **more}


# The demo's counts: training takes 1,155 windows of batching's 1,461 records in; the model
# stage's out is what it trained on; evaluation reads 1,461.
DEMO = [_stage("read", None, records_in=1_461), _stage("examples", "read", records_in=1_461),
        _stage("features", "examples", records_in=1_461),
        _stage("batches", "features", records_in=1_461),
        _stage("model", "batches", records_in=1_155),
        _stage("evaluation", "model", records_in=1_461)]


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and \
        a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def test_a_line_of_stages_is_one_layer_each_with_the_records_out_and_in_on_its_edges():
    """An edge agrees with the box it leaves (its "out"), and names the next box's "in" too
    when that differs: batches -> model read 1,155 beside batches' 1,461 out."""
    drawn = graph(DEMO)
    assert [(n["name"], n["layer"], n["pos"]) for n in drawn["nodes"]] == [
        (s["name"], i, 0) for i, s in enumerate(DEMO)]
    assert [(e["from"], e["to"], e["labels"]) for e in drawn["edges"]] == [
        ("read", "examples", ["1,461"]), ("examples", "features", ["1,461"]),
        ("features", "batches", ["1,461"]), ("batches", "model", ["1,461 out", "1,155 in"]),
        ("model", "evaluation", ["1,155 out", "1,461 in"])]
    titles = [e["title"] for e in drawn["edges"]]
    assert titles[0] == "read → examples: 1,461 records"
    assert titles[3] == "batches → model: 1,461 records out of batches; model took in 1,155"
    assert [k["look"] for k in drawn["legend"]] == ["ran"]  # the legend: what is drawn
    across, down = drawn["across"], drawn["down"]
    assert across is not None and across["width"] <= ACROSS_MAX_WIDTH
    assert across["height"] < 80 and down["width"] < 400  # one row; one column for phones
    for layout in (across, down):
        boxes = layout["boxes"]
        assert set(boxes) == {s["name"] for s in DEMO}
        assert all(b["name"] == n for n, b in boxes.items())  # short names are whole
        for a, b in itertools.combinations(boxes.values(), 2):
            assert not _overlap(a, b)
        assert all(b["x"] >= 0 and b["x"] + b["w"] <= layout["width"] for b in boxes.values())


def test_readers_of_one_stage_sit_side_by_side_and_edges_run_between_layers():
    stages = [_stage("read", None), _stage("a", "read"), _stage("b", "read"),
              _stage("c", "a"), _stage("d", "read"), _stage("e", "b")]
    drawn = graph(stages)
    layers = {n["name"]: (n["layer"], n["pos"]) for n in drawn["nodes"]}
    assert layers == {"read": (0, 0), "a": (1, 0), "b": (1, 1), "c": (2, 0), "d": (1, 2),
                      "e": (2, 1)}
    for layout, across in ((drawn["across"], True), (drawn["down"], False)):
        boxes = layout["boxes"]
        for a, b in itertools.combinations(boxes.values(), 2):
            assert not _overlap(a, b)
        for edge, path in zip(drawn["edges"], layout["paths"], strict=True):
            a, b = boxes[edge["from"]], boxes[edge["to"]]
            # from the gap's one side to its other: never through a box
            start, end = (a["x"] + a["w"], b["x"]) if across else (a["y"] + a["h"], b["y"])
            assert path["d"].startswith(f"M{start}," if across else f"M{a['x'] + a['w'] / 2},")
            assert path["d"].endswith(f" {end},{b['y'] + b['h'] / 2}" if across
                                      else f",{end}")


@pytest.mark.parametrize(("stage", "words", "look"), [
    (_stage("s", None), "succeeded", "ran"),
    (_stage("s", None, status="running"), "running", "ran"),
    (_stage("s", None, status="running", blocked={"seq": 1024}), "blocked on seq 1,024", "ran"),
    (_stage("s", None, status="failed"), "failed", "ran"),
    (_stage("s", None, status="cached", cached_from="first"), "reused", "reused"),
    (_stage("s", None, status="pending"), "pending", "notrun"),
    (_stage("s", None, status="skipped", not_run={
        "because": "failure", "stage": "features", "verb": "not run",
        "short": "not run: features failed"}), "not run: features failed", "because-failure"),
    (_stage("s", None, status="skipped", not_run={
        "because": "cancel", "stage": None, "verb": "not run",
        "short": "not run: the run was cancelled"}), "not run: the run was cancelled", "notrun"),
    # started, then stopped: solid in cancelled's colour, or the cascade's look
    (_stage("s", None, status="cancelled", not_run={
        "because": "cancel", "stage": None, "verb": "stopped",
        "short": "stopped: the run was cancelled"}), "stopped: the run was cancelled", "ran"),
    (_stage("s", None, status="cancelled", not_run={
        "because": "failure", "stage": "features", "verb": "stopped",
        "short": "stopped: features failed"}), "stopped: features failed", "because-failure"),
])
def test_each_state_has_its_words_and_look(stage, words, look):
    assert node_words(stage) == (words, look)


def test_an_edge_into_a_stage_that_did_not_run_carries_no_records_and_is_dashed():
    cause = {"because": "failure", "stage": "work", "verb": "not run",
             "short": "not run: work failed"}
    drawn = graph([_stage("read", None, records_in=40),
                   _stage("work", "read", status="failed", records_in=None,
                          live={"records_done": 40}),
                   _stage("more", "work", status="skipped", records_in=None, not_run=cause)])
    assert [(e["labels"], e["look"]) for e in drawn["edges"]] == [(["40"], "ran"),
                                                                  ([], "notrun")]
    assert drawn["nodes"][2]["title"].startswith("more: not run: work failed")


def test_an_edge_into_a_stage_a_cancel_stopped_carries_what_it_took_in():
    stopped = {"because": "cancel", "stage": None, "verb": "stopped",
               "short": "stopped: the run was cancelled"}
    drawn = graph([_stage("read", None, records_in=40),
                   _stage("work", "read", status="cancelled", records_in=30, not_run=stopped)])
    assert [(e["labels"], e["look"]) for e in drawn["edges"]] == [(["40 out", "30 in"], "ran")]
    assert drawn["nodes"][1]["status"] == "cancelled"


def test_a_long_name_is_cut_to_its_box_and_whole_in_its_tooltip():
    name = "a_stage_name_far_longer_than_any_box"
    drawn = graph([_stage(name, None)])
    shown = drawn["across"]["boxes"][name]["name"]
    assert shown.endswith("…") and name.startswith(shown[:-1])
    assert drawn["nodes"][0]["title"].startswith(name)


def test_a_pipeline_too_long_to_go_across_is_drawn_down_only():
    stages = [_stage("s0", None)] + [_stage(f"s{i}", f"s{i - 1}") for i in range(1, 10)]
    drawn = graph(stages)
    assert drawn["across"] is None
    assert drawn["down"]["width"] < 400 and len(drawn["down"]["boxes"]) == 10


def test_a_source_the_run_does_not_have_starts_a_layer():
    drawn = graph([_stage("a", "gone"), _stage("b", "a")])
    assert [n["layer"] for n in drawn["nodes"]] == [0, 1] and len(drawn["edges"]) == 1


@pytest.mark.parametrize(("a", "b", "labels", "title"), [
    (_stage("read", None, records_in=1_000), _stage("work", "read", status="running",
                                                    records_in=None, live={"records_done": 400}),
     ["1,000 out", "400 in"], "read → work: 1,000 records out of read; work took in 400"),
    (_stage("read", None, status="running", records_in=None, live={"records_done": 512}),
     _stage("work", "read", status="running", records_in=None, live={"records_done": 256}),
     ["256 in"], "read → work: work took in 256"),  # read's out: counted when it commits
    (_stage("read", None, records_in=1_461), _stage("work", "read", status="skipped",
                                                    records_in=None),
     ["1,461 out"], "read → work: 1,461 records out of read; work did not take any in"),
    (_stage("read", None, records_in=1_000_000), _stage("work", "read", records_in=146_250),
     ["1.00M out", "146k in"], "read → work: 1,000,000 records out of read; work took in "
                               "146,250"),
])
def test_an_edge_names_out_and_in_when_they_differ(a, b, labels, title):
    edge = graph([a, b])["edges"][0]
    assert (edge["labels"], edge["title"]) == (labels, title)


def test_two_labels_sit_either_side_of_the_line_inside_the_gap():
    drawn = graph(DEMO)
    across, down = drawn["across"], drawn["down"]
    path, boxes = across["paths"][3], across["boxes"]
    above, below = path["label_ys"]
    assert above < boxes["model"]["y"] + boxes["model"]["h"] / 2 < below
    gap = boxes["model"]["x"] - (boxes["batches"]["x"] + boxes["batches"]["w"])
    assert gap >= 10 * 6  # "99,999 out" in 11 px text
    first, second = down["paths"][3]["label_ys"]
    assert down["boxes"]["batches"]["y"] + down["boxes"]["batches"]["h"] < first - 9
    assert second < down["boxes"]["model"]["y"]


def test_a_cascade_too_long_for_its_box_says_which_stage_failed_in_brief():
    cause = {"because": "failure", "stage": "features", "verb": "not run",
             "short": "not run: features failed"}
    drawn = graph([_stage("features", None, status="failed", records_in=None),
                   _stage("batches", "features", status="skipped", records_in=None,
                          not_run=cause)])
    assert drawn["across"]["boxes"]["batches"]["words"] == "↳ features failed"
    assert drawn["down"]["boxes"]["batches"]["words"] == "not run: features failed"  # fits
    assert drawn["nodes"][1]["title"].startswith("batches: not run: features failed")


def test_a_cancel_too_long_for_its_box_tells_a_stopped_stage_from_one_not_started():
    stopped = {"because": "cancel", "stage": None, "verb": "stopped",
               "short": "stopped: the run was cancelled"}
    drawn = graph([_stage("features", None, status="cancelled", records_in=800,
                          not_run=stopped),
                   _stage("batches", "features", status="skipped", records_in=None,
                          not_run={**stopped, "verb": "not run",
                                   "short": "not run: the run was cancelled"})])
    boxes = drawn["across"]["boxes"]
    assert (boxes["features"]["words"], boxes["batches"]["words"]) == ("↳ cancelled",
                                                                       "↳ not run")


def test_a_stopped_stages_tooltip_is_its_reason_said_once():
    stopped = {"because": "cancel", "stage": None, "verb": "stopped",
               "short": "stopped: the run was cancelled"}
    reason = "stopped after 2.05 s: the run was cancelled (SIGINT)"
    drawn = graph([_stage("slow", None, status="cancelled", records_in=800, not_run=stopped,
                          reason=reason)])
    assert drawn["nodes"][0]["title"] == f"slow: {reason}"

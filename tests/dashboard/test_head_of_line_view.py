"""The stage page's head of line from a stage's samples: the blocker in the run page's words,
the longest hold, and the watermark drawn in steps under the highest seq done."""

from __future__ import annotations

from seqline.orchestration.dashboard.head_of_line import blocked, head_of_line

NONE = dict.fromkeys(("watermark", "seq_done", "held_records", "held_bytes", "blocker_block",
                      "blocker_seq", "blocker_attempt", "blocker_worker", "blocker_seconds"))


def _columns(rows: list[dict]) -> dict[str, list]:
    return {k: [r.get(k) for r in rows] for k in ("t", "reorder_held", *NONE)}


STALL = [  # a second apart: released to 99, then block 10 holds 11-17 for 3 s, then all go
    {**NONE, "t": 1.0},
    {"t": 2.0, "watermark": 89, "seq_done": 89, "held_records": 0, "held_bytes": 0},
    *({"t": 2.0 + s, "watermark": 99, "seq_done": 179, "held_records": 70, "held_bytes": 1_680,
       "blocker_block": 10, "blocker_seq": 100, "blocker_attempt": 1,
       "blocker_worker": "pid 812", "blocker_seconds": s - 0.5} for s in (1, 2, 3)),
    {"t": 6.0, "watermark": 399, "seq_done": 399, "held_records": 0, "held_bytes": 0},
]


def test_a_running_stage_held_back_says_by_which_block():
    stage = {"status": "running", "live": STALL[3]}
    assert blocked(stage)["text"] == "blocked on seq 100 (pid 812, attempt 1, 1.50 s)"
    assert blocked({"status": "running", "live": {**STALL[3], "blocker_worker": None}})[
        "text"] == "blocked on seq 100 (worker not known, attempt 1, 1.50 s)"
    assert blocked({"status": "succeeded", "live": STALL[3]}) is None  # ended: not now
    assert blocked({"status": "running", "live": STALL[1]}) is None  # nothing held back


def test_the_watermark_is_drawn_flat_while_held_then_jumping():
    shown = head_of_line({"status": "succeeded", "live": STALL[-1]}, _columns(STALL))
    assert shown["now"]["watermark"] == shown["now"]["seq_done"] == 399
    assert shown["now"]["blocker"] is None
    assert shown["longest"] == {"seq": 100, "block": 10, "worker": "pid 812", "attempt": 1,
                                "seconds": 2.5}
    chart = shown["chart"]
    marks = [tuple(map(float, p.split(","))) for p in chart["watermark"].split()]
    ys = [y for _, y in marks]
    # 89, then 99 held for three samples (one flat run of points), then 399 at the top
    assert len(set(ys)) == 3 and ys[-1] == min(ys)
    xs = [x for x, _ in marks]
    assert xs == sorted(xs) and xs[0] == chart["left"]  # from the first sample with a figure
    assert [t["text"] for t in chart["ticks"]] == ["0", "399"]


def test_a_stage_without_a_reorder_buffer_or_with_one_sample_draws_nothing():
    assert head_of_line({"status": "succeeded", "live": {}}, _columns([NONE | {"t": 1.0}])) \
        is None
    once = head_of_line({"status": "succeeded", "live": STALL[-1]},
                        _columns([STALL[0], STALL[-1]]))
    assert once is not None and once["chart"] is None and once["longest"] is None

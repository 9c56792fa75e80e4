"""The streaming cutter gives exactly the batches of the in-memory `Batches`, chunk by chunk,
before the stream's length is known, holding only the rows not yet decided."""

import itertools

import numpy as np
import pytest

from seqline.components.batching import Batches, Plan
from seqline.components.cutter import Cutter, boundary

WINDOWS = [None, {"length": 3, "stride": 1, "label_offset": 1},
           {"length": 5, "stride": 2, "label_offset": 0}, {"length": 2, "stride": 3,
                                                           "label_offset": 4}]


def _plan(**overrides) -> Plan:
    base = dict(source="features", batch_size=4, label="y", features=("a", "b"),
                remainder="keep", eval_fraction=0.25, split="tail", seed=7, window=None,
                shuffle=None)
    return Plan(**{**base, **overrides})


def _records(n: int, rng: np.random.Generator):
    seq = np.sort(rng.choice(10 * n, size=n, replace=False)).astype(np.int64)  # gaps: filters
    x = rng.normal(size=(n, 2)).astype(np.float32)
    return x, rng.normal(size=n), seq


def _stream(plan: Plan, split: str, x, y, seq, chunks: list[int]):
    """Feed the records chunk by chunk, cutting as a trainer would; (batches, cut early)."""
    cutter, out, early, total = Cutter(plan, split), [], 0, 0
    for size in chunks:
        cutter.feed(x[total:total + size], y[total:total + size], seq[total:total + size])
        total += size
        got = list(cutter.cut(total, False))
        early += len(got)
        out += got
        # memory: the buffer holds rows from the next example on, never the decided past
        assert cutter.first >= min(cutter.next, cutter.fed)
    out += list(cutter.cut(total, True)) + list(cutter.finish())
    return out, early


@pytest.mark.parametrize("window,remainder,fraction",
                         list(itertools.product(WINDOWS, ["keep", "drop"], [0.0, 0.25, 0.5])))
def test_cutter_matches_in_memory_batches_for_any_chunking(window, remainder, fraction):
    rng = np.random.default_rng(hash((str(window), remainder, fraction)) % 2**32)
    for n in (1, 7, 40, 333):
        x, y, seq = _records(n, rng)
        plan = _plan(window=window, remainder=remainder, eval_fraction=fraction)
        whole = Batches(plan, x, y, seq, {"__seq__": seq})
        ends = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, 5), replace=False))
        cuts = np.diff(np.r_[0, ends, n])
        for split in ("train", "eval"):
            streamed, _ = _stream(plan, split, x, y, seq, [int(c) for c in cuts if c])
            expected = list(whole.batches(split))
            assert len(streamed) == len(expected), (split, n)
            for (sx, sy, ss), (ex, ey, es) in zip(streamed, expected, strict=True):
                np.testing.assert_array_equal(ss, es)
                np.testing.assert_array_equal(sx, ex)
                np.testing.assert_array_equal(sy, ey)


def test_cutter_hash_split_matches_and_streams_without_lag():
    rng = np.random.default_rng(3)
    x, y, seq = _records(500, rng)
    plan = _plan(split="hash", eval_fraction=0.2)
    whole = Batches(plan, x, y, seq, {"__seq__": seq})
    for split in ("train", "eval"):
        streamed, early = _stream(plan, split, x, y, seq, [50] * 10)
        assert np.concatenate([s for _, _, s in streamed]).tolist() \
            == whole.example_seq(split).tolist()
        assert early >= len(streamed) - 2  # all but the tail is cut before the end


def test_the_first_epoch_starts_long_before_the_stream_ends():
    """Tail split, eval 20 %: once m records are seen, the first boundary(m) are train."""
    rng = np.random.default_rng(5)
    n = 10_000
    x, y, seq = _records(n, rng)
    plan = _plan(batch_size=32, eval_fraction=0.2,
                 window={"length": 14, "stride": 1, "label_offset": 1})
    cutter, total, first_at = Cutter(plan, "train"), 0, None
    for start in range(0, n, 100):
        cutter.feed(x[start:start + 100], y[start:start + 100], seq[start:start + 100])
        total = start + 100
        if any(True for _ in cutter.cut(total, False)) and first_at is None:
            first_at = total
        # what the cutter holds: the undecided tail (eval_fraction of what was seen), a window
        assert len(cutter.seq) <= total - boundary(total, 0.2) + 14 + 100
    assert first_at is not None and first_at <= 100


def test_eval_rows_before_the_current_boundary_are_dropped_early():
    rng = np.random.default_rng(9)
    x, y, seq = _records(1000, rng)
    cutter = Cutter(_plan(eval_fraction=0.1), "eval")
    for start in range(0, 1000, 100):
        cutter.feed(x[start:start + 100], y[start:start + 100], seq[start:start + 100])
        assert not list(cutter.cut(start + 100, False))  # eval is known only at the end
        assert len(cutter.seq) <= 0.1 * (start + 100) + 100

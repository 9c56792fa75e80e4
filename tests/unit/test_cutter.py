"""The cutter against a brute-force reference, chunk by chunk, before the stream's length is
known, holding only the rows not yet decided; the in-memory `Batches` (the cutter fed
everything, plus the shuffles) against the same reference."""

import itertools
import zlib

import numpy as np
import pytest

from seqline.components.batching import examples
from seqline.components.batching.cutter import Cutter
from seqline.components.batching.examples import Batches
from seqline.components.batching.plan import Plan, boundary, hash_is_eval

WINDOWS = [None, {"length": 3, "stride": 1, "label_offset": 1},
           {"length": 5, "stride": 2, "label_offset": 0}, {"length": 2, "stride": 3,
                                                           "label_offset": 4}]
# (window, split): a window never goes with the hash split (batching refuses it)
LAYOUTS = [(w, "tail") for w in WINDOWS] + [(None, "hash")]


def _plan(**overrides) -> Plan:
    base = dict(source="features", batch_size=4, label="y", features=("a", "b"),
                remainder="keep", eval_fraction=0.25, split="tail", seed=7, window=None,
                shuffle=None)
    return Plan(**{**base, **overrides})


def _records(n: int, rng: np.random.Generator):
    seq = np.sort(rng.choice(10 * n, size=n, replace=False)).astype(np.int64)  # gaps: filters
    x = rng.normal(size=(n, 2)).astype(np.float32)
    return x, rng.normal(size=n), seq


def _reference_examples(plan: Plan, seq, split: str) -> list[tuple[list[int], int]]:
    """(rows of the example, row of its label) for every example of `split`, in order."""
    n = len(seq)
    if plan.split == "hash":
        return [([r], r) for r in range(n)
                if bool(hash_is_eval(seq[r:r + 1], plan.seed, plan.eval_fraction)[0])
                == (split == "eval")]
    train = n - int(round(n * plan.eval_fraction))  # the first `train` records are train
    low, high = (0, train) if split == "train" else (train, n)
    w = plan.window or {"length": 1, "stride": 1, "label_offset": 0}
    examples, start = [], low
    while start + w["length"] - 1 + w["label_offset"] < high:  # the label inside the split
        examples.append((list(range(start, start + w["length"])),
                         start + w["length"] - 1 + w["label_offset"]))
        start += w["stride"]
    return examples


def _reference(plan: Plan, x, y, seq, split: str, order=None):
    """The split's batches, by loops: exact batch_size, the last partial one kept or dropped."""
    examples = _reference_examples(plan, seq, split)
    if order is not None:
        examples = [examples[i] for i in order(len(examples))]
    out = []
    for i in range(0, len(examples), plan.batch_size):
        chunk = examples[i:i + plan.batch_size]
        if len(chunk) < plan.batch_size and plan.remainder == "drop":
            break
        xs = [x[rows] if plan.window else x[rows[0]] for rows, _ in chunk]
        out.append((np.array(xs), np.array([y[label] for _, label in chunk]),
                    np.array([seq[label] for _, label in chunk])))
    return out


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


def _assert_same(got, expected, where):
    assert len(got) == len(expected), where
    for (gx, gy, gs), (ex, ey, es) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(gs, es)
        np.testing.assert_array_equal(gx, ex)
        np.testing.assert_array_equal(gy, ey)


@pytest.mark.parametrize("layout,remainder,fraction",
                         list(itertools.product(LAYOUTS, ["keep", "drop"], [0.0, 0.25, 0.5])))
def test_cutter_matches_the_reference_for_any_chunking(layout, remainder, fraction,
                                                       monkeypatch):
    monkeypatch.setattr(examples, "CUT_RECORDS", 9)  # Batches too feeds many chunks
    window, split_by = layout
    rng = np.random.default_rng(zlib.crc32(repr((layout, remainder, fraction)).encode()))
    plan = _plan(window=window, split=split_by, remainder=remainder, eval_fraction=fraction)
    for n in (1, 7, 40, 333):
        x, y, seq = _records(n, rng)
        ends = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, 5), replace=False))
        cuts = [int(c) for c in np.diff(np.r_[0, ends, n]) if c]
        for split in ("train", "eval"):
            expected = _reference(plan, x, y, seq, split)
            streamed, _ = _stream(plan, split, x, y, seq, cuts)
            _assert_same(streamed, expected, (split, n, "streamed"))
            in_memory = list(Batches(plan, x, y, seq).batches(split))
            _assert_same(in_memory, expected, (split, n, "in memory"))


@pytest.mark.parametrize("layout,remainder", list(itertools.product(LAYOUTS, ["keep", "drop"])))
def test_in_memory_shuffles_match_the_reference(layout, remainder, monkeypatch):
    """examples: whole train examples permuted per epoch; records: the train records'
    features permuted before windows are cut (labels and seq stay); eval never moves."""
    monkeypatch.setattr(examples, "CUT_RECORDS", 9)
    window, split_by = layout
    x, y, seq = _records(120, np.random.default_rng(11))
    for epoch in (0, 1):
        rng = np.random.default_rng([7, epoch])  # the plan's seed, the epoch
        plan = _plan(window=window, split=split_by, remainder=remainder, shuffle="examples")
        expected = _reference(plan, x, y, seq, "train", order=rng.permutation)
        _assert_same(list(Batches(plan, x, y, seq).batches("train", epoch)), expected, epoch)
        plan = _plan(window=window, split=split_by, remainder=remainder, shuffle="records")
        train = [r for _, r in _reference_examples(_plan(split=split_by), seq, "train")]
        permuted = x.copy()
        permuted[train] = x[np.array(train)[np.random.default_rng([7, epoch]).permutation(
            len(train))]]
        _assert_same(list(Batches(plan, x, y, seq).batches("train", epoch)),
                     _reference(plan, permuted, y, seq, "train"), epoch)
        _assert_same(list(Batches(plan, x, y, seq).batches("eval", epoch)),
                     _reference(plan, x, y, seq, "eval"), epoch)


def test_cutter_hash_split_streams_without_lag():
    rng = np.random.default_rng(3)
    x, y, seq = _records(500, rng)
    plan = _plan(split="hash", eval_fraction=0.2)
    for split in ("train", "eval"):
        streamed, early = _stream(plan, split, x, y, seq, [50] * 10)
        assert np.concatenate([s for _, _, s in streamed]).tolist() \
            == [s for _, _, b in _reference(plan, x, y, seq, split) for s in b]
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

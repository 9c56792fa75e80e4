import numpy as np
import pyarrow as pa
import pytest

from seqline.pipeline.arrays import numbers
from seqline.pipeline.blocks import SEQ, Block, recut, seq_of, to_blocks, with_seq
from seqline.pipeline.errors import StageError
from seqline.pipeline.tasks import Counts, MapTask, check_order


def _block(seq, index=0):
    return Block(index, pa.record_batch({"x": np.asarray(seq) * 10, SEQ: np.asarray(seq)}))


def test_to_blocks_cuts_exact_sizes_and_numbers_seq_across_batches():
    spans = [(0, 3), (3, 7), (7, 7), (7, 12)]
    batches = [pa.record_batch({"x": np.arange(a, b)}) for a, b in spans]
    blocks = list(to_blocks(batches, 5))
    assert [len(b) for b in blocks] == [5, 5, 2]
    assert [b.index for b in blocks] == [0, 1, 2]
    assert np.concatenate([b.seq for b in blocks]).tolist() == list(range(12))
    assert np.concatenate([b.batch.column("x") for b in blocks]).tolist() == list(range(12))


@pytest.mark.parametrize("seed", range(20))
def test_recut_blocks_are_exact_and_copy_only_what_spans_batches(seed):
    """Random reader batches (some empty) cut into random block sizes: every block but the
    last exact, the records and their order unchanged; a block within one batch shares that
    batch's memory (a zero-copy slice), one spanning batches is a batch of its own."""
    rng = np.random.default_rng(seed)
    sizes, size = rng.integers(0, 40, rng.integers(1, 12)).tolist(), int(rng.integers(1, 25))
    starts = np.cumsum([0, *sizes]).tolist()
    batches = [pa.record_batch({"x": np.arange(a, a + n) * 3, SEQ: np.arange(a, a + n)})
               for a, n in zip(starts, sizes, strict=False)]
    blocks = list(recut(batches, size))
    total = sum(sizes)
    assert [len(b) for b in blocks] == [size] * (total // size) + ([total % size] if total %
                                                                   size else [])
    assert [b.index for b in blocks] == list(range(len(blocks)))
    assert np.concatenate([[], *(b.seq for b in blocks)]).tolist() == list(range(total))
    for block in blocks:
        first, last = int(block.seq[0]), int(block.seq[-1])
        home = next(i for i, a in enumerate(starts) if a <= first < a + sizes[i])
        address = block.batch.column("x").buffers()[1].address
        parent = batches[home].column("x").buffers()[1]
        within = parent.address <= address < parent.address + parent.size
        assert within == (last < starts[home] + sizes[home])


def test_to_blocks_of_nothing_is_no_block():
    assert list(to_blocks([], 4)) == []


def test_check_order_maps_output_rows_to_their_parents():
    block = _block([10, 11, 12, 13])
    out = _block([10, 10, 12]).batch
    assert check_order("s", block, out).tolist() == [0, 0, 2]


@pytest.mark.parametrize(("out", "message"), [
    ("not a batch", r"returned str, expected a pyarrow.RecordBatch"),
    (pa.record_batch({"x": [1]}), r"no '__seq__' column"),
    (_block([11, 10]).batch, r"reordered rows: seq 10 comes after 11"),
    (_block([10, 99]).batch, r"output seq 99 is not one of the block's input seq"),
    (_block([9]).batch, r"output seq 9 is not one of the block's input seq"),
])
def test_check_order_rejects_contract_breaks(out, message):
    with pytest.raises(StageError, match=message) as info:
        check_order("features", _block([10, 11, 12], index=3), out)
    assert info.value.stage == "features" and info.value.block == 3


def test_map_task_counts_filter_and_explode():
    def fn(batch):  # drop seq 1, triple seq 2
        return batch.take([0, 2, 2, 2])

    result = MapTask("s", fn)(_block([0, 1, 2]))
    assert result.counts == Counts(records_in=3, records_out=4, filtered=1, exploded=2)
    assert result.counts.balanced


def test_map_task_carries_a_worker_exception_to_the_driver_as_a_stage_error():
    def fn(batch):
        raise KeyError("temp")

    result = MapTask("features", fn)(_block([40, 41], index=7))
    with pytest.raises(StageError, match=r"stage 'features' failed on seq 40 \(block 7\)"
                       r": KeyError") as info:
        result.raise_if_failed()
    assert isinstance(info.value.__cause__, KeyError)
    assert (info.value.block, info.value.seq) == (7, 40)


def test_pickled_block_carries_its_rows_not_its_parent_buffers():
    """Blocks are zero-copy slices of a reader's batch; across processes only their rows go."""
    import pickle

    blocks = list(to_blocks([pa.record_batch({"x": np.arange(100_000)})], 1_000))
    data = pickle.dumps(blocks[7], protocol=5)
    assert len(data) < 3 * blocks[7].batch.nbytes  # the parent column alone is 800 KB
    assert pickle.loads(data).batch.equals(blocks[7].batch)


def test_pickled_result_round_trips_batch_and_failure():
    import pickle

    ok = MapTask("s", lambda b: b.slice(1))(_block([1, 2, 3], index=4))
    back = pickle.loads(pickle.dumps(ok))
    assert back.batch.equals(ok.batch) and back.counts == ok.counts and back.index == 4
    failed = MapTask("s", lambda b: 1 / 0)(_block([1]))
    with pytest.raises(StageError, match="ZeroDivisionError"):
        pickle.loads(pickle.dumps(failed)).raise_if_failed()


@pytest.mark.parametrize("kind", [pa.int8(), pa.int64(), pa.uint16(), pa.float32(),
                                  pa.float64()])
def test_numbers_reads_a_slice_of_a_plain_array_as_its_values(kind):
    whole = pa.array([3, 1, 4, 1, 5, 9, 2, 6], kind)
    part = whole.slice(2, 5)  # an offset into the buffer: the slice's values, not the head
    found = numbers(part)
    assert found.tolist() == [4, 1, 5, 9, 2] and found.dtype == kind.to_pandas_dtype()
    assert not found.flags.writeable  # a view of Arrow's buffer


@pytest.mark.parametrize("array", [pa.array([1.5, None, 2.0]), pa.array([3, None]),
                                   pa.array([True, False])])
def test_numbers_of_nulls_or_bits_is_arrows_own_conversion(array):
    assert np.array_equal(numbers(array), array.to_numpy(zero_copy_only=False), equal_nan=True)


def test_with_seq_then_seq_of_round_trip_and_replace_an_old_seq():
    batch = pa.record_batch({"x": [7, 8, 9]})
    numbered = with_seq(with_seq(batch, np.array([0, 1, 2])), np.array([10, 11, 12]))
    assert numbered.schema.names == ["x", SEQ]
    assert seq_of(numbered).tolist() == [10, 11, 12]
    assert seq_of(numbered.slice(1)).tolist() == [11, 12]

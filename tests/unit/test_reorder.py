import numpy as np
import pytest

from seqline.pipeline.errors import InternalError
from seqline.pipeline.reorder import ReorderBuffer


@pytest.mark.parametrize("seed", range(20))
def test_reorder_buffer_releases_in_index_order_whatever_the_arrival_order(seed):
    rng = np.random.default_rng(seed)
    capacity = int(rng.integers(1, 6))
    buffer = ReorderBuffer(capacity)
    released, in_flight = [], []
    for _ in range(200):
        if buffer.can_admit() and (not in_flight or rng.random() < 0.6):
            in_flight.append(buffer.admit())
        else:  # finish a random block in flight
            index = in_flight.pop(int(rng.integers(len(in_flight))))
            buffer.put(index, index)
            released += buffer.pop_ready()
        assert buffer.in_flight <= capacity
    for index in in_flight:
        buffer.put(index, index)
    released += buffer.pop_ready()
    assert released == list(range(len(released)))
    assert buffer.in_flight == 0


def test_reorder_buffer_missing_index_holds_everything_after_it():
    buffer = ReorderBuffer(3)
    for _ in range(3):
        buffer.admit()
    buffer.put(2, "c")
    buffer.put(1, "b")
    assert buffer.pop_ready() == []
    assert not buffer.can_admit()  # block 3 waits for block 0's release: the backpressure
    buffer.put(0, "a")
    assert buffer.pop_ready() == ["a", "b", "c"]
    assert buffer.can_admit()


def test_reorder_buffer_unordered_releases_on_arrival_with_the_same_bound():
    buffer = ReorderBuffer(2, ordered=False)
    buffer.admit(), buffer.admit()
    assert not buffer.can_admit()
    buffer.put(1, "b")
    assert buffer.pop_ready() == ["b"]
    assert buffer.can_admit()


@pytest.mark.parametrize("index", [0, 5])
def test_reorder_buffer_rejects_a_block_twice_or_never_admitted(index):
    buffer = ReorderBuffer(2)
    buffer.admit()
    buffer.put(0, "a")
    with pytest.raises(InternalError):
        buffer.put(index, "again")


def test_reorder_buffer_rejects_zero_capacity():
    with pytest.raises(InternalError):
        ReorderBuffer(0)

import numpy as np
import pytest

from seqline.pipeline.errors import InternalError
from seqline.pipeline.reorder import (
    MAX_BLOCKS_PER_WORKER,
    MAX_HELD_BYTES,
    AdaptiveWindow,
    ReorderBuffer,
)


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


def _straggling(window: AdaptiveWindow, held_bytes_each: int, finished: int) -> ReorderBuffer:
    """Block 0 never finishes; `finished` later blocks do, each after the window was asked."""
    buffer: ReorderBuffer[int] = ReorderBuffer(window.start)
    for _ in range(finished):
        while buffer.can_admit():
            buffer.admit()
        index = buffer.held + 1
        buffer.put(index, index)
        assert buffer.pop_ready() == []  # block 0 holds them back
        buffer.capacity = window.capacity(buffer, buffer.held * held_bytes_each)
    return buffer


def test_adaptive_window_keeps_start_blocks_unfinished_behind_a_straggler():
    buffer = _straggling(AdaptiveWindow(start=8, workers=2), held_bytes_each=1, finished=20)
    assert buffer.capacity == 8 + 20
    assert buffer.in_flight - buffer.held == 8 - 1  # block 0 and 7 more to run: none idle


def test_adaptive_window_stops_widening_at_its_block_and_byte_bounds():
    blocks = _straggling(AdaptiveWindow(start=8, workers=2), held_bytes_each=1, finished=63)
    assert blocks.capacity == MAX_BLOCKS_PER_WORKER * 2
    size = MAX_HELD_BYTES // 10
    memory = _straggling(AdaptiveWindow(start=8, workers=2), held_bytes_each=size, finished=12)
    assert memory.capacity == 8 + 10


def test_adaptive_window_narrows_back_once_the_line_moves():
    window = AdaptiveWindow(start=8, workers=2)
    buffer = _straggling(window, held_bytes_each=1, finished=20)
    buffer.put(0, 0)
    assert len(buffer.pop_ready()) == 21
    assert window.capacity(buffer, 0) == 8

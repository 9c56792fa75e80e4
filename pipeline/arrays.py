"""Arrow arrays to and from NumPy and bytes through their buffers, without pyarrow's pandas
probe: `pa.array`, `to_numpy` and Python fill values make pyarrow import pandas (0.3 s in every
process that runs a stage), and building from buffers is also several times faster."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["binaries", "binary_lengths", "empties", "int64s", "numbers"]


def numbers(array: pa.Array) -> np.ndarray:
    """A numeric Arrow array as NumPy: a read-only view of its values when it has no nulls.

    Example: numbers(pa.array([1, 2, 3]).slice(1)) -> array([2, 3]) (int64, read-only).
    """
    kind = "i" if pa.types.is_signed_integer(array.type) else \
        "u" if pa.types.is_unsigned_integer(array.type) else \
        "f" if pa.types.is_floating(array.type) else None
    if kind is None or array.null_count:  # bits (booleans), nulls: Arrow's own conversion
        return array.to_numpy(zero_copy_only=False)
    width = array.type.bit_width // 8
    found = np.frombuffer(array.buffers()[1], f"{kind}{width}", len(array), array.offset * width)
    found.flags.writeable = False  # Arrow's memory: a write would change the batch
    return found


def int64s(values: np.ndarray) -> pa.Array:
    """An int64 Arrow array over `values` (copied only if not already contiguous int64).

    Example: int64s(np.arange(3)) -> pa.array([0, 1, 2], pa.int64()).
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def binaries(items: list[bytes]) -> pa.BinaryArray:
    """A binary Arrow array of `items`, in order (large_binary past 2 GiB of bytes).

    Example: binaries([b"ab", b"", b"c"]) -> pa.array([b"ab", b"", b"c"], pa.binary()).
    """
    offsets = np.zeros(len(items) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, items), np.int64, len(items)), out=offsets[1:])
    data = pa.py_buffer(b"".join(items))
    if offsets[-1] < 2**31:  # binary's offsets are int32
        return pa.Array.from_buffers(pa.binary(), len(items),
                                     [None, pa.py_buffer(offsets.astype(np.int32)), data])
    return pa.Array.from_buffers(pa.large_binary(), len(items),
                                 [None, pa.py_buffer(offsets), data])


def binary_lengths(array: pa.BinaryArray) -> np.ndarray:
    """Each value's length in bytes, from the offsets (int64; a null counts 0).

    Example: binary_lengths(pa.array([b"ab", b"", b"c"])) -> array([2, 0, 1]).
    """
    width = 8 if pa.types.is_large_binary(array.type) else 4
    offsets = np.frombuffer(array.buffers()[1], f"i{width}", len(array) + 1,
                            array.offset * width)
    return np.diff(offsets).astype(np.int64)


def empties(n: int) -> pa.BinaryArray:
    """`n` empty byte strings: the separator of `pc.binary_join_element_wise` as an array
    (a Python `b""` is a fill value that pyarrow converts, importing pandas).

    Example: empties(2) -> pa.array([b"", b""], pa.binary()).
    """
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.zeros(n + 1, np.int32)),
                                                  pa.py_buffer(b"")])

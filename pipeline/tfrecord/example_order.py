"""Putting the features of serialized tf.train.Examples in name order, for all rows at once.

tfx-bsl's encoder writes each Example's feature map in protobuf's hash order, which changes
from call to call. The bytes of a record must not depend on the call (the same records give the
same shards on every runner), so the map entries of every row are re-ordered by feature name:
the entries are located with vectorized varint reads, one column position at a time, and
moved to their places with one Arrow take over the entries' spans. Each entry's own bytes are
left as they are.

Wire format (protobuf): Example = 0x0a varint(len) Features; Features = entries, each
0x0a varint(len) MapEntry; MapEntry = 0x0a varint(len) key, 0x12 varint(len) Feature.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["in_name_order"]

_TAG = 0x0A  # field 1, length-delimited: Example.features, Features.feature, MapEntry.key


def in_name_order(examples: pa.BinaryArray, names: list[str]) -> pa.BinaryArray | None:
    """`examples` (one entry per name in each) with every row's entries sorted by name.

    Returns None when the bytes are not laid out as expected (the caller then encodes column
    by column).
    """
    ordered = sorted(names)
    if len(examples) == 0 or not names:
        return None
    identify = _Identify(ordered)
    offsets = np.frombuffer(examples.buffers()[1], np.int32, len(examples) + 1,
                            examples.offset * 4).astype(np.int64)  # bytes: int32s
    data = np.frombuffer(examples.buffers()[2], np.uint8)
    n, c = len(examples), len(names)
    starts = np.empty((n, c + 1), np.int64)  # per row: the header, then each entry
    rank = np.empty((n, c + 1), np.int64)
    _, size = _varint(data, offsets[:-1] + 1)
    starts[:, 0], rank[:, 0] = offsets[:-1], -1
    pos = offsets[:-1] + 1 + size
    for k in range(1, c + 1):
        entry, size = _varint(data, pos + 1)
        key_length, key_size = _varint(data, pos + 1 + size + 1)
        key_at = pos + 1 + size + 1 + key_size
        rank[:, k] = identify(data, key_at, key_length)
        starts[:, k] = pos
        pos = pos + 1 + size + entry
    if (rank[:, 1:] < 0).any() or not np.array_equal(pos, offsets[1:]):
        return None  # not the layout expected: leave it to the column-by-column path
    if (rank == rank[0]).all():  # the usual case: one order for every row of the call
        flat = (np.arange(n)[:, None] * (c + 1) + np.argsort(rank[0], kind="stable")).ravel()
    else:
        flat = (np.argsort(rank, axis=1, kind="stable") + (np.arange(n) * (c + 1))[:, None]
                ).ravel()
    # Every row's header and entries, in stored order, are consecutive spans of the data:
    # as one binary array over the same buffer (no copy), Arrow's take moves each span once
    # to its place. Each row keeps its length, so the rows' offsets stay as they were.
    bounds = np.append(starts.ravel(), offsets[-1]).astype(np.int32)
    spans = pa.Array.from_buffers(pa.binary(), n * (c + 1),
                                  [None, pa.py_buffer(bounds), examples.buffers()[2]])
    moved = spans.take(pa.array(flat))
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
        (offsets - offsets[0]).astype(np.int32)), moved.buffers()[2]])


def _varint(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varint at each position: its value and its size in bytes (up to 5: lengths < 2^35)."""
    byte = data[at].astype(np.int64)
    value, size = byte & 0x7F, np.ones(len(at), np.int64)
    going = np.flatnonzero(byte >= 0x80)  # most lengths fit one byte: only these go on
    for k in range(1, 5):
        if not len(going):
            break
        byte = data[at[going] + k].astype(np.int64)
        value[going] |= (byte & 0x7F) << (7 * k)
        size[going] += 1
        going = going[byte >= 0x80]
    return value, size


class _Identify:
    """Tells each map key's rank from its length and a few bytes, chosen once per name set.

    Names of one length are told apart by the fewest byte positions at which they differ,
    so a row's key costs a length compare and one or two byte compares, not a string compare.
    """

    def __init__(self, names: list[str]) -> None:
        self.groups: list[tuple[int, list[int], list[tuple[int, bytes]]]] = []
        by_length: dict[int, list[tuple[int, bytes]]] = {}
        for rank, name in enumerate(names):
            raw = name.encode()
            by_length.setdefault(len(raw), []).append((rank, raw))
        for length, group in by_length.items():
            self.groups.append((length, _telling_positions([raw for _, raw in group]), group))

    def __call__(self, data: np.ndarray, at: np.ndarray, length: np.ndarray) -> np.ndarray:
        rank = np.full(len(at), -1, np.int64)
        for size, positions, group in self.groups:
            rows = np.flatnonzero(length == size)
            if not len(rows):
                continue
            found = [data[at[rows] + p] for p in positions]
            for r, raw in group:
                match = np.ones(len(rows), bool)
                for p, got in zip(positions, found, strict=True):
                    match &= got == raw[p]
                rank[rows[match]] = r
        return rank


def _telling_positions(names: list[bytes]) -> list[int]:
    """Byte positions whose values tell every name of one length apart (greedy, small)."""
    positions: list[int] = []
    while len({bytes(n[p] for p in positions) for n in names}) < len(names):
        positions.append(max((p for p in range(len(names[0])) if p not in positions),
                             key=lambda p: len({bytes(n[q] for q in [*positions, p])
                                                for n in names})))
    return positions

"""A stored shard's seq, read from its framing and the Examples' wire format, with no decoding.

`seqline verify` reads every shard of a run. Decoding whole tf.train.Examples to get one int64
feature cost 60 % of its time, and the record-by-record framing reader most of the rest. Here a
shard is inflated in one go, its records are found by one tight walk over the lengths, both
CRCs of every record are checked, and the `__seq__` feature is found in every row at once with
vectorized varint reads, one map entry position at a time (the layout example_order.py
documents). Anything that is not the layout seqline writes (a bad CRC, a truncated record, a
record that is not an Example, a seq feature missing, repeated or not one int64) gives None:
the caller then reads the shard the exact way (framing.iter_records and the C++ decoder), which
names the problem. So a shard this accepts is one that the exact reader accepts with the same
seq, and any shard it refuses costs one more read, never a different verdict.
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Iterator

import numpy as np

from seqline.pipeline.blocks import SEQ
from seqline.pipeline.tfrecord.framing import (
    _FOOTER,
    _HEADER,
    CorruptRecord,
    _at_any_offset,
    _bad_data_crcs,
    _bad_length_crcs,
    _decompressed,
    _walk,
)

__all__ = ["scan_seq"]

_KEY = SEQ.encode()
_KEY_WORDS = struct.unpack("<II", _KEY[:4] + _KEY[3:])
_EMBEDDED = 0x0A  # field 1, length-delimited: Example.features, Features.feature, MapEntry.key
_VALUE = 0x12  # field 2, length-delimited: MapEntry.value (the Feature)
_INT64_LIST = 0x1A  # field 3 of Feature (bytes_list is 0x0a, float_list 0x12)
_LIST_TAGS = (0x0A, 0x12, 0x1A)
_PACKED = 0x0A  # Int64List.value, packed (what every writer emits for a non-empty list)
# 10: the longest varint (a negative int64); lengths of a shard's parts fit far fewer bytes.
_VARINT_MAX = 10
# Bytes read at once from each record by the vouched scan: the Example's tag, its features'
# length (up to 4 bytes), a seq entry (17 bytes) and the seq (up to 10).
_WINDOW = 32


def scan_seq(data: bytes, compression: str, *, vouched: bool = False,
             framed: np.ndarray | None = None) -> np.ndarray | None:
    """The seq of every record of a shard's stored bytes, in order, or None (read it exactly).

    Args:
        data: the shard file's bytes as stored.
        compression: "gzip", "none" or "auto", as for `iter_records`.
        vouched: the bytes' SHA-256 matched the one their writer recorded: they are the
            bytes it framed, with the CRCs it computed over them, holding Examples as
            seqline's encoder writes them (features in key order, each once). The CRCs
            (integrity, which the SHA-256 proves) are then not computed again, and a seq that
            is every Example's first feature (`__seq__` sorts before lower-case names) is read
            there, without walking the map entries after it. Where the records start and end
            and the seq's own layout are still checked; anything else takes the full scan.
            (That the writer computes its CRCs as TensorFlow's does, golden bytes pin.)
        framed: each record's length as the writer framed it, if known: where the records
            start is then checked against the length fields at once, not found by a walk
            from one to the next (if the check fails, the walk runs).

    Returns:
        int64 seq per record; None when the bytes are not a well-formed shard of Examples in
        seqline's layout, each with one int64 `__seq__` (the exact reader then says why).

    Example: a shard of Examples with __seq__ 4, 5, 6 gives array([4, 5, 6]).
    """
    try:
        chunks = list(_decompressed(io.BytesIO(data), compression, copy=False))
        buffer = chunks[0] if len(chunks) == 1 else b"".join(chunks)  # one: as inflated
    except CorruptRecord:
        return None
    starts = _starts_as_framed(buffer, framed) if framed is not None else None
    if starts is None:
        starts, end = _walk(buffer)
        if end != len(buffer):  # a record cut short, or bytes after the last
            return None
    view = np.frombuffer(buffer, np.uint8)
    lengths = np.diff(starts, append=len(buffer)) - (_HEADER + _FOOTER)
    if vouched:
        seq = _seq_first(view, starts + _HEADER, lengths)
        if seq is not None:
            return seq
    elif len(_bad_length_crcs(buffer, starts, lengths)) \
            or len(_bad_data_crcs(buffer, starts, lengths)):
        return None
    return _seq_of_examples(view, starts + _HEADER, lengths)


def _starts_as_framed(buffer: bytes | bytearray, framed: np.ndarray) -> np.ndarray | None:
    """Where each record starts if the records have the `framed` lengths: as `_walk` finds
    them, checked in one pass (each record's length field says its length, and the
    last ends where the buffer does); None if they do not."""
    steps = framed.astype(np.int64) + (_HEADER + _FOOTER)
    if not len(steps) or steps.sum() != len(buffer):
        return None
    starts = np.concatenate(([0], np.cumsum(steps[:-1])))
    return starts if np.array_equal(_at_any_offset(buffer, "<u8")[starts], framed) else None


def _uint32s_at(buffer: bytes | bytearray | np.ndarray, at: np.ndarray) -> np.ndarray:
    """The little-endian uint32 at each byte offset `at` (each at least 4 bytes from the end)."""
    return _at_any_offset(buffer, "<u4")[at]


def _seq_of_examples(view: np.ndarray, at: np.ndarray, lengths: np.ndarray
                     ) -> np.ndarray | None:
    """The one int64 `__seq__` of each serialized Example at `at` (of `lengths` bytes)."""
    end = at + lengths
    features = _field(view, at, end, _EMBEDDED)
    if features is None or not np.array_equal(features[1], end):
        return None
    pos = features[0]
    seq_at = np.full(len(at), -1, np.int64)
    rows = np.flatnonzero(pos < end)
    while len(rows):  # one pass per map entry position: as many as the Examples have features
        entry_end = _map_entry(view, pos[rows], end[rows], seq_at, rows)
        if entry_end is None:
            return None
        pos[rows] = entry_end
        rows = rows[entry_end < end[rows]]
    if (seq_at < 0).any():
        return None
    return _one_int64(view, seq_at, end)


def _seq_first(view: np.ndarray, at: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """The `__seq__` of Examples whose first map entry is it, as seqline's encoder writes it;
    else None (the full scan decides).

    One read of `_WINDOW` bytes a record, no gather per field: the Example's tag and its
    features' length (spanning the record exactly), then the entry and the seq's varint
    compared as four words with what the encoder writes (`_entry_words`), then the seq.
    """
    n = len(at)
    if not n or at[-1] + _WINDOW > len(view):
        return None
    rows = _at_any_offset(view, f"V{_WINDOW}")[at].view(np.uint8).reshape(n, _WINDOW)
    words = rows.view("<u8")
    size = np.ones(n, np.int64)  # of the features' length: a varint of up to 4 bytes
    going = rows[:, 1] >= 0x80
    for k in range(2, 6):
        size += going
        going &= rows[:, k] >= 0x80
    if rows[:, 0].min() != _EMBEDDED or rows[:, 0].max() != _EMBEDDED or (size > 4).any():
        return None
    features = np.zeros(n, np.int64)
    for k in range(int(size.max())):
        features |= np.where(k < size, (rows[:, 1 + k] & 0x7F).astype(np.int64) << (7 * k), 0)
    if not np.array_equal(1 + size + features, lengths):
        return None
    seq = np.zeros(n, np.uint64)
    for offset, group in _groups(size + 1):  # where the entry starts: one value but in huge shards
        widths = rows[group, offset + 16]  # the seq's varint size, as the entry says
        for width, ones in _groups(widths, group):
            if not 1 <= width <= _VARINT_MAX or (17 + width > features[ones]).any():
                return None
            mask, expected = _entry_words(offset, width)
            if not ((words[ones] & mask) == expected).all():
                return None
            varint = rows[ones, offset + 17:offset + 17 + width] & 0x7F
            for k in range(width):
                seq[ones] |= varint[:, k].astype(np.uint64) << np.uint64(7 * k)
    return seq.view(np.int64)


def _groups(values: np.ndarray, rows: np.ndarray | slice = slice(None)
            ) -> Iterator[tuple[int, np.ndarray | slice]]:
    """Each value of `values` and its `rows` (all of them as a slice, the usual case)."""
    low, high = int(values.min()), int(values.max())
    if low == high:
        yield low, rows
        return
    for value in range(low, high + 1):
        found = np.flatnonzero(values == value)
        if len(found):
            yield value, found if isinstance(rows, slice) else rows[found]


@functools.cache
def _entry_words(offset: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Mask and value, as `_WINDOW // 8` words, of a `__seq__` entry at byte `offset` of a
    window, for a seq of `width` varint bytes: its 17 bytes, and the varint's continuation bits
    (set on every byte but the last). Each length fits one byte: the entry is 17 + width."""
    mask, value = np.zeros(_WINDOW, np.uint8), np.zeros(_WINDOW, np.uint8)
    entry = [_EMBEDDED, width + 15, _EMBEDDED, len(_KEY), *_KEY, _VALUE, width + 4, _INT64_LIST,
             width + 2, _PACKED, width]
    mask[offset:offset + 17], value[offset:offset + 17] = 0xFF, entry
    mask[offset + 17:offset + 17 + width] = 0x80
    value[offset + 17:offset + 16 + width] = 0x80
    return mask.view("<u8"), value.view("<u8")


def _map_entry(view: np.ndarray, at: np.ndarray, end: np.ndarray, seq_at: np.ndarray,
               rows: np.ndarray) -> np.ndarray | None:
    """Check the map entry at `at` in each of `rows`; note where a `__seq__` Feature starts.

    Returns where each entry ends, or None if one is not a key then a Feature spanning it.
    """
    entry = _field(view, at, end, _EMBEDDED)
    if entry is None:
        return None
    content, entry_end = entry
    key = _field(view, content, entry_end, _EMBEDDED)
    if key is None:
        return None
    feature = _field(view, key[1], entry_end, _VALUE)
    if feature is None or not np.array_equal(feature[1], entry_end) \
            or not _lists_span(view, feature[0], entry_end):
        return None
    is_seq = _is_key(view, key[0], key[1] - key[0])
    if (seq_at[rows[is_seq]] >= 0).any():
        return None  # a repeated key: the exact reader decides which one counts
    seq_at[rows[is_seq]] = feature[0][is_seq]
    return entry_end


def _field(view: np.ndarray, at: np.ndarray, end: np.ndarray, tag: int | None
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """The length-delimited field with `tag` at each `at`: where its payload starts and ends.

    None if a field has another tag (any tag goes if `tag` is None) or does not fit before
    `end`.
    """
    if not len(at):
        return at, at
    if int(at.max()) + 2 > len(view):
        return None
    # the tag and the first byte of the length, in one gather (the gathers are most of the
    # cost: one random read per row); a length byte read past `end` gives a stop past it
    pair = _at_any_offset(view, "<u2")[at].view(np.uint8).reshape(-1, 2)
    if tag is not None and (pair[:, 0] != tag).any():
        return None
    first = pair[:, 1].astype(np.int64)
    two = first >= 0x80
    if not two.any():  # the usual case: every length fits one byte
        payload = at + 2
        stop = payload + first
    elif not (at + 2 >= end).any() and (view[at + 2] < 0x80).all():  # an Example: two bytes
        second = view[at + 2].astype(np.int64)
        payload = at + 2 + two
        stop = payload + np.where(two, (first & 0x7F) | (second << 7), first)
    else:
        if (at + 1 >= end).any():
            return None
        length, size = _varint(view, at + 1, end)
        if size is None or (length >= 1 << 40).any():  # 2^40: beyond any record, int64-safe
            return None
        payload = at + 1 + size
        stop = payload + length.astype(np.int64)
    return None if (stop > end).any() else (payload, stop)


def _lists_span(view: np.ndarray, at: np.ndarray, end: np.ndarray) -> bool:
    """Each non-empty Feature is one bytes, float or int64 list spanning it exactly."""
    full = at < end
    at, end = at[full], end[full]
    tag = view[at]
    if not ((tag == _LIST_TAGS[0]) | (tag == _LIST_TAGS[1]) | (tag == _LIST_TAGS[2])).all():
        return False
    field = _field(view, at, end, None)
    return field is not None and np.array_equal(field[1], end)


def _is_key(view: np.ndarray, at: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Which keys (at `at`, of `length` bytes) are `__seq__`: its 7 bytes as two overlapping
    uint32 compares (bytes 0-3 and 3-6)."""
    match = length == len(_KEY)
    rows = np.flatnonzero(match)
    match[rows] = ((_uint32s_at(view, at[rows]) == _KEY_WORDS[0])
                   & (_uint32s_at(view, at[rows] + 3) == _KEY_WORDS[1]))
    return match


def _one_int64(view: np.ndarray, at: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """The value of each Feature at `at`: an int64_list of exactly one packed value."""
    int64_list = _field(view, at, end, _INT64_LIST)
    if int64_list is None:
        return None
    values = _field(view, *int64_list, _PACKED)
    if values is None or not np.array_equal(values[1], int64_list[1]):
        return None
    value, size = _varint(view, *values)
    if size is None or not np.array_equal(values[0] + size, values[1]):
        return None
    return value.view(np.int64)


def _varint(view: np.ndarray, at: np.ndarray, end: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray | None]:
    """The varint at each position, read before `end`: value (uint64) and size in bytes.

    The size is None if a varint runs past its `end` or is longer than ten bytes. While every
    varint goes on (a shard's seq all take 3 bytes past 16,384) whole arrays are used; only
    once some stop are the rest followed by index.
    """
    value = np.zeros(len(at), np.uint64)
    size = np.zeros(len(at), np.int64)
    going: np.ndarray | None = None  # None: every row still going
    if not len(at):
        return value, size
    for k in range(_VARINT_MAX):
        where, stop = (at + k, end) if going is None else (at[going] + k, end[going])
        if (where >= stop).any():
            return value, None
        byte = view[where]
        part = (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        if going is None:
            value |= part
            size += 1
            more = byte >= 0x80
            if more.all():
                continue
            going = np.flatnonzero(more)
        else:
            value[going] |= part
            size[going] += 1
            going = going[byte >= 0x80]
        if not len(going):
            return value, size
    return value, None

"""TFRecord framing: records with their lengths and masked CRC32C, written and read in NumPy.

Per record: uint64 length, masked CRC32C of the length, the bytes, masked CRC32C of the bytes.
Written here with NumPy rather than by `tf.io.TFRecordWriter`: the writer takes one Python call
per record and needs TensorFlow imported in every worker, while this frames a whole shard in a
few vectorized passes (measured 0.7 us/record against 1.5 us for TF's writer, byte-identical
output; tests/unit/test_tfrecords.py checks both against tf.data).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, overload

import google_crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seqline.pipeline.arrays import binaries, binary_lengths, empties
from seqline.pipeline.tfrecord.compression import inflate_member

__all__ = ["CorruptRecord", "Records", "frame", "iter_record_chunks", "iter_records"]

# 12 = 8 (length) + 4 (masked CRC of the length); a record ends with 4 more (CRC of the data).
_HEADER, _FOOTER = 12, 4
_MASK_DELTA = 0xA282EAD8  # TFRecord's CRC mask constant (tensorflow/core/lib/hash/crc32c.h)
_GZIP_MAGIC = b"\x1f\x8b"
# 8 MiB: decompress and parse this much at a time when reading, so a large input file is
# streamed in bounded memory while per-chunk overhead stays negligible.
_READ_CHUNK = 8 << 20


class CorruptRecord(ValueError):
    """A TFRecord file whose framing or checksums are wrong at a given record."""


@dataclass(frozen=True, eq=False)
class Records:
    """Whole, checked records where they lie in the bytes they were read in: record i is
    `buffer[starts[i]:starts[i] + lengths[i]]`. One object per chunk, none per record: the
    scalar decoder reads them in place. Indexed and iterated as a list of bytes would be."""

    buffer: bytes
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        """A record's bytes, or a list of them: a sequence of records, as a list would be."""
        if isinstance(index, slice):
            return Records(self.buffer, self.starts[index], self.lengths[index]).as_list()
        start = int(self.starts[index])
        return self.buffer[start:start + int(self.lengths[index])]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.as_list())

    def as_list(self, count: int | None = None) -> list[bytes]:
        """The records (the first `count`) as bytes, one object each."""
        starts, lengths = self.starts[:count], self.lengths[:count]
        return [self.buffer[a:b] for a, b in zip(starts.tolist(), (starts + lengths).tolist(),
                                                 strict=True)]

    @staticmethod
    def joined(chunks: list[Records]) -> Records:
        """The chunks of one stream as one (their records' bytes copied once if several)."""
        if len(chunks) == 1:
            return chunks[0]
        if not chunks:
            return Records(b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
        used = [int(c.starts[-1] + c.lengths[-1] + _FOOTER) for c in chunks]
        shifts = np.cumsum([0, *used[:-1]])
        return Records(b"".join(memoryview(c.buffer)[:n] for c, n in zip(chunks, used,
                                                                          strict=True)),
                       np.concatenate([c.starts + k for c, k in zip(chunks, shifts,
                                                                    strict=True)]),
                       np.concatenate([c.lengths for c in chunks]))


def _crc_table() -> np.ndarray:
    poly = 0x82F63B78  # CRC-32C (Castagnoli), reflected
    table = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table[i] = c
    return table


_CRC_TABLE = _crc_table()


def _masked(crc: np.ndarray) -> np.ndarray:
    crc = crc.astype(np.uint32)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)


def _length_crcs(lengths: np.ndarray) -> np.ndarray:
    """Masked CRC32C of each 8-byte length, all at once: a table step per byte, over rows.

    A shard's records are of similar size, so where the lengths span a narrow range each
    length of the range is computed once and looked up (a tenth of the time at 100k records).
    """
    if len(lengths) > 1024:
        low, high = int(lengths.min()), int(lengths.max())
        if high - low < len(lengths) // 4:
            return _length_crcs(np.arange(low, high + 1))[lengths - low]
    octets = lengths.astype("<u8").view(np.uint8).reshape(-1, 8)
    crc = np.full(len(lengths), 0xFFFFFFFF, np.uint32)
    for k in range(8):
        crc = _CRC_TABLE[(crc ^ octets[:, k]) & 0xFF] ^ (crc >> np.uint32(8))
    return _masked(crc ^ np.uint32(0xFFFFFFFF))


def _data_crcs(records: pa.BinaryArray | list[bytes]) -> np.ndarray:
    if isinstance(records, pa.Array):
        offsets = np.frombuffer(records.buffers()[1], np.int32, len(records) + 1,
                                records.offset * 4)
        data = (records.buffers()[2] or pa.py_buffer(b"")).to_pybytes()  # y# wants bytes
        return _data_crcs_at(data, offsets[:-1], offsets[1:])
    return _masked(np.fromiter(map(google_crc32c.value, records), np.uint32, len(records)))


def _data_crcs_at(buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The masked CRC32C of each record's bytes, `buffer[starts[i]:ends[i]]`."""
    # google_crc32c takes bytes only (no memoryview): one slice per record, one C call each
    slices = map(slice, starts.tolist(), ends.tolist())
    return _masked(np.fromiter(map(google_crc32c.value, map(buffer.__getitem__, slices)),
                               np.uint32, len(starts)))


def frame(records: pa.BinaryArray | list[bytes]) -> bytes:
    """Records in TFRecord framing, byte-identical to tf.io.TFRecordWriter's output."""
    if isinstance(records, list):
        records = binaries(records)
    n = len(records)
    lengths = binary_lengths(records)
    headers = np.empty((n, _HEADER), np.uint8)
    headers[:, :8] = lengths.astype("<u8").view(np.uint8).reshape(-1, 8)
    headers[:, 8:] = _length_crcs(lengths).astype("<u4").view(np.uint8).reshape(-1, 4)
    footers = _data_crcs(records).astype("<u4")
    framed = pc.binary_join_element_wise(
        _fixed_width(headers.ravel(), n, _HEADER), records,
        _fixed_width(footers.view(np.uint8), n, _FOOTER), empties(n))
    offsets = np.frombuffer(framed.buffers()[1], np.int32, n + 1, framed.offset * 4)
    return framed.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]] if n else b""


def _fixed_width(data: np.ndarray, n: int, width: int) -> pa.BinaryArray:
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(np.ascontiguousarray(data))])


def iter_records(stream: IO[bytes], name: str, compression: str = "auto"
                 ) -> Iterator[list[bytes]]:
    """Read a TFRecord stream as lists of records, a chunk at a time (iter_record_chunks)."""
    for chunk in iter_record_chunks(stream, name, compression):
        yield chunk.as_list()


def iter_record_chunks(stream: IO[bytes], name: str, compression: str = "auto"
                       ) -> Iterator[Records]:
    """Read a TFRecord stream a chunk of records at a time, checking every CRC.

    `compression` is "gzip", "none" or "auto" (gzip if the stream starts with gzip's magic).
    A gzip stream under 8 MiB that is one member (every shard seqline writes) is inflated at
    once by libdeflate; any other (several members, longer) is streamed with zlib.

    Raises:
        CorruptRecord: naming `name`, the record number and the byte offset.
    """
    chunks = _decompressed(stream, compression)
    buffer = b""
    offset = 0  # of buffer[0] in the uncompressed stream
    number = 0
    for chunk in chunks:
        buffer += chunk
        records, used = _split(buffer, name, offset, number)
        if len(records):
            yield records
        number += len(records)
        buffer, offset = buffer[used:], offset + used
    if buffer:
        raise CorruptRecord(f"{name}: truncated record {number} at byte {offset}: "
                            f"{len(buffer)} bytes left over after the last whole record. The "
                            "file was cut short or is not a TFRecord file.")


def _decompressed(stream: IO[bytes], compression: str, copy: bool = True
                  ) -> Iterator[bytes | bytearray]:
    first = stream.read(_READ_CHUNK)
    if compression == "none" or (compression == "auto" and not first.startswith(_GZIP_MAGIC)):
        while first:
            yield first
            first = stream.read(_READ_CHUNK)
        return
    if len(first) < _READ_CHUNK:
        # The whole stream, as a shard seqline wrote (one member, a few MB): libdeflate inflates
        # it at once, ~2x zlib's speed. Anything else is streamed with zlib below.
        whole = inflate_member(first, copy=copy)
        if whole is not None:
            yield whole
            return
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 16)
    data = first
    while data:
        try:
            yield inflate.decompress(data)
            while inflate.unused_data:  # concatenated gzip members
                rest, inflate = inflate.unused_data, zlib.decompressobj(zlib.MAX_WBITS | 16)
                yield inflate.decompress(rest)
        except zlib.error as exc:
            raise CorruptRecord(f"not a readable gzip stream: {exc}") from exc
        data = stream.read(_READ_CHUNK)


def _split(buffer: bytes, name: str, offset: int, number: int) -> tuple[Records, int]:
    """The whole records at the start of `buffer`, checked, and how many bytes they used."""
    starts, pos = _walk(buffer)
    lengths = np.diff(starts, append=pos) - (_HEADER + _FOOTER)
    bad = _bad_length_crcs(buffer, starts, lengths)
    if len(bad):
        i = int(bad[0])
        raise CorruptRecord(f"{name}: record {number + i} at byte {offset + starts[i]} has a "
                            "corrupt length (its CRC does not match). The file is damaged or "
                            "not a TFRecord file.")
    bad = _bad_data_crcs(buffer, starts, lengths)
    if len(bad):
        i = int(bad[0])
        raise CorruptRecord(f"{name}: record {number + i} at byte {offset + starts[i]} is "
                            "corrupt (its data CRC does not match). The file is damaged.")
    return Records(buffer, starts + _HEADER, lengths), pos


def _walk(buffer: bytes | bytearray) -> tuple[np.ndarray, int]:
    """Where each whole record at the start of `buffer` starts, and where the last one ends:
    one step a record along the length fields (each depends on the one before)."""
    starts: list[int] = []
    add, unpack = starts.append, struct.Struct("<Q").unpack_from
    pos, size = 0, len(buffer)
    while pos + _HEADER <= size:
        add(pos)
        pos += unpack(buffer, pos)[0] + _HEADER + _FOOTER
    if pos > size:  # the last one runs past the buffer: not a whole record (yet)
        pos = starts.pop()
    return np.array(starts, np.int64), pos


def _bad_length_crcs(buffer: bytes | bytearray, starts: np.ndarray, lengths: np.ndarray
                     ) -> np.ndarray:
    """The records whose length field's stored CRC is not its own."""
    return np.flatnonzero(_at_any_offset(buffer, "<u4")[starts + 8] != _length_crcs(lengths))


def _bad_data_crcs(buffer: bytes | bytearray, starts: np.ndarray, lengths: np.ndarray
                   ) -> np.ndarray:
    """The records whose data's stored CRC is not its own."""
    ends = starts + _HEADER + lengths
    stored = _at_any_offset(buffer, "<u4")[ends]
    # google_crc32c reads bytes only: bytes() is the buffer itself, or a copy of a bytearray
    return np.flatnonzero(stored != _data_crcs_at(bytes(buffer), starts + _HEADER, ends))


def _at_any_offset(buffer: bytes | bytearray | np.ndarray, dtype: str) -> np.ndarray:
    """The buffer as one `dtype` value starting at each of its bytes (a view, no copy)."""
    size = np.dtype(dtype).itemsize
    return np.ndarray((max(0, len(buffer) - size + 1),), dtype, buffer, strides=(1,))

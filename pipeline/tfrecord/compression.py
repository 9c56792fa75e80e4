"""GZIP shards compressed and inflated with libdeflate: the same bytes on every machine, fast.

libdeflate chooses its matches in portable C (SIMD only clears and rebases its tables, and
computes CRCs), so one version gives the same bytes on x86-64 and ARM64 alike; zlib-ng and
ISA-L choose by CPU features (docs/decisions/0051-deflate.md). The output is one ordinary gzip
member, which `tf.data.TFRecordDataset(path, "GZIP")` and every gzip reader open.
"""

from __future__ import annotations

import deflate

__all__ = ["DEFAULT_LEVEL", "MAX_LEVEL", "gzip_compress", "inflate_member"]

# libdeflate's levels: 0 stores, 1-9 trade speed for size as zlib's do, 10-12 search
# near-optimally (slow). 1: on the benchmark's shards 7x zlib 6's speed for 5.7% more bytes,
# the best trade-off measured (benchmarks/CODEC.md, decision 51).
DEFAULT_LEVEL = 1
MAX_LEVEL = 12
# 256 MiB: the most a stream is inflated to in one buffer; a larger one (or a gzip trailer
# that claims so) is left to the streaming reader, whose memory stays bounded.
_MAX_WHOLE = 256 << 20


def gzip_compress(data: bytes, level: int = DEFAULT_LEVEL) -> bytes:
    """`data` as one gzip member (mtime 0, no file name): equal input gives equal bytes.

    Args:
        data: the bytes to compress, here a whole shard's TFRecord framing.
        level: libdeflate's level, 0-12.

    Example: gzip.decompress(gzip_compress(b"abc")) == b"abc", and the header's mtime
    (bytes 4-7) is zero.
    """
    return bytes(deflate.gzip_compress(data, level))


def inflate_member(data: bytes, *, copy: bool = True) -> bytes | bytearray | None:
    """A whole stream that is one gzip member, inflated at once; None if it is not that.
    Not `copy`: the bytearray libdeflate wrote (a reader that only scans it saves a copy).

    None (read it with a streaming reader, which says what is wrong) for anything else:
    damaged data, several members (`cat a.gz b.gz`), trailing bytes, or more than 256 MiB.
    libdeflate checks the member's own CRC and size; the size in the stream's last four
    bytes must also match, so a member that ends before the data does is not taken whole.
    """
    if len(data) < 18:  # 10 (header) + 8 (trailer)
        return None
    size = int.from_bytes(data[-4:], "little")
    if size > _MAX_WHOLE:
        return None
    try:
        out = deflate.gzip_decompress(data, size) if size else deflate.gzip_decompress(data, 1)
    except (deflate.DeflateError, ValueError):
        return None
    if len(out) != size:
        return None
    return bytes(out) if copy else out

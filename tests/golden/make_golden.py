"""The recipe for tiny.tfrecord (three records through seqline's Example encoder and framing)
and shard.tfrecord.gz (400 records as the shard sink compresses them, at the default level).

Run `python tests/golden/make_golden.py` to rewrite the files; only do that when the stored
format is meant to change, since every artifact written before would then differ. The gzip
file pins the deflate implementation's output: a new libdeflate (a new `deflate` pin in
constraints.txt) that compresses differently fails its test, and rewriting it says in the
commit that shards written from then on differ in bytes (not in records) from those before.
"""

from pathlib import Path

import pyarrow as pa

from seqline.pipeline import tfrecord
from seqline.pipeline.tfrecord.compression import DEFAULT_LEVEL, gzip_compress

GOLDEN = Path(__file__).with_name("tiny.tfrecord")
GOLDEN_GZIP = Path(__file__).with_name("shard.tfrecord.gz")
WORDS = ["rain", "sun", "fog", "snow"]


def tiny_batch() -> pa.RecordBatch:
    return pa.record_batch({
        "temp": pa.array([12.8, None, -3.5], pa.float64()),
        "day": pa.array([1, 2, 3], pa.int32()),
        "weather": pa.array(["rain", "sun", None]),
        "tags": pa.array([[1, 2], [], None], pa.list_(pa.int64())),
        "__seq__": pa.array([0, 1, 2], pa.int64()),
    })


def golden_bytes() -> bytes:
    return tfrecord.frame(tfrecord.encode(tfrecord.normalize(tiny_batch())))


def shard_batch(rows: int = 400) -> pa.RecordBatch:
    """Records shaped like the benchmark's (an int, a float, a word), from arithmetic alone."""
    i = pa.array(range(rows), pa.int64())
    return pa.record_batch({"k": i, "x": pa.array([(n * 37 % 1000) / 8 for n in range(rows)]),
                            "s": pa.array([WORDS[n * 7 % 4] for n in range(rows)]),
                            "__seq__": i})


def golden_gzip_bytes() -> bytes:
    return gzip_compress(tfrecord.frame(tfrecord.encode(tfrecord.normalize(shard_batch()))),
                         DEFAULT_LEVEL)


if __name__ == "__main__":
    GOLDEN.write_bytes(golden_bytes())
    GOLDEN_GZIP.write_bytes(golden_gzip_bytes())
    for path in (GOLDEN, GOLDEN_GZIP):
        print(f"wrote {path} ({path.stat().st_size} bytes)")

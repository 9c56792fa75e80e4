"""The recipe for tiny.tfrecord: three records through seqline's Example encoder and framing.

Run `python tests/golden/make_golden.py` to rewrite the file; only do that when the stored
format is meant to change, since every artifact written before would then differ.
"""

from pathlib import Path

import pyarrow as pa

from seqline.pipeline import tfrecord

GOLDEN = Path(__file__).with_name("tiny.tfrecord")


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


if __name__ == "__main__":
    GOLDEN.write_bytes(golden_bytes())
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")

"""A user function that is slow on one block only: head-of-line blocking on purpose.

Loaded the way users' functions are (`module:function` from a folder), so every runner's
workers import it for real.
"""

import time

import pyarrow as pa
import pyarrow.compute as pc

SEQ = "__seq__"


def sleep_at(batch: pa.RecordBatch, seq: int = 100, seconds: float = 4.0,
             base_ms: float = 20.0) -> pa.RecordBatch:
    """Sleep `seconds` on the block holding `seq`, `base_ms` on every other block: the blocks
    after the slow one finish first and wait in the reorder buffer for it.

    Example: blocks of 10 records, seq=100 -> block 10 takes 4 s, blocks 11, 12, … 20 ms.
    """
    slow = pc.any(pc.equal(batch.column(SEQ), seq)).as_py()
    time.sleep(seconds if slow else base_ms / 1000)
    return batch.append_column("y", pc.multiply(batch.column("x"), 2))

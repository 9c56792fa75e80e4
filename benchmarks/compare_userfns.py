"""The user functions of benchmarks/compare.py, copied into each job's folder as `features.py`.

Every side of a comparison runs the same arithmetic: seqline and Ray Data call
`add_features` (vectorized, pyarrow), Beam calls `add_features_row` (the per-row
equivalent), tf.data runs the same four columns in TF ops (compare_peers.py), and the
single-process limit calls `add_features` too. `burn` is the CPU-bound function of the
scaling comparison: a fixed amount of NumPy work per block (16-31 ms of CPU on the
2-core benchmark machine, whose speed varies between runs).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# The generated CSV's columns and their Python types (Beam's per-line parse uses them).
CSV_COLUMNS = {"id": int, "a": float, "b": float, "c": int, "name": str}
BURN_ITERATIONS = 1000  # x = sin(x) + 1 over 2,000 floats: 16-31 us each


def add_features(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """a*b, log1p(c), a-b and c % 7 as new columns; every input column (`__seq__` too) kept.

    Takes a RecordBatch (seqline, the single-process limit) or a Table (Ray Data's pyarrow
    batches) and returns the same kind.
    """
    a, b, c = batch.column("a"), batch.column("b"), batch.column("c")
    c_np = c.to_numpy()
    return (batch
            .append_column("ab", pc.multiply(a, b))
            .append_column("log_c", pa.array(np.log1p(c_np.astype(np.float64))))
            .append_column("a_minus_b", pc.subtract(a, b))
            .append_column("c_mod_7", pa.array(c_np % 7)))


def add_features_row(row: dict) -> dict:
    """The same four columns for one row (Beam's per-element function)."""
    a, b, c = row["a"], row["b"], row["c"]
    return {**row, "ab": a * b, "log_c": math.log1p(c), "a_minus_b": a - b, "c_mod_7": c % 7}


def burn(batch: pa.RecordBatch) -> pa.RecordBatch:
    """CPU-bound: a fixed number of NumPy passes over a block-sized array, then one column."""
    x = np.arange(2_000, dtype=np.float64)
    for _ in range(BURN_ITERATIONS):
        x = np.sin(x) + 1.0
    return batch.append_column("burned", pa.array(np.full(batch.num_rows, float(x[0]))))

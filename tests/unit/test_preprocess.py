"""The batch formats of preprocess, on tiny in-memory blocks with user functions from a folder."""

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from seqline.components import preprocess
from seqline.pipeline.blocks import SEQ, Block
from seqline.pipeline.specs import StageSpec

FNS = '''
import numpy as np
def arrow_keep_odd(batch):
    return batch.filter(np.asarray(batch.column("x")) % 2 == 1)
def numpy_square(cols):
    return {**cols, "y": cols["x"] ** 2}
def pandas_add(df, k=1):
    return df.assign(y=df["x"] + k)
def record_explode(row):
    if row["x"] == 0:
        return None
    return [{"x": row["x"], "part": i} for i in range(row["x"])]
'''


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "fns.py").write_text(FNS)
    return tmp_path


def _run(folder, fn, batch_format, **kwargs):
    stage = StageSpec("p", "preprocess", {"fn": fn, "batch_format": batch_format,
                                          "fn_kwargs": kwargs})
    block = Block(0, pa.record_batch({"x": np.arange(4), SEQ: np.arange(100, 104)}))
    result = dataclasses.replace(preprocess.make_task(stage, folder, folder), sink=None)(block)
    result.raise_if_failed()
    return result


def test_preprocess_pyarrow_filter_keeps_order(folder):
    result = _run(folder, "fns:arrow_keep_odd", "pyarrow")
    assert result.batch.column(SEQ).to_pylist() == [101, 103]
    assert result.counts.filtered == 2


def test_preprocess_numpy_dict(folder):
    assert _run(folder, "fns:numpy_square", "numpy").batch.column("y").to_pylist() == [0, 1, 4, 9]


def test_preprocess_pandas_with_fn_kwargs(folder):
    result = _run(folder, "fns:pandas_add", "pandas", k=10)
    assert result.batch.column("y").to_pylist() == [10, 11, 12, 13]


def test_preprocess_record_filter_and_explode_inherit_the_parent_seq(folder):
    result = _run(folder, "fns:record_explode", "record")
    assert result.batch.column(SEQ).to_pylist() == [101, 102, 102, 103, 103, 103]
    assert result.batch.column("part").to_pylist() == [0, 0, 1, 0, 1, 2]
    assert (result.counts.filtered, result.counts.exploded) == (1, 3)
    assert result.counts.balanced

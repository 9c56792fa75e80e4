"""The batch formats of preprocess, on tiny in-memory blocks with user functions from a folder."""

import dataclasses
import json

import numpy as np
import pyarrow as pa
import pytest

from seqline.components import preprocess
from seqline.components import stage as new_stage
from seqline.pipeline.blocks import SEQ, Block
from seqline.pipeline.deadletters import DeadLetter, ErrorBudget
from seqline.pipeline.errors import StageError
from seqline.pipeline.tasks import Counts

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
    stage = new_stage("p", "preprocess", {"fn": fn, "batch_format": batch_format,
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


FAILING = '''
import numpy as np
import pyarrow as pa
def fails_on(batch, bad=()):
    if any(s in bad for s in batch.column("__seq__").to_pylist()):
        raise ValueError("cannot take this row")
    return batch.append_column("y", pa.array(np.asarray(batch.column("x")) * 2))
def fails_always(batch):
    raise KeyError("no_such_column")
'''


def _failing_task(folder, fn, errors, **kwargs):
    (folder / "failing.py").write_text(FAILING)
    stage = new_stage("p", "preprocess", {"fn": f"failing:{fn}", "fn_kwargs": kwargs},
                      errors=errors)
    return dataclasses.replace(preprocess.make_task(stage, folder, folder), sink=None)


def _block(n=16):
    return Block(3, pa.record_batch({"x": np.arange(n), SEQ: np.arange(200, 200 + n)}))


def test_preprocess_failing_row_without_budget_fails_naming_its_seq(tmp_path):
    result = _failing_task(tmp_path, "fails_on", None, bad=[207, 211])(_block())
    with pytest.raises(StageError, match=r"failed on seq 207 \(block 3\): ValueError: cannot") \
            as info:
        result.raise_if_failed()
    assert info.value.seq == 207
    assert isinstance(info.value.__cause__, ValueError)


def test_preprocess_failing_rows_with_budget_become_dead_letters(tmp_path):
    budget = ErrorBudget(max_fraction=0.5)
    result = _failing_task(tmp_path, "fails_on", budget, bad=[207, 211])(_block())
    result.raise_if_failed()
    assert result.batch.column(SEQ).to_pylist() == [s for s in range(200, 216)
                                                    if s not in (207, 211)]
    assert result.batch.column("y").to_pylist()[:3] == [0, 2, 4]
    assert [(d.seq, d.reason, json.loads(d.raw)) for d in result.dead_letters] == [
        (207, "ValueError: cannot take this row", {"x": 7}),
        (211, "ValueError: cannot take this row", {"x": 11})]
    assert result.counts == Counts(records_in=16, records_out=14, dead_lettered=2)


def test_preprocess_dead_letters_keep_a_float32_as_written(tmp_path):
    """A float32 column's value in a dead letter's raw row is the number as written (50.7),
    not its widening to a double (50.70000076293945)."""
    block = Block(0, pa.record_batch({"x": pa.array([50.7, 1.1, 2.5], pa.float32()),
                                      SEQ: np.arange(3)}))
    result = _failing_task(tmp_path, "fails_on", ErrorBudget(max_fraction=0.5), bad=[0])(block)
    assert [json.loads(d.raw) for d in result.dead_letters] == [{"x": 50.7}]


def test_preprocess_function_failing_everywhere_fails_instead_of_dead_lettering(tmp_path):
    result = _failing_task(tmp_path, "fails_always", ErrorBudget(max_fraction=1.0))(_block())
    with pytest.raises(StageError, match=r"failed on block 3 \(first seq 200\): KeyError"):
        result.raise_if_failed()


def test_error_budget_fraction_and_count():
    budget = ErrorBudget(max_fraction=0.01, max_records=20)
    budget.check_final("p", 10, 1000, None)
    with pytest.raises(StageError, match=r"11 of 1,000 records were bad \(1.10%\), more than "
                                         r"max_fraction 0.01"):
        budget.check_final("p", 11, 1000, None)
    with pytest.raises(StageError, match=r"21 bad records so far, more than max_records 20"):
        budget.check_running("p", 21, None)


def test_error_budget_limits_apply_only_when_given():
    """`max_records` alone allows that many whatever the input's size (it was also held to a
    max_fraction of 0 nobody gave); `errors: {}` allows none, and says so."""
    by_count = ErrorBudget(max_records=3)
    by_count.check_running("p", 3, None)
    by_count.check_final("p", 3, 1000, None)
    with pytest.raises(StageError, match=r"4 bad records so far, more than max_records 3"):
        by_count.check_running("p", 4, None)
    first = DeadLetter(101, "CSV column #2: invalid value 'warm'", "in.csv", 103)
    with pytest.raises(StageError) as raised:
        ErrorBudget().check_final("p", 2, 1000, first)
    assert str(raised.value) == (
        "stage 'p' exceeded its error budget: 2 of 1,000 records were bad (0.20%), and "
        "`errors: {}` allows none (give it max_fraction or max_records). The first: in.csv, "
        "line 103, seq 101: CSV column #2: invalid value 'warm'. Fix the input, or raise "
        "`errors:` in the pipeline file if these records may be set aside.")

"""Checks before work, as a table: a pipeline and its user function -> the error the plan
raises before any stage runs, or none. Real components, real files, a real function; nothing
runs but the first block's read and the function on a sample of it."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.api import run_options
from seqline.orchestration.plan import plan_run
from seqline.orchestration.preflight import SAMPLE_ROWS, check_before_work
from seqline.pipeline.config import parse_pipeline
from seqline.pipeline.errors import ConfigError

ROWS = "\n".join(f"{d},{'north' if d % 2 else 'south'},{10 + d / 10},{60 + d % 7}"
                 for d in range(300))
FUNCTIONS = '''
import pyarrow as pa
import pyarrow.compute as pc

def add_dew(batch):
    dew = pc.subtract(batch.column("temperature"), 2.0)
    return batch.append_column("dew_point", dew)

def drop_humidity(batch):
    return batch.drop_columns(["humidity"])

def fails_on_every_row(batch):
    raise ValueError("bad row")

def empty_flag(record):
    return {**record, "flag": None}

def calls(batch):
    import pathlib
    pathlib.Path("calls").open("a").write(f"{batch.num_rows}\\n")
    return batch
'''


def _pipeline(tmp_path: Path, fn: str, batching: str, evaluate: str = "{}") -> str:
    return textwrap.dedent(f"""\
        name: checks
        stages:
          - {{name: read, component: ingest, params: {{format: csv, paths: [in.csv]}}}}
          - {{name: examples, component: tfrecord_write}}
          - {{name: features, component: preprocess, params: {fn}}}
          - {{name: batches, component: batching, params: {batching}}}
          - {{name: model, component: train, params: {{model: tabular_regression}}}}
          - {{name: evaluation, component: evaluate, params: {evaluate}}}
        """)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "in.csv").write_text("day,site,temperature,humidity\n" + ROWS + "\n")
    (tmp_path / "fns.py").write_text(FUNCTIONS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _plan(folder: Path, fn: str, batching: str, evaluate: str = "{}"):
    spec = parse_pipeline(_pipeline(folder, fn, batching, evaluate), folder, COMPONENTS,
                          source="p.yaml")
    return spec, plan_run(spec, run_options(spec), COMPONENTS, run_id="r1",
                          root=folder / "root", store=None)


ADD = "{fn: 'fns:add_dew'}"
CASES = [
    ("a feature the function adds", ADD,
     "{batch_size: 4, label: temperature, features: [dew_point, humidity]}", "{}", None),
    ("a misspelt feature", ADD,
     "{batch_size: 4, label: temperature, features: [temprature]}", "{}",
     "stage 'batches' (line 6 of the pipeline file): "
     "feature 'temprature' is not in the records of 'features'; "
     "Did you mean 'temperature'?"),
    ("a misspelt label", ADD, "{batch_size: 4, label: temperatur}", "{}",
     "label column 'temperatur' is not in the records of 'features'; Did you mean"),
    ("a feature the function drops", "{fn: 'fns:drop_humidity'}",
     "{batch_size: 4, label: temperature, features: [humidity]}", "{}",
     "feature 'humidity' is not in the records of 'features'"),
    ("a text feature", ADD, "{batch_size: 4, label: temperature, features: [site]}", "{}",
     "feature 'site' is string, not a number"),
    ("a misspelt slice, found before training", ADD,
     "{batch_size: 4, label: temperature}", "{slices: [sitee]}",
     "stage 'evaluation' (line 8 of the pipeline file): "
     "slice column 'sitee' is not in the records; "
     "Did you mean 'site'?"),
    ("a function failing on the sample: the run's error policy decides",
     "{fn: 'fns:fails_on_every_row'}", "{batch_size: 4, label: nothing_checked}", "{}", None),
    ("a column of nulls in the sample is not judged yet",
     "{fn: 'fns:empty_flag', batch_format: record}",
     "{batch_size: 4, label: temperature, features: [flag]}", "{}", None),
]


@pytest.mark.parametrize(("fn", "batching", "evaluate", "error"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_plan_checks_each_stage_against_a_sample(folder, fn, batching, evaluate, error):
    if error is None:
        _plan(folder, fn, batching, evaluate)
    else:
        with pytest.raises(ConfigError) as raised:
            _plan(folder, fn, batching, evaluate)
        assert error in str(raised.value)
        assert "\n" not in str(raised.value)
    assert not (folder / "root").exists()  # nothing written


def test_the_function_sees_a_sample_once(folder):
    _plan(folder, "{fn: 'fns:calls'}", "{batch_size: 4, label: temperature}")
    assert (folder / "calls").read_text().split() == [str(SAMPLE_ROWS)]


def test_nothing_is_checked_when_nothing_runs(folder):
    spec, plan = _plan(folder, "{fn: 'fns:calls'}", "{batch_size: 4, label: temperature}")
    (folder / "calls").unlink()
    reused = [replace(step, action="reuse") for step in plan.steps]
    bad = parse_pipeline(_pipeline(folder, "{fn: 'fns:calls'}",
                                   "{batch_size: 4, label: nowhere}"), folder, COMPONENTS)
    check_before_work(bad, reused, COMPONENTS)  # every stage reused: no sample is made
    assert not (folder / "calls").exists()
    with pytest.raises(ConfigError, match="label column 'nowhere'"):
        check_before_work(bad, plan.steps, COMPONENTS)


def test_a_pipeline_without_checks_calls_no_function_early(folder):
    spec = parse_pipeline("name: p\nstages:\n"
                          "  - {name: read, component: ingest, params: {format: csv, "
                          "paths: [in.csv]}}\n"
                          "  - {name: features, component: preprocess, "
                          "params: {fn: 'fns:calls'}}\n", folder, COMPONENTS)
    plan_run(spec, run_options(spec), COMPONENTS, run_id="r1", root=folder / "root",
             store=None)
    assert not (folder / "calls").exists()

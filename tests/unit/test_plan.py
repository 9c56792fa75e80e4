"""The run plan, as tables: pipeline shape and options -> each stage's connections; store
state and changes -> what each stage does and why. Nothing runs."""

from __future__ import annotations

import pytest

from seqline.components import COMPONENTS
from seqline.orchestration.cache import NOT_IN_FOLDER
from seqline.orchestration.key_changes import changes as _changes
from seqline.orchestration.plan import Step, connections, runnable_committed
from seqline.pipeline.config import parse_pipeline

READ = "  - {name: read, component: ingest, params: {format: csv, paths: [in.csv]}}\n"
WRITE = "  - {name: write, component: tfrecord_write}\n"
PRE = "  - {name: pre, component: preprocess, params: {fn: 'fns:f'}}\n"
PRE_OF_WRITE = ("  - {name: again, component: preprocess, inputs: write, "
                "params: {fn: 'fns:f'}}\n")
BATCH = "  - {name: batches, component: batching, params: {batch_size: 2, label: x}}\n"
TRAIN = "  - {name: model, component: train, params: {model: tabular_regression}}\n"
EVAL = "  - {name: evaluation, component: evaluate}\n"


KINDS = {"read": "source", "write": "map", "pre": "map", "again": "map", "batches": "driver",
         "model": "driver", "evaluation": "driver"}
COMPONENT = {"read": "ingest", "write": "tfrecord_write", "pre": "preprocess",
             "again": "preprocess", "batches": "batching", "model": "train",
             "evaluation": "evaluate"}


def W(stage, source, takes, reused=False, **kw):  # noqa: N802 - reads as a table row
    return Step(stage, COMPONENT[stage], KINDS[stage], "reuse" if reused else "run", "",
                source, takes, **kw)


CASES = [
    ("the demo as a line", [READ, WRITE, PRE, BATCH, TRAIN, EVAL], {}, [
        W("read", None, "files", gives_belt=True),
        W("write", "read", "belt", gives_belt=True),
        W("pre", "write", "belt", gives_belt=True),
        W("batches", "pre", "belt"),
        W("model", "batches", "artifacts", follows_line=True),
        W("evaluation", "model", "artifacts", waits_for_all=True),
    ]),
    ("one by one: ingest still streams, the rest wait for the stage before", [
        READ, WRITE, PRE, BATCH, TRAIN], {"overlap": False}, [
        W("read", None, "files", gives_belt=True),
        W("write", "read", "belt"),
        W("pre", "write", "feed", after="write"),
        W("batches", "pre", "feed", after="pre"),
        W("model", "batches", "artifacts", after="batches", follows_line=True),
    ]),
    ("a stage reading a non-adjacent stage follows its feed", [
        READ, WRITE, PRE, PRE_OF_WRITE], {}, [
        W("read", None, "files", gives_belt=True),
        W("write", "read", "belt", gives_belt=True),
        W("pre", "write", "belt"),
        W("again", "write", "feed"),
    ]),
    ("resumed: committed stages only report, the next reads their feed", [
        READ, WRITE, PRE, BATCH], {"committed": {"read", "write"}}, [
        W("read", None, "artifacts", reused=True),
        W("write", "read", "artifacts", reused=True),
        W("pre", "write", "feed", gives_belt=True),
        W("batches", "pre", "belt"),
    ]),
]


@pytest.mark.parametrize(("stages", "options", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_wire_connects_each_stage(tmp_path, stages, options, expected):
    (tmp_path / "in.csv").write_text("x\n1\n2\n")
    (tmp_path / "fns.py").write_text("def f(batch):\n    return batch\n")
    spec = parse_pipeline("name: t\nstages:\n" + "".join(stages), tmp_path, COMPONENTS)
    assert connections(spec, COMPONENTS, **options) == expected


def test_a_committed_stream_stage_reruns_when_its_reader_does(tmp_path):
    (tmp_path / "in.csv").write_text("x\n1\n")
    (tmp_path / "fns.py").write_text("def f(batch):\n    return batch\n")
    spec = parse_pipeline("name: t\nstages:\n" + READ + WRITE + PRE, tmp_path, COMPONENTS)
    assert runnable_committed(spec, COMPONENTS, {"read"}) == set()
    assert runnable_committed(spec, COMPONENTS, {"read", "write"}) == {"read", "write"}


def _parts(**changed):
    parts = {"component": "preprocess", "version": "1", "params": {"fn": "fns:f",
             "window": {"length": 14}}, "errors": None, "seqline": "0.1.0",
             "code": {"fns": "a" * 32, "numpy": NOT_IN_FOLDER},
             "reads": {"stage": "write", "key": "k"}, "depends_on": None}
    return {**parts, **changed}


@pytest.mark.parametrize(("changed", "said"), [
    ({"params": {"fn": "fns:f", "window": {"length": 21}}},
     ["params changed (window.length 14 → 21)"]),
    ({"code": {"fns": "b" * 32, "numpy": NOT_IN_FOLDER}}, ["function source changed (fns.py)"]),
    ({"code": {"fns": "a" * 32, "numpy": NOT_IN_FOLDER, "pyarrow.compute": NOT_IN_FOLDER}},
     []),  # an installed module newly imported: told by the folder's module that imports it
    ({"reads": {"files": {"/d/in.csv": "x"}}}, ["input changed (in.csv)"]),
    ({"errors": {"max_fraction": 0.5}}, ["error budget changed"]),
    ({"depends_on": {"mae": 2.9}}, ["the artifacts it compares with changed"]),
    ({"version": "2"}, ["component version changed (1 → 2)"]),
    ({"seqline": "0.2.0"}, ["seqline changed (0.1.0 → 0.2.0)"]),
    ({"reads": {"stage": "write", "key": "other"}}, []),  # upstream: the plan says it runs
], ids=["params", "code", "installed module", "input", "errors", "depends_on", "version",
        "seqline", "upstream key"])
def test_changes_name_each_part_of_a_cache_key(changed, said):
    old = _parts(reads={"files": {"/d/in.csv": "w"}}) if "reads" in changed and \
        "files" in changed["reads"] else _parts()
    assert _changes(old, _parts(**changed)) == said

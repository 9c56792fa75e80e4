"""Pipeline files: valid ones load; each kind of bad one gets its own clear ConfigError."""

from pathlib import Path

import pytest

from seqline.components import COMPONENTS
from seqline.pipeline.config import load_pipeline, parse_pipeline
from seqline.pipeline.errors import ConfigError

GOOD = """\
name: t
stages:
  - name: read
    component: ingest
    params: {format: csv, paths: ["in.csv"]}
  - name: features
    component: preprocess
    params: {fn: "fns:f"}
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x\n1\n")
    (tmp_path / "fns.py").write_text("def f(batch):\n    return batch\n")
    return tmp_path


def test_load_pipeline_reads_stages_in_order(folder):
    (folder / "p.yaml").write_text(GOOD)
    spec = load_pipeline(folder / "p.yaml", COMPONENTS)
    assert [s.name for s in spec.stages] == ["read", "features"]
    assert spec.stages[1].line == 6 and spec.base_dir == folder


BAD = [
    ("stages: [\n  {name: a,\n", r"malformed YAML at line 3"),
    ("name: t\n", r"p.yaml, key stages: a required key is missing"),
    (GOOD.replace("component: preprocess", "component: preproces"),
     r"unknown component 'preproces'. Did you mean 'preprocess'\?"),
    (GOOD.replace("in.csv", "missing.csv"), r"input file 'missing.csv' not found"),
    (GOOD.replace("name: features", "name: read"), r"duplicate stage name 'read'.*line 6"),
    (GOOD.replace("fns:f", "fns:g"), r"has no function 'g'"),
    (GOOD.replace("fns:f", "nomodule:f"), r"no module 'nomodule'"),
    (GOOD.replace("fns:f", "fns.f"), r"parameter fn \(line 8\): expected 'module:function'"),
    (GOOD.replace("format: csv", "format: cvs"),
     r"stage 'read' \(line 3\), parameter format \(line 5\): expected 'csv', 'jsonl', "
     r"'parquet' or 'tfrecord', found 'cvs'. Did you mean 'csv'\?"),
    (GOOD.replace("{fn: ", "{batch_size: 3, fn: "),
     r"parameter batch_size \(line 8\): unknown parameter. Known: batch_format"),
    (GOOD.replace("params: {fn", "inputs: [nope]\n    params: {fn"), r"input 'nope' is not an"),
    (GOOD + "  - name: t\n    component: train\n",
     r"stage 't' \(line 9\), parameter model: a required parameter is missing"),
    (GOOD + "  - name: again\n    component: preprocess\n    inputs: read\n"
            "    params: {fn: \"fns:f\"}\n",
     r"reads 'read', which is not the stage before it and keeps no records"),
    (GOOD.replace("component: ingest", "component: ingest\n    colour: red"),
     r"stage #1 \(line 3\), key colour \(line 5\): unknown key. Known: cache, component"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_parse_pipeline_rejects_bad_files_with_their_own_message(folder, text, message):
    with pytest.raises(ConfigError, match=message):
        parse_pipeline(text, folder, COMPONENTS, source="p.yaml")


def test_load_pipeline_names_a_missing_pipeline_file(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read pipeline file .*nope.yaml"):
        load_pipeline(Path(tmp_path / "nope.yaml"), COMPONENTS)


@pytest.mark.parametrize("name", ["../elsewhere", "/etc/cron.d", "a\\\\b", "tab\\tname"])
def test_stage_names_never_name_a_folder_outside_the_run(folder, name):
    text = (f'name: p\nstages:\n  - {{name: "{name}", component: ingest,\n'
            '     params: {format: csv, paths: [in.csv]}}\n')
    with pytest.raises(ConfigError, match="a stage name names its artifact folder"):
        parse_pipeline(text, folder, COMPONENTS)

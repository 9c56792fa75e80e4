"""The planner against a real run store, as a table: what changed since the last run (or what
the options say) -> what each stage does and the reason it gives. Plans run nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import func, select

from seqline.components import COMPONENTS
from seqline.orchestration.api import execute, plan_pipeline
from seqline.orchestration.store import RunStore
from seqline.orchestration.store.tables import runs, stage_runs
from seqline.pipeline.config import load_pipeline

pytestmark = pytest.mark.integration

PIPELINE = """\
name: planned
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 8}}
  - {name: write, component: tfrecord_write, params: {shard_records: 16}}
  - {name: pre, component: preprocess, params: {fn: "fns:double"}}
"""
FNS = "import helpers\n\n\ndef double(batch):\n    return batch\n"


def _edit(folder: Path, name: str, old: str, new: str) -> None:
    path = folder / name
    path.write_text(path.read_text().replace(old, new, 1))


def _flip_a_shard_byte(folder: Path) -> None:
    shard = sorted((folder / "root" / "runs" / "first" / "write").glob("shard-*"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))


def _uncommit(folder: Path) -> None:  # as if the driver died before `pre` committed
    (folder / "root" / "runs" / "first" / "pre" / "manifest.json").unlink()


# (case, change to the folder after the first run, options) -> {stage: (action, reason regex)}
CASES = [
    ("unchanged: everything reused", None, {}, {
        "read": ("reuse", r"^reused from run first \(took \d+\.\d\d s\)$"),
        "write": ("reuse", r"^reused from run first"),
        "pre": ("reuse", r"^reused from run first")}),
    ("a parameter changed", lambda f: _edit(f, "p.yaml", "shard_records: 16",
                                            "shard_records: 24"), {}, {
        "read": ("run", r"^runs again to feed `write`"),
        "write": ("run", r"^params changed \(shard_records 16 → 24\)$"),
        "pre": ("run", r"^upstream `write` runs$")}),
    ("the function's own module changed", lambda f: _edit(f, "fns.py", "return batch",
                                                          "return batch  # v2"), {}, {
        "read": ("reuse", r"^reused"), "write": ("reuse", r"^reused"),
        "pre": ("run", r"^function source changed \(fns\.py\)$")}),
    ("a module the function imports changed", lambda f: _edit(f, "helpers.py", "2", "3"), {}, {
        "write": ("reuse", r"^reused"),
        "pre": ("run", r"^function source changed \(helpers\.py\)$")}),
    ("an input byte changed", lambda f: _edit(f, "in.csv", "5,", "6,"), {}, {
        "read": ("run", r"^input changed \(in\.csv\)$"),
        "write": ("run", r"^upstream `read` runs$"), "pre": ("run", r"^upstream `write` runs$")}),
    ("the error budget changed", lambda f: _edit(f, "p.yaml", 'params: {fn: "fns:double"}',
                                                 'params: {fn: "fns:double"}, errors: '
                                                 '{max_fraction: 0.5}'), {}, {
        "write": ("reuse", r"^reused"), "pre": ("run", r"^error budget changed$")}),
    ("cache: false on a stage", lambda f: _edit(f, "p.yaml", '"fns:double"}',
                                                '"fns:double"}, cache: false'), {}, {
        "write": ("reuse", r"^reused"), "pre": ("run", r"^cache: false in the pipeline$")}),
    ("--no-cache", None, {"cache": False}, {
        "read": ("run", r"^--no-cache$"), "write": ("run", r"^--no-cache$"),
        "pre": ("run", r"^--no-cache$")}),
    ("a stored byte changed: never trusted", _flip_a_shard_byte, {}, {
        "read": ("run", r"^runs again to feed `write`"),
        "write": ("run", r"^the output of run first is gone or changed on disk$"),
        "pre": ("run", r"^upstream `write` runs$")}),
    ("--resume after a crash before the last commit", _uncommit,
     {"resume": True, "run_id": "first"}, {
         "read": ("keep", r"^kept: the earlier attempt committed it$"),
         "write": ("keep", r"^kept"),
         "pre": ("run", r"^the earlier attempt did not commit it$")}),
    ("--resume of a stage whose bytes changed since its commit", _flip_a_shard_byte,
     {"resume": True, "run_id": "first"}, {
         "read": ("run", r"^runs again to feed `write`"),
         "write": ("run", r"^its committed output changed: .*shard-\d+.* changed since it was "
                          r"committed"),
         "pre": ("keep", r"^kept")}),
]


def _first_run(folder: Path) -> Path:
    """A folder with the pipeline, its inputs and the root of one committed run, `first`."""
    folder.mkdir()
    (folder / "in.csv").write_text("x,y\n" + "".join(f"{i},{i * 3}\n" for i in range(40)))
    (folder / "fns.py").write_text(FNS)
    (folder / "helpers.py").write_text("factor = 2\n")
    (folder / "p.yaml").write_text(PIPELINE)
    execute(load_pipeline(folder / "p.yaml", COMPONENTS), root=folder / "root", run_id="first",
            verify=False, mode="thread")
    return folder


@pytest.mark.parametrize(("change", "options", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_plan_says_what_each_stage_does_and_why(tmp_path, change, options, expected):
    folder = _first_run(tmp_path / "p")
    if change:
        change(folder)
    before = _state(folder)
    plan = plan_pipeline(load_pipeline(folder / "p.yaml", COMPONENTS), root=folder / "root",
                         **options)
    got = {s.stage: (s.action, s.reason) for s in plan.steps}
    for stage, (action, reason) in expected.items():
        assert got[stage][0] == action, (stage, got[stage])
        assert re.search(reason, got[stage][1]), (stage, got[stage])
    assert _state(folder) == before  # planning wrote nothing


def test_a_store_shared_by_two_roots_says_the_earlier_output_is_under_the_other(tmp_path):
    """One run store, two roots: the first root's runs are in the store, their folders are
    not under the second root, whose cache cannot reuse them. Said so, not 'gone'."""
    folder = _first_run(tmp_path / "p")
    store = f"sqlite:///{folder / 'shared.db'}"
    spec = load_pipeline(folder / "p.yaml", COMPONENTS)
    execute(spec, root=folder / "root", store=store, run_id="second", verify=False,
            mode="thread")
    plan = plan_pipeline(spec, root=folder / "other", store=store)
    read = next(s for s in plan.steps if s.stage == "read")
    assert read.action == "run"
    assert re.fullmatch(r"the output of run second is under another root \(\S+/root/runs/"
                        r"second/read\)", read.reason), read.reason
    again = plan_pipeline(spec, root=folder / "root", store=store)  # under its own: reused
    assert {s.action for s in again.steps} == {"reuse"}


def test_plan_fuses_the_map_after_tfrecord_write_on_beam_only(tmp_path):
    folder = _first_run(tmp_path / "p")
    spec = load_pipeline(folder / "p.yaml", COMPONENTS)
    beam = plan_pipeline(spec, root=tmp_path / "empty", runner="beam")
    local = plan_pipeline(spec, root=tmp_path / "empty", runner="local")
    assert [s.fused_after for s in beam.steps] == [None, None, "write"]
    assert [s.fused_after for s in local.steps] == [None, None, None]
    one_by_one = plan_pipeline(spec, root=tmp_path / "empty", runner="beam", overlap=False)
    assert [s.fused_after for s in one_by_one.steps] == [None, None, None]
    assert {s.reason for s in beam.steps} == {"no run store yet"}
    assert not (tmp_path / "empty").exists()
    plan = plan_pipeline(spec, root=folder / "root", run_id="next")
    document = json.loads(json.dumps(plan.as_json()))
    assert document["run_id"] == "next" and document["runner"] == "local"
    assert [s["action"] for s in document["steps"]] == ["reuse"] * 3
    assert plan.summary() == "0 of 3 stages on local; 3 reused from run first"


def _state(folder: Path) -> tuple[list[str], int, int]:
    """The root's files and the store's row counts."""
    files = sorted(str(p.relative_to(folder)) for p in (folder / "root").rglob("*")
                   if "seqline.db" not in p.name)
    with RunStore.open(folder / "root") as store, store.engine.connect() as conn:
        return (files, conn.execute(select(func.count()).select_from(runs)).scalar_one(),
                conn.execute(select(func.count()).select_from(stage_runs)).scalar_one())

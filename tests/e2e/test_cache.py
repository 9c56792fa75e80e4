"""Caching like TFX's, through `seqline run`: unchanged stages are reused, changed ones and
everything after them are recomputed, and a changed stored byte is never trusted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from seqline.components import COMPONENTS
from seqline.orchestration.cache import cache_keys
from seqline.orchestration.cli import app
from seqline.pipeline.config import load_pipeline
from tests.conftest import USERFNS

DATA = """\
name: cached
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 8}}
  - {name: write, component: tfrecord_write, params: {shard_records: 16}}
  - {name: features, component: preprocess, params: {fn: "fns:double"}}
"""
ML = DATA + """\
  - {name: batches, component: batching, params: {batch_size: 8, label: y}}
  - {name: model, component: train, params: {model: tabular_regression, epochs: 1}}
  - {name: evaluation, component: evaluate}
"""
FNS = "from helpers import factor\n\n\ndef double(batch):\n    return batch\n"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x,y\n" + "".join(f"{i},{i * 3}\n" for i in range(60)))
    (tmp_path / "fns.py").write_text(FNS)
    (tmp_path / "helpers.py").write_text("factor = 2\n")
    (tmp_path / "p.yaml").write_text(DATA)
    shutil.copy(USERFNS / "latency.py", tmp_path / "latency.py")
    return tmp_path


def _run(folder: Path, run_id: str, *args: str) -> dict:
    result = CliRunner().invoke(app, ["run", str(folder / "p.yaml"), "--root",
                                      str(folder / "root"), "--run-id", run_id, *args])
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(app, ["runs", "show", run_id, "--root", str(folder / "root"),
                                     "--json"])
    assert shown.exit_code == 0, shown.output
    return {s["name"]: s for s in json.loads(shown.output)["stages"]}


def _statuses(stages: dict) -> dict[str, str]:
    return {name: s["status"] for name, s in stages.items()}


def test_unchanged_rerun_reuses_every_stage_and_passes_verify(folder):
    first = _run(folder, "a")
    assert set(_statuses(first).values()) == {"succeeded"}
    again = _run(folder, "b")  # ends with verify, which must pass on the linked artifacts
    assert set(_statuses(again).values()) == {"cached"}
    assert {s["cached_from"] for s in again.values()} == {"a"}
    assert {n: s["cache_key"] for n, s in again.items()} == \
        {n: s["cache_key"] for n, s in first.items()}
    shard = next((folder / "root/runs/b/write").glob("shard-*"))
    assert shard.stat().st_nlink == 2  # linked, not copied


# ingest stores nothing but passes its blocks on, so it runs again whenever the stage reading
# it does; tfrecord_write stores its records, so preprocess can rerun from them alone.
CHANGES = [
    ("a parameter", lambda f: _edit(f / "p.yaml", "shard_records: 16", "shard_records: 32"),
     {"read": "succeeded", "write": "succeeded", "features": "succeeded"}),
    ("an input byte", lambda f: _edit(f / "in.csv", "7,21", "7,22"),
     {"read": "succeeded", "write": "succeeded", "features": "succeeded"}),
    ("the function's source", lambda f: _edit(f / "fns.py", "return batch", "return batch  #"),
     {"read": "cached", "write": "cached", "features": "succeeded"}),
    ("a module the function imports", lambda f: _edit(f / "helpers.py", "2", "3"),
     {"read": "cached", "write": "cached", "features": "succeeded"}),
    ("cache: false on a stage", lambda f: _edit(f / "p.yaml", "component: tfrecord_write,",
                                                "component: tfrecord_write, cache: false,"),
     {"read": "succeeded", "write": "succeeded", "features": "succeeded"}),
    ("a parameter of the last stage", lambda f: _edit(f / "p.yaml", '"fns:double"}',
                                                      '"fns:double", compression: none}'),
     {"read": "cached", "write": "cached", "features": "succeeded"}),
]


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in CHANGES],
                         ids=[c[0] for c in CHANGES])
def test_a_change_recomputes_its_stage_and_everything_after(folder, change, expected):
    _run(folder, "a")
    change(folder)
    assert _statuses(_run(folder, "b")) == expected


def test_no_cache_recomputes_everything(folder):
    _run(folder, "a")
    assert set(_statuses(_run(folder, "b", "--no-cache")).values()) == {"succeeded"}


@pytest.mark.parametrize("damage", ["flip a bit", "truncate"])
def test_a_tampered_cached_artifact_is_recomputed(folder, damage):
    _run(folder, "a")
    shard = sorted((folder / "root/runs/a/write").glob("shard-*"))[1]
    data = bytearray(shard.read_bytes())
    if damage == "flip a bit":
        data[len(data) // 2] ^= 0x01
    else:
        data = data[:-7]
    shard.write_bytes(bytes(data))
    again = _run(folder, "b", "--no-verify")
    assert _statuses(again) == {"read": "succeeded", "write": "succeeded",
                                "features": "succeeded"}
    fresh = sorted((folder / "root/runs/b/write").glob("shard-*"))[1]
    assert fresh.stat().st_nlink == 1 and fresh.read_bytes() != bytes(data)


def test_cache_key_changes_with_the_seqline_version(folder):
    spec = load_pipeline(folder / "p.yaml", COMPONENTS)

    def keys(version: str) -> dict[str, str]:
        return cache_keys(spec, COMPONENTS, seqline_version=version,
                          inputs=lambda stage, base: [str(base / "in.csv")], root=folder)

    assert all(keys("1.0")[s] != keys("1.1")[s] for s in ("read", "write", "features"))
    assert keys("1.0") == keys("1.0")


@pytest.mark.e2e
def test_train_and_evaluate_are_cached_too(folder):
    """Evaluate's key holds its baseline: run b compares with a's blessed model (a had none),
    so it evaluates again; run c's baseline (b's) has the same metrics, so c reuses b's."""
    (folder / "p.yaml").write_text(ML)
    first = _run(folder, "a")
    again = _run(folder, "b")
    assert _statuses(again) == {**dict.fromkeys(first, "cached"), "evaluation": "succeeded"}
    model = json.loads((folder / "root/runs/b/model/manifest.json").read_text())
    assert model["epochs"] == json.loads(
        (folder / "root/runs/a/model/manifest.json").read_text())["epochs"]
    assert again["evaluation"]["evaluation"]["metrics"] == \
        first["evaluation"]["evaluation"]["metrics"]
    third = _run(folder, "c")
    assert set(_statuses(third).values()) == {"cached"}
    assert third["evaluation"]["cached_from"] == "b"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))

"""`seqline run --dry-run` as a user types it: the plan and its reasons, exit 0, and nothing
written (the root's files and the store's rows are as they were)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests import commands
from tests.conftest import REPO

pytestmark = pytest.mark.e2e



def _seqline(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return commands.seqline(*args, cwd=cwd)


def _state(folder: Path) -> tuple[list[str], list[int]]:
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                   if not p.name.startswith("seqline.db"))
    with sqlite3.connect(folder / ".seqline" / "seqline.db") as db:
        rows = [db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "stage_runs", "events", "samples", "artifacts")]
    return files, rows


@pytest.fixture
def folder(tmp_path) -> Path:
    shutil.copytree(REPO / "docs" / "examples" / "readings", tmp_path / "readings")
    done = _seqline(tmp_path / "readings", "run", "data-only.yaml", "--run-id", "one",
                    "--no-verify")
    assert done.returncode == 0, done.stderr
    return tmp_path / "readings"


def _edit(path: Path, old: str, new: str) -> None:
    path.write_text(path.read_text().replace(old, new, 1))


@pytest.mark.parametrize(("change", "args", "reasons"), [
    (None, [], {"read": "reused from run one", "examples": "reused from run one",
                "features": "reused from run one"}),
    (("features.py", "return", "return  "), [], {"features": "function source changed "
                                                              "(features.py)"}),
    (("data-only.yaml", "shard_records: 200", "shard_records: 300"), [],
     {"examples": "params changed (shard_records 200 → 300)"}),
    (("readings.csv", "north,11.6", "north,11.7"), [], {"read": "input changed (readings.csv)"}),
    (None, ["--no-cache"], {"read": "--no-cache", "features": "--no-cache"}),
    (None, ["--resume", "--run-id", "one"], {"features": "kept: the earlier attempt "
                                                         "committed it"}),
], ids=["unchanged", "function", "parameter", "input byte", "no-cache", "resume"])
def test_dry_run_names_the_reason_and_writes_nothing(folder, change, args, reasons):
    if change:
        _edit(folder / change[0], change[1], change[2])
    before = _state(folder)
    done = _seqline(folder, "run", "data-only.yaml", "--dry-run", "--json", *args)
    assert done.returncode == 0, done.stderr
    steps = {s["stage"]: s for s in json.loads(done.stdout)["steps"]}
    for stage, reason in reasons.items():
        assert steps[stage]["reason"].startswith(reason), steps[stage]
    shown = _seqline(folder, "run", "data-only.yaml", "--dry-run", *args)
    assert shown.returncode == 0 and "plan " in shown.stdout
    assert all(reason in shown.stdout for reason in reasons.values())
    assert _state(folder) == before  # no file, no row


def test_dry_run_without_a_root_makes_none(tmp_path):
    shutil.copytree(REPO / "docs" / "examples" / "readings", tmp_path / "readings")
    done = _seqline(tmp_path / "readings", "run", "data-only.yaml", "--dry-run",
                    "--root", "nowhere")
    assert done.returncode == 0, done.stderr
    assert "no run store yet" in done.stdout
    assert not (tmp_path / "readings" / "nowhere").exists()


@pytest.mark.parametrize(("old", "new", "error"), [
    ("features: [temperature,", "features: [temprature,",
     "error: stage 'batches' (line 12 of the pipeline file): "
     "feature 'temprature' is not in the records of "
     "'features'; Did you mean 'temperature'?"),
    ("slices: [site]", "slices: [sitee]",
     "error: stage 'evaluation' (line 23 of the pipeline file): "
     "slice column 'sitee' is not in the records; "
     "Did you mean 'site'?"),
], ids=["batching feature", "evaluate slice"])
@pytest.mark.parametrize("dry", [False, True], ids=["run", "dry-run"])
def test_a_name_not_in_the_records_fails_before_work(tmp_path, old, new, error, dry):
    """The issue's `temprature`: found by the plan from a sample, not after three stages."""
    shutil.copytree(REPO / "docs" / "examples" / "readings", tmp_path / "readings")
    _edit(tmp_path / "readings" / "pipeline.yaml", old, new)
    done = _seqline(tmp_path / "readings", "run", "pipeline.yaml", *(["--dry-run"] * dry))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(error) and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "readings" / ".seqline" / "runs").exists()  # no stage ran

"""`seqline schedule export --to airflow`, checked by Airflow 3 itself in a virtualenv of its own.

Airflow pins hundreds of packages (its own constraints); they stay away from the ML stack in
`build/airflow-venv`, built once from tests/slow/airflow-constraints.txt (about 40 s) and
reused while that file is unchanged.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.scheduling import quick_project

pytestmark = pytest.mark.slow
AIRFLOW = "apache-airflow==3.3.2"
CONSTRAINTS = Path(__file__).parent / "airflow-constraints.txt"
VENV = REPO / "build" / "airflow-venv"
BIN = Path(sys.executable).parent  # our venv: `seqline` for the DAG's task
# Loads the folder as Airflow's DAG processor does; prints the import errors and the DAG.
INSPECT = """\
import json, sys
from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
dag = bag.dags.get("seqline_nightly")
print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                  "dags": sorted(bag.dags), "catchup": dag and dag.catchup,
                  "max_active_runs": dag and dag.max_active_runs,
                  "timezone": dag and str(dag.timezone),
                  "cron": dag and dag.timetable.expression}))
"""


def _airflow_venv() -> Path:
    """Build (or reuse) the virtualenv with Airflow; rebuilt when the constraints change."""
    stamp = VENV / ".installed"
    wanted = hashlib.sha256(CONSTRAINTS.read_bytes() + AIRFLOW.encode()).hexdigest()
    if stamp.exists() and stamp.read_text() == wanted:
        return VENV / "bin"
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True,
                   timeout=300)
    done = subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "-c", str(CONSTRAINTS),
                           AIRFLOW], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        pytest.fail(f"installing {AIRFLOW} failed: {done.stderr.strip()[-800:]}")
    stamp.write_text(wanted)
    return VENV / "bin"


def _run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


@pytest.fixture
def folder(tmp_path):
    quick_project(tmp_path)
    return tmp_path


def test_airflow_export_imports_and_runs_once_under_airflow_dags_test(folder):
    airflow_bin = _airflow_venv()
    seqline = [str(BIN / "seqline")]
    root = ["--root", str(folder / "root")]
    added = _run([*seqline, "schedule", "add", "nightly", "quick.yaml", "--cron", "30 2 * * *",
                  "--tz", "Europe/Berlin", "--start", "2026-01-01", "--workers", "1", *root],
                 dict(os.environ), folder)
    assert added.returncode == 0, added.stderr
    dag = _run([*seqline, "schedule", "export", "nightly", "--to", "airflow", *root],
               dict(os.environ), folder)
    assert dag.returncode == 0, dag.stderr
    dags = folder / "dags"
    dags.mkdir()
    (dags / "seqline_nightly.py").write_text(dag.stdout)
    env = {**os.environ, "AIRFLOW_HOME": str(folder / "airflow"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(dags), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}  # the task finds our seqline

    inspected = _run([str(airflow_bin / "python"), "-c", INSPECT, str(dags)], env, folder)
    assert inspected.returncode == 0, inspected.stderr[-2000:]
    found = json.loads(inspected.stdout.strip().splitlines()[-1])
    assert (found["errors"], found["dags"]) == ({}, ["seqline_nightly"])
    assert (found["catchup"], found["max_active_runs"], found["timezone"]) == (
        False, 1, "Europe/Berlin")
    assert found["cron"] == "30 2 * * *"

    migrated = _run([str(airflow_bin / "airflow"), "db", "migrate"], env, folder)
    assert migrated.returncode == 0, migrated.stderr[-2000:]
    # 2026-11-20 02:30 in Berlin is 01:30 UTC: the logical date a scheduled run would have.
    tested = _run([str(airflow_bin / "airflow"), "dags", "test", "seqline_nightly",
                   "2026-11-20T01:30:00+00:00"], env, folder)
    assert tested.returncode == 0, (tested.stdout + tested.stderr)[-3000:]
    runs = _run([*seqline, "runs", "list", "--json", *root], dict(os.environ), folder)
    [run] = json.loads(runs.stdout)
    assert (run["run_id"], run["trigger"], run["status"]) == (
        "nightly-20261120T013000Z", "schedule", "succeeded")  # the id our scheduler gives it

"""`seqline schedule export --to airflow`, checked by Airflow 3 itself in a virtualenv of its own.

Airflow pins hundreds of packages (its own constraints); they stay away from the ML stack in
`build/airflow-venv` (tests/slow/airflow_venv.py, which `make test` runs beside the main
install).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scheduling import quick_project
from tests.slow.airflow_venv import AirflowVenvError, airflow_venv

pytestmark = pytest.mark.slow
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
    """Airflow's bin folder: `make test` has built it by now; built here if it has not."""
    try:
        return airflow_venv()
    except AirflowVenvError as exc:
        pytest.fail(str(exc))


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

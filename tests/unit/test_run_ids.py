"""Run ids are names, never paths: one rule, checked wherever an id is joined to a path."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from seqline.orchestration.api import new_run_id
from seqline.orchestration.schedule.airflow import airflow_dag
from seqline.orchestration.schedule.launch import LaunchRequest, ProcessLauncher
from seqline.orchestration.schedule.times import run_id_for
from seqline.orchestration.store import Schedule
from seqline.pipeline.artifacts import StageArtifact, check_run_id, run_dir
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.storage import open_root

RULE = r"is not a name; use letters, digits, '\.', '_' and '-' \(at most 128, starting with"
# (run id, what the message shows of it)
BAD = [("../evil", r"'\.\./evil'"), ("../../x", r"'\.\./\.\./x'"), ("/abs", r"'/abs'"),
       ("a/b", r"'a/b'"), ("a\\b", r"'a\\\\b'"), ("a\nb", r"'a\\nb'"),
       ("a\x1b[31m", r"'a\\x1b\[31m'"),
       ("", r"''"), (".", r"'\.'"), ("..", r"'\.\.'"), (".hidden", r"'\.hidden'"),
       ("-x", r"'-x'"), ("a b", r"'a b'"), ("x" * 129, "'x{129}'"), ("a\0b", r"'a\\x00b'")]


@pytest.mark.parametrize(("run_id", "shown"), BAD, ids=[repr(b[0])[:20] for b in BAD])
def test_run_ids_bad_ones_are_refused_in_one_line(run_id, shown):
    with pytest.raises(ConfigError, match=f"^run id {shown} {RULE}") as refused:
        check_run_id(run_id)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("run_id", [b[0] for b in BAD], ids=[repr(b[0])[:20] for b in BAD])
def test_run_ids_no_path_is_made_of_a_bad_one(tmp_path, run_id):
    root = tmp_path / "root"
    with pytest.raises(ConfigError):
        run_dir(root, run_id)
    with pytest.raises(ConfigError):
        run_dir(open_root("memory://seqline-run-ids/root"), run_id)
    with pytest.raises(ConfigError):
        StageArtifact(root, run_id, "read")
    assert sorted(tmp_path.iterdir()) == []


def test_run_ids_made_by_seqline_pass():
    fire = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
    for run_id in (new_run_id(), run_id_for("n" * 80, fire, "backfill"), "nightly-3", "a..b",
                   "v1.2_final", "x" * 128):
        assert check_run_id(run_id) == run_id
    assert run_dir(Path("/r"), "a..b") == Path("/r/runs/a..b")


def test_run_ids_the_scheduler_launches_no_bad_one(tmp_path):
    (tmp_path / "p.yaml").write_text("name: p\nstages: []\n")
    launcher = ProcessLauncher(tmp_path / "root", None, tmp_path / "logs", executable="true")
    request = LaunchRequest("../escape", "s", datetime.now(UTC), str(tmp_path / "p.yaml"),
                            "local", 1, "schedule")
    with pytest.raises(ConfigError, match=r"run id '\.\./escape' is not a name"):
        launcher(request)
    assert not (tmp_path / "logs").exists() and not (tmp_path / "escape.log").exists()


def test_run_ids_the_airflow_export_refuses_a_schedule_that_makes_bad_ones(tmp_path):
    at = datetime(2026, 11, 23, tzinfo=UTC)
    schedule = Schedule(name="../x", pipeline="/p.yaml", cron="@daily", tz="UTC",
                        runner="local", workers=1, overlap="skip", catchup="none",
                        max_catchup=1, start=None, end=None, paused=False, since=at, created=at)
    with pytest.raises(ConfigError, match=r"run id '\.\./x-20261123T000000Z' is not a name"):
        airflow_dag(schedule, tmp_path, None)

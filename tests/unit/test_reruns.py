"""The rerun, resume and backfill commands built from what the store recorded, as a table."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime

import pytest

from seqline.orchestration.reruns import rerun_commands

LOCAL = {"workers": 2, "window": None, "queue": 4, "overlap": True, "cache": True}


def _run(status="failed", runner="local", **options):
    return {"run_id": "r1", "status": status, "runner": runner,
            "pipeline_file": "/p/my pipelines/demo.yaml", "options": {**LOCAL, **options}}


@pytest.mark.parametrize(("run", "words"), [
    (_run(), "--runner local --workers 2"),
    (_run(workers=4, window=3, queue=8), "--runner local --workers 4 --window 3 --queue 8"),
    (_run(overlap=False, cache=False), "--runner local --workers 2 --one-by-one --no-cache"),
    (_run(runner="ray", address="10.0.0.1:6379", working_dir="/p"),
     "--runner ray --workers 2 --ray-address 10.0.0.1:6379"),
    (_run(runner="beam", mode="in_memory", options=["--runner=FlinkRunner", "--x=a b"]),
     "--runner beam --workers 2 --beam-mode in_memory --beam-option runner=FlinkRunner "
     "--beam-option 'x=a b'"),
    (_run(runner="beam", mode="multi_processing"), "--runner beam --workers 2"),
])
def test_rerun_commands_carry_the_runner_and_options_the_run_used(run, words):
    rerun, resume = rerun_commands(run, "/r")
    assert rerun.text == f"seqline run '/p/my pipelines/demo.yaml' --root /r {words}"
    assert resume.text == rerun.text + " --resume --run-id r1"
    assert shlex.split(rerun.text)[2] == "/p/my pipelines/demo.yaml"  # quoted for the shell


@pytest.mark.parametrize(("status", "actions"), [
    ("failed", ["rerun", "resume"]), ("cancelled", ["rerun", "resume"]),
    ("interrupted", ["rerun", "resume"]), ("succeeded", ["rerun"]), ("running", ["rerun"]),
])
def test_rerun_commands_offer_resume_only_for_a_run_that_did_not_finish(status, actions):
    assert [c.action for c in rerun_commands(_run(status), "/r")] == actions


def test_rerun_commands_backfill_the_fire_time_of_a_scheduled_run():
    fired = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
    *_, backfill = rerun_commands(_run("succeeded"), "s3://bucket/root", None, "nightly", fired)
    assert backfill.text == ("seqline backfill nightly --from 2026-11-23T02:00:00Z "
                             "--to 2026-11-23T02:00:00Z --root s3://bucket/root")


def test_rerun_commands_of_a_backfills_own_run_resume_it_and_offer_no_backfill():
    """Pasting the backfill of a backfill's failed run launched nothing (its fire time has
    that run): it is resumed instead."""
    fired = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    run = {**_run("failed"), "run_id": "badnight-backfill-20261128T030000Z"}
    assert [c.action for c in rerun_commands(run, "/r", None, "badnight", fired)] == [
        "rerun", "resume"]


def test_rerun_commands_name_a_store_without_its_password():
    rerun, _ = rerun_commands(_run(), "/r", "postgresql+psycopg://ann:secret@db/runs")
    assert "secret" not in rerun.text
    assert "--store 'postgresql+psycopg://ann:***@db/runs'" in rerun.text


def test_rerun_commands_of_a_run_built_in_python_are_none():
    assert rerun_commands({**_run(), "pipeline_file": None}, "/r") == []

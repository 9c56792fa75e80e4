"""A run's log on an object-store root (S3 through moto): no appends there, so it is written
on this machine and put in the run's folder when the run ends; a resumed run keeps both
attempts in one log, wherever it resumes."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.e2e.test_run_logs import FEATURES, PIPELINE, seqline
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


def test_run_log_reaches_the_bucket_and_a_resume_keeps_both_attempts(
        s3_root, tmp_path, monkeypatch):  # noqa: F811
    home = tmp_path / "home"
    monkeypatch.setenv("SEQLINE_HOME", str(home))  # the local copy and the default store
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(20)))
    (tmp_path / "features.py").write_text(FEATURES)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    (tmp_path / "broken").touch()
    done = seqline("run", "pipeline.yaml", "--root", s3_root, "--run-id", "bad", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    errors = seqline("runs", "logs", "bad", "--root", s3_root, "--level", "error", "--json",
                     cwd=tmp_path)
    assert errors.returncode == 0, errors.stderr
    [line] = [json.loads(t) for t in errors.stdout.splitlines()]
    assert line["stage"] == "doubled" and "seq 7 is poisoned" in line["message"]
    shutil.rmtree(home / "scratch")  # resumed on another machine: only the bucket has it
    (tmp_path / "broken").unlink()
    done = seqline("run", "pipeline.yaml", "--root", s3_root, "--run-id", "bad", "--resume",
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    told = seqline("runs", "logs", "bad", "--root", s3_root, cwd=tmp_path).stdout
    assert "run bad started" in told and "ERROR doubled: " in told
    assert "run bad resumed" in told and "INFO run succeeded" in told

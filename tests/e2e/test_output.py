"""Output that survives a pipe: `seqline run` into files, as in a CI log, with a narrow
COLUMNS. Tables whole (no cell cut to `…`), every message on one line, no escape codes, and
none of the engines' own start-up chatter unless -v."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "docs" / "examples" / "readings"
# What TensorFlow, absl, Beam and Ray print of their own when nobody asks them to be quiet.
CHATTER = re.compile(r"oneDNN|cuInit|cuda drivers|absl::InitializeLog|cudart_stub|"
                     r"Token authentication|Started a local Ray|apache_beam\.runners")
SEQLINE = [sys.executable, "-m", "seqline.orchestration.cli"]


def _seqline(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout and stderr going to pipes (not a terminal) and COLUMNS=40."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TF_CPP_MIN_LOG_LEVEL", "FORCE_COLOR", "NO_COLOR")}
    environment.update(COLUMNS="40", TERM="xterm-256color", **env)
    return subprocess.run([*SEQLINE, *args], cwd=folder, env=environment, capture_output=True,
                          text=True, check=False)


@pytest.fixture
def readings(tmp_path):
    for name in ("data-only.yaml", "pipeline.yaml", "features.py", "readings.csv"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    return tmp_path


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("│", "┃"))]


def test_piped_run_prints_whole_tables_plain_text_and_no_engine_chatter(readings):
    """The whole example, train and evaluate included, so TensorFlow is imported."""
    result = _seqline(readings, "run", "pipeline.yaml", "--root", "root", "--run-id", "r1")
    assert result.returncode == 0, result.stderr
    both = result.stdout + result.stderr
    assert "\x1b[" not in both  # no colour or cursor codes in a file
    assert not CHATTER.search(both), both
    assert result.stderr == ""  # no progress bar off a terminal, no start-up lines
    rows = _table_rows(result.stdout)
    assert len(rows) >= 2 * 6  # the stages table and the verify table, a row per stage
    assert not any("…" in row for row in rows), result.stdout
    # Wider than COLUMNS: rich did not fit the table to 40 columns by cutting or wrapping.
    assert max(len(row) for row in rows) > 40
    stage_rows = [row.split("│")[1].strip() for row in rows if row.startswith("│")]
    for stage in ("read", "examples", "features", "batches", "model", "evaluation"):
        assert stage_rows.count(stage) == 2, stage_rows  # whole, once in each table
    # Each run line whole: the run id and the artifact folder on the same line.
    assert re.search(r"^Run r1 succeeded on local; artifacts in \S+/root/runs/r1$",
                     result.stdout, re.M), result.stdout


def test_piped_error_is_one_whole_line(readings):
    text = (readings / "data-only.yaml").read_text()
    (readings / "bad.yaml").write_text(text.replace("tfrecord_write", "tfrecord_writer"))
    result = _seqline(readings, "run", "bad.yaml", "--root", "root")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "Configuration error: bad.yaml: stage 'examples' (line 6): unknown component "
        "'tfrecord_writer'. Did you mean 'tfrecord_write'? Components: ingest, "
        "tfrecord_write, preprocess, batching, train, evaluate."], result.stderr
    assert result.stdout == ""


def test_quiet_prints_nothing_on_success_and_verbose_lets_the_engines_speak(readings):
    quiet = _seqline(readings, "-q", "run", "data-only.yaml", "--root", "root")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "" and quiet.stderr.strip() == ""
    if shutil.which("nvidia-smi"):
        return  # with a GPU TensorFlow has other things to say: the chatter below is CPU-only
    # -v: TensorFlow's own start-up lines are no longer held back (on a machine without a
    # GPU it reports the missing CUDA drivers); the run still succeeds.
    verbose = _seqline(readings, "-v", "run", "pipeline.yaml", "--root", "root",
                       "--no-verify")
    assert verbose.returncode == 0, verbose.stderr
    assert CHATTER.search(verbose.stderr), verbose.stderr


def test_no_color_is_honoured_on_a_terminal(readings):
    """On a terminal the verify table is coloured, unless NO_COLOR is set (no-color.org)."""
    made = _seqline(readings, "run", "data-only.yaml", "--root", "root", "--run-id", "r1",
                    "--no-verify")
    assert made.returncode == 0, made.stderr

    def on_a_terminal(**env: str) -> str:
        leader, follower = pty.openpty()
        environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        environment.update(COLUMNS="200", TERM="xterm-256color", **env)
        proc = subprocess.run([*SEQLINE, "verify", "r1", "--root", "root"], cwd=readings,
                              env=environment, stdout=follower, stderr=follower, check=False)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert proc.returncode == 0
        return b"".join(chunks).decode()

    colour = re.compile(r"\x1b\[[0-9;]*3[0-9]")
    assert colour.search(on_a_terminal())  # the check below could fail
    assert not colour.search(on_a_terminal(NO_COLOR="1"))

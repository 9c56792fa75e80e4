"""A local Ray's sockets live under the run's temp folder, and a Unix socket's path holds at
most 107 bytes: with a long $TMPDIR (macOS's /var/folders/…, a CI's workspace) every Ray run
failed at ray.init. The scratch folder then goes under /tmp (orchestration/processes.py). So
does the folder of the local runner's fork server's socket (runners/forked.py), whose workers
failed to start ("AF_UNIX path too long") under a long $TMPDIR, or in a process where a test
had set one when multiprocessing first made its temp folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from seqline.orchestration.processes import SOCKET_PATH_MAX, scratch_dir
from seqline.orchestration.runners.ray import RAY_SOCKET_DEPTH
from tests.conftest import USERFNS

EXE = str(Path(sys.executable).parent / "seqline")
PIPELINE = """\
name: t
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 4}}
  - {name: features, component: preprocess, params: {fn: "latency:double"}}
"""


@pytest.fixture
def long_tmpdir(tmp_path, monkeypatch) -> Path:
    long = tmp_path / ("t" * 60)
    long.mkdir()
    assert len(str(long)) > SOCKET_PATH_MAX - RAY_SOCKET_DEPTH
    monkeypatch.setattr(tempfile, "tempdir", str(long))  # gettempdir() caches $TMPDIR
    return long


def test_scratch_for_sockets_moves_to_tmp_when_the_temp_folder_is_too_long(long_tmpdir):
    plain, sockets = scratch_dir("beam"), scratch_dir("ray", socket_depth=RAY_SOCKET_DEPTH)
    try:
        assert plain.parent == long_tmpdir  # no sockets: where the user put temp files
        assert sockets.parent == Path("/tmp")
        assert len(str(sockets)) + RAY_SOCKET_DEPTH <= SOCKET_PATH_MAX
    finally:
        shutil.rmtree(plain), shutil.rmtree(sockets)


@pytest.mark.e2e
@pytest.mark.parametrize("runner", ["ray", "local"])
def test_a_run_starts_under_a_long_tmpdir(tmp_path, long_tmpdir, runner):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(10)))
    shutil.copy(USERFNS / "latency.py", tmp_path / "latency.py")
    (tmp_path / "p.yaml").write_text(PIPELINE)
    done = subprocess.run([EXE, "run", "p.yaml", "--runner", runner, "--root", "root"],
                          cwd=tmp_path, env={**os.environ, "TMPDIR": str(long_tmpdir)},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "All artifacts hold the ordering contract." in done.stdout
    assert list(long_tmpdir.glob("seqline-*")) == []  # not there, and nothing left

"""Beam's forked SDK workers never leave a job waiting for ever (decision 58).

The FnApiRunner waits without a timeout for a worker that is gone, so each way a worker can
go is provoked for real and must end in a finished job or a named error within a timeout:
the fork server killed, reaped by someone else or without its socket between two jobs; the
fork server killed or stopped in the middle of a job; workers that fail as they start; a fork
server that cannot fork; a worker that exits 0 in the middle of a block.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from multiprocessing import forkserver

import numpy as np
import psutil
import pyarrow as pa
import pytest

from seqline.components import preprocess
from seqline.components import stage as new_stage
from seqline.orchestration.events import BlockRetried
from seqline.orchestration.runners import beam_workers, forked
from seqline.orchestration.runners.beam import BeamRunner
from seqline.orchestration.runners.beam_workers import BEAM_PRELOAD, WorkersLost
from seqline.pipeline.blocks import SEQ, to_blocks
from tests.conftest import USERFNS

# A test that regresses waits for ever: each gets a minute, not the suite's ten.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _task(fn: str = "stamp_pid", **kwargs):
    task = preprocess.make_task(new_stage("features", "preprocess",
                                          {"fn": f"latency:{fn}", "fn_kwargs": kwargs}),
                                USERFNS, USERFNS)
    return dataclasses.replace(task, sink=None)


def _run(task, rows: int = 600, events: list | None = None) -> list:
    runner = BeamRunner(workers=2, mode="multi_processing",
                        publish=None if events is None else events.append)
    blocks = to_blocks([pa.record_batch({"x": np.arange(rows, dtype=np.int64)})], 40)
    results = list(runner.map_blocks(task, blocks))
    seq = np.concatenate([r.batch.column(SEQ).to_numpy() for r in results])
    assert np.array_equal(seq, np.arange(rows))  # complete, in order
    return results


def _server() -> int:
    """This process's Beam fork server, started by a job if none runs."""
    if forked.server_pid(BEAM_PRELOAD) is None:
        _run(_task(), rows=40)
    pid = forked.server_pid(BEAM_PRELOAD)
    assert pid is not None
    return pid


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_and_reap(pid: int) -> None:
    """As a SIGCHLD handler or a library's os.wait() would: multiprocessing then finds no child
    to ask about and raises ChildProcessError for ever, rather than start a new server."""
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _remove_socket(pid: int) -> None:
    """As a temp folder cleaner would: the server runs on, but nobody can reach it."""
    server = forked._servers[tuple(BEAM_PRELOAD)]
    os.unlink(server._forkserver_address)


@pytest.mark.parametrize("fault", [lambda pid: os.kill(pid, signal.SIGKILL), _kill_and_reap,
                                   _remove_socket], ids=["killed", "reaped-by-another",
                                                         "socket-removed"])
def test_a_fork_server_gone_between_jobs_is_replaced(fault):
    old = _server()
    fault(old)
    results = _run(_task("stamp_pid", parent=True))
    (parent,) = {p for r in results for p in r.batch.column("pid").to_pylist()}
    assert parent != old and parent == forked.server_pid(BEAM_PRELOAD)
    assert psutil.Process(parent).ppid() == os.getpid()


def test_workers_started_at_once_after_their_server_was_reaped_share_one_new_server():
    """Every thread that finds the server gone must come to the one that replaces it: a
    thread still holding the old one would have multiprocessing start that one again."""
    context = forked.WorkerContext(["json"])  # a light preload: a server starts in ~0.1 s
    for _ in range(5):
        first = context.Process(target=time.sleep, args=(0,), daemon=True)
        first.start()
        first.join()
        old = forked.server_pid(["json"])
        assert old is not None
        _kill_and_reap(old)
        workers = [context.Process(target=time.sleep, args=(3,), daemon=True)
                   for _ in range(6)]
        starts = [threading.Thread(target=w.start) for w in workers]
        for start in starts:
            start.start()
        for start in starts:
            start.join()
        parents = {psutil.Process(w.pid).ppid() for w in workers}
        for worker in workers:
            worker.kill()
            worker.join()
        assert parents == {forked.server_pid(["json"])} != {old}


def test_a_fork_server_killed_mid_job_costs_no_block_and_no_worker():
    """Its workers run on and finish the job (nothing is retried); they are waited for where
    they can still be seen, and the next job forks from a new server."""
    old = _server()
    events: list = []

    def kill_once_both_work() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(psutil.Process(old).children()) < 2:
            time.sleep(0.05)
        time.sleep(0.5)  # in their first blocks
        os.kill(old, signal.SIGKILL)

    killer = threading.Thread(target=kill_once_both_work)
    killer.start()
    # 8 blocks of 1.5 s on 2 workers: the job outlives the kill by about 5 s
    results = _run(_task("stamp_pid", base_ms=1500), rows=320, events=events)
    killer.join()
    assert _gone(old)
    assert not [e for e in events if isinstance(e, BlockRetried)]
    workers = {p for r in results for p in r.batch.column("pid").to_pylist()}
    assert len(workers) == 2 and all(_gone(p) for p in workers)
    results = _run(_task("stamp_pid", parent=True))
    assert {p for r in results for p in r.batch.column("pid").to_pylist()} == {
        forked.server_pid(BEAM_PRELOAD)} != {old}


def test_a_fork_server_stopped_mid_job_is_replaced(monkeypatch):
    """SIGSTOP, then a worker SIGKILLed: the server neither tells that worker's end nor forks
    another. Its death is seen in the process table, and the next job's workers come from a
    new server once the stopped one has said nothing for ANSWER_SECONDS (shortened here)."""
    # Short of the product's 180 s, yet room for a new server to import Beam's preload on a
    # machine loaded many times over: at 3 s, one in a suite slowed by a busy host did not
    # answer in time either, nor the two after it (WorkersLost).
    monkeypatch.setattr(forked, "ANSWER_SECONDS", 20.0)
    monkeypatch.setattr(beam_workers, "SERVER_WORD_SECONDS", 2.0)
    old = _server()

    def stop_then_kill_a_worker() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(psutil.Process(old).children()) < 2:
            time.sleep(0.05)
        time.sleep(0.5)  # in their first blocks
        victim = psutil.Process(old).children()[0]
        os.kill(old, signal.SIGSTOP)
        victim.kill()

    killer = threading.Thread(target=stop_then_kill_a_worker)
    killer.start()
    try:
        _run(_task("stamp_pid", base_ms=300), rows=320)
    finally:
        killer.join()
        os.kill(old, signal.SIGKILL)  # (a stopped process dies of it too)
    assert forked.server_pid(BEAM_PRELOAD) not in (None, old)


def test_workers_that_fail_as_they_start_fail_the_stage_named(monkeypatch):
    """Each job's workers exit 1 before they reach Beam (their harness cannot read its
    options): the stage fails after a few jobs, saying how, rather than start more for ever."""
    monkeypatch.setenv("PIPELINE_OPTIONS_FILE", "/nonexistent/options.json")
    with pytest.raises(WorkersLost, match=r"stage 'features' on Beam: 3 jobs in a row lost an "
                       r"SDK worker before it ran a block \(the last one exited with code 1\)"):
        _run(_task())


def test_a_fork_server_that_cannot_fork_fails_the_stage_named(monkeypatch):
    """Not even a new server starts a worker: the job has no worker to wait for."""
    def refuse(self, fds):
        raise ConnectionRefusedError("no fork server")

    monkeypatch.setattr(forkserver.ForkServer, "connect_to_new_process", refuse)
    with pytest.raises(WorkersLost, match=r"\(the last one could not be started: "
                       r"ConnectionRefusedError: no fork server\)"):
        _run(_task())


def test_a_worker_that_exits_0_mid_block_costs_a_retry(tmp_path):
    """An exit with code 0 while its job still runs is a death like any other: Beam ends a
    job's workers only once it has closed the job."""
    events: list = []
    _run(_task("exit_once_at", state_dir=str(tmp_path), seq=150), events=events)
    assert (tmp_path / "exited-150").exists()
    assert [e.stage for e in events if isinstance(e, BlockRetried)] == ["features"]

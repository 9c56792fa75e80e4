"""The fault matrix: faults injected from outside, as they happen in life (signals to real
PIDs, a real full filesystem, bytes flipped on disk), on every runner where they apply.

Every row ends with the undisturbed answer, byte for byte (the shards of an undisturbed local
run; all runners write the same bytes), checked by `verify`, and with nothing left behind: no
process the run started, no temporary folder.

| fault                                    | local | beam | ray | the run                   |
|------------------------------------------|-------|------|-----|---------------------------|
| a worker SIGKILLed mid-preprocess        |   x   |  x   |  x  | retries the block          |
| a poison block (kills every worker)      |   x   |  x   |  x  | fails, naming the block    |
| a worker SIGKILLed mid-tfrecord_write    |   x   |  x   |  x  | retries the block          |
| the driver SIGKILLed mid-preprocess      |   x   |  x   |  x  | interrupted; --resume      |
| SIGTERM mid-run                          |   x   |  x   |  x  | cancelled in 5 s; --resume |
| the driver SIGKILLed mid-training        |   x   |      |     | interrupted; --resume      |
| a full disk (tmpfs)                      |   x   |      |     | fails, named; --resume     |
| a shard corrupted before --resume        |   x   |      |     | recomputed; --resume       |
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.conftest import USERFNS
from tests.disks import small_filesystem

PIPELINE = """\
name: faults
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: BR}}
  - {name: write, component: tfrecord_write, params: {shard_records: BR}}
  - {name: features, component: preprocess, params: {fn: "latency:FN", fn_kwargs: {KW}}}
"""
ROWS = 3000


def pipeline(fn: str = "skewed", kwargs: str = "base_ms: 400, slow_every: 1000",
             block: int = 100) -> str:
    return (PIPELINE.replace("FN", fn).replace("KW", kwargs)
            .replace("BR", str(block)))


SLOW = pipeline()
QUICK = pipeline(kwargs="base_ms: 1, slow_every: 1000")  # the same records, for resumes
EXE = str(Path(sys.executable).parent / "seqline")
RUNNERS = ["local", "beam", "ray"]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def calm(tmp_path_factory) -> dict[str, list[tuple[str, str]]]:
    """The shards of an undisturbed run: what every row must end with."""
    folder = _folder(tmp_path_factory.mktemp("calm"))
    run = Run(folder, QUICK, "calm")
    assert run.wait() == 0, run.err
    return {stage: _shards(folder, "calm", stage) for stage in ("write", "features")}


@pytest.fixture
def folder(tmp_path) -> Path:
    return _folder(tmp_path)


def _folder(path: Path) -> Path:
    (path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(ROWS)))
    (path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    return path


class Run:
    """`seqline run` as a separate process, and everything it starts."""

    def __init__(self, folder: Path, text: str, run_id: str, runner: str = "local",
                 *extra: str, root: Path | None = None) -> None:
        self.folder, self.run_id = folder, run_id
        self.root = root or folder / "root"
        (folder / f"{run_id}.yaml").write_text(text)
        self.process = subprocess.Popen(
            [EXE, "run", str(folder / f"{run_id}.yaml"), "--root", str(self.root),
             "--run-id", run_id, "--no-cache", "--runner", runner, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.started: dict[int, psutil.Process] = {}  # every process seen under the driver
        self.out = self.err = ""

    def watch(self) -> None:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.process.pid).children(recursive=True):
                self.started.setdefault(child.pid, child)

    def until(self, found: Callable[[], object], what: str, timeout: float = 180,
              every: float = 0.05) -> object:
        """Poll `found` (and note the run's processes) every `every` s until it returns
        something."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.watch()
            result = found()
            if result:
                return result
            if self.process.poll() is not None:
                break
            # A look costs a few ms of CPU (the machine's process table, a glob of the temp
            # folder): at 100 a second it took a third of a core from the run it watched.
            # Most blocks it waits for last 0.1 s and more.
            time.sleep(every)
        raise AssertionError(f"{what} never happened; the run ended with "
                             f"{self.process.poll()}: {self.process.stderr.read()[-2000:]}")

    def wait(self) -> int:
        self.out, self.err = self.process.communicate(timeout=600)
        return self.process.returncode

    def stage_tmp(self, stage: str) -> list[Path]:
        return list((self.root / "runs" / self.run_id).glob(f".{stage}.tmp-*/shard-*"))

    def left_behind(self, grace: float = 15) -> list[str]:
        """What the run left: live processes it started, temporary folders. Ray's own
        agents exit a while after their raylet (they flush logs first): `grace` seconds."""
        deadline = time.monotonic() + grace
        while True:
            alive = [p for p in self.started.values()
                     if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        temp = Path(tempfile.gettempdir())
        left = [" ".join(p.cmdline())[:100] for p in alive if _quiet(p)]
        left += [str(p) for p in temp.glob(f"seqline-*-{self.process.pid}-*")]
        left += [str(p) for p in (self.root / "runs" / self.run_id).glob(".*tmp*")]
        return left


def _quiet(process: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return process.status() != psutil.STATUS_ZOMBIE
    return False


def _shards(folder: Path, run_id: str, stage: str, root: Path | None = None
            ) -> list[tuple[str, str]]:
    manifest = json.loads(((root or folder / "root") / "runs" / run_id / stage /
                           "manifest.json").read_text())
    return [(s["path"], s["sha256"]) for s in manifest["shards"]]


def _same_as_calm(run: Run, calm: dict) -> None:
    assert run.process.returncode == 0, run.err[-3000:]
    assert "All artifacts hold the ordering contract." in run.out
    for stage, shards in calm.items():
        assert _shards(run.folder, run.run_id, stage, run.root) == shards, stage


def _resume(run: Run, runner: str = "local", text: str = QUICK) -> Run:
    resumed = Run(run.folder, text, run.run_id, runner, "--resume", root=run.root)
    resumed.started = run.started  # what the killed driver left must be gone too
    resumed.wait()
    return resumed


def _show(run: Run) -> dict:
    proc = subprocess.run([EXE, "runs", "show", run.run_id, "--json", "--root", str(run.root)],
                          capture_output=True, text=True, timeout=120)
    return json.loads(proc.stdout)


def _status(run: Run) -> str:
    return str(_show(run)["status"])


# -- a worker that dies -------------------------------------------------------------------

def _worker_running(run: Run, stage: str, runner: str) -> psutil.Process:
    """A worker process in the middle of one of `stage`'s blocks, once a block is done.

    Local workers and Beam's (beam_transforms.py) mark the block they run; Ray titles a worker
    after its task, which the runner names for its stage and block (ray::features:block-12):
    both stages run at once on the assembly line, and a write block's death is not this one.
    """
    def found() -> psutil.Process | None:
        if runner == "beam":  # its attempt markers name the worker running each block
            for mark in Path(tempfile.gettempdir()).glob(
                    f"seqline-beam-{run.process.pid}-*/out-{stage}/attempts/block-*.attempt-1.*"):
                pid = int(mark.name.rsplit(".", 1)[1])
                if pid in run.started and _beam_worker(run.started[pid]):
                    return run.started[pid]
            return None
        if not run.stage_tmp(stage):
            return None
        if runner == "ray":  # this run's own Ray (another may run on the machine)
            return next((p for p in list(run.started.values())
                         if _titled(p, f"ray::{stage}:block-")), None)
        for mark in Path(tempfile.gettempdir()).glob(
                f"seqline-workers-{run.process.pid}-*/{stage}.*.1"):
            with contextlib.suppress(OSError, ValueError):  # the block may end meanwhile
                pid = int(mark.read_text())
                if pid in run.started:
                    return run.started[pid]
        return None

    # A Beam job of BIG_BLOCKS lasts ~0.25 s, each write block ~25 ms of it (two at a time):
    # at 20 looks a second, one run in ten or twenty saw none. Only while this job runs.
    every = 0.01 if runner == "beam" else 0.05
    return run.until(found, f"a {stage} block running on a {runner} worker",  # type: ignore
                     every=every)


def _titled(process: psutil.Process, title: str) -> bool:
    with contextlib.suppress(psutil.Error):
        return title in " ".join(process.cmdline())
    return False


def _beam_worker(process: psutil.Process) -> bool:
    """A Beam SDK worker: forked by the driver's fork server (runners/beam_workers.py), so
    the fork server's command line, and the fork server its parent."""
    with contextlib.suppress(psutil.Error):
        parent = process.parent()
        return parent is not None and all("forkserver" in " ".join(p.cmdline())
                                           for p in (process, parent))
    return False


@pytest.mark.parametrize("runner", RUNNERS)
def test_worker_killed_mid_preprocess_costs_a_retry(folder, calm, runner):
    run = Run(folder, SLOW, "killed", runner)
    _worker_running(run, "features", runner).send_signal(signal.SIGKILL)
    run.wait()
    _same_as_calm(run, calm)
    assert "died; running it again (attempt 2 of 4)" in run.err, run.err[-6000:]
    # The workers stopped after the death are not reported again by Beam's threads, and the
    # retry is one line in seqline's words (Beam relayed it as its protobuf's text, beside
    # gRPC tracebacks of the broken streams).
    assert "Worker subprocess exited" not in run.err, run.err[-6000:]
    assert "Worker: severity" not in run.err and "Traceback" not in run.err, run.err[-6000:]
    stages = {s["name"]: s for s in _show(run)["stages"]}
    assert stages["features"]["block_retries"] == 1  # recorded in the run store
    assert run.left_behind() == []


BIG = "x\n" + "".join(f"{i}\n" for i in range(300_000))  # blocks long enough to catch
BIG_BLOCKS = pipeline(kwargs="base_ms: 1, slow_every: 1000", block=30_000)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory) -> dict[str, list[tuple[str, str]]]:
    """The shards of an undisturbed run of BIG_BLOCKS: what a killed writer must end with."""
    folder = _folder(tmp_path_factory.mktemp("quiet"))
    (folder / "in.csv").write_text(BIG)
    run = Run(folder, BIG_BLOCKS, "quiet")
    assert run.wait() == 0, run.err
    return {stage: _shards(folder, "quiet", stage) for stage in ("write", "features")}


@pytest.mark.parametrize("runner", RUNNERS)
def test_worker_killed_mid_tfrecord_write_costs_a_retry(folder, quiet, runner):
    (folder / "in.csv").write_text(BIG)
    run = Run(folder, BIG_BLOCKS, "killed", runner)
    _worker_running(run, "write", runner).send_signal(signal.SIGKILL)
    assert run.wait() == 0, run.err[-3000:]
    for stage in ("write", "features"):
        assert _shards(folder, "killed", stage) == quiet[stage]
    assert run.left_behind() == []


@pytest.mark.parametrize("runner", RUNNERS)
def test_block_that_kills_every_worker_fails_the_run_named(folder, runner):
    run = Run(folder, pipeline("die_at", "seq: 1234"), "poison", runner)
    assert run.wait() == 1, run.out + run.err
    assert ("stage 'features': block 12 (first seq 1200) killed its worker process on all 4 "
            "attempts") in " ".join(run.err.split())
    assert "Run with --workers 1 to see it fail on its own." in run.err
    assert not (run.root / "runs/poison/features").exists()  # nothing half-written kept
    assert run.left_behind() == []


# -- the driver ---------------------------------------------------------------------------

@pytest.mark.parametrize("runner", RUNNERS)
def test_driver_killed_mid_preprocess_is_interrupted_then_resumed(folder, calm, runner):
    run = Run(folder, SLOW, "crashed", runner)
    run.until(lambda: run.stage_tmp("features"), "a stored preprocess shard")
    run.process.send_signal(signal.SIGKILL)
    run.wait()
    assert _status(run) == "interrupted"  # its pid is gone: no need to wait for heartbeats
    resumed = _resume(run, runner)
    _same_as_calm(resumed, calm)
    assert resumed.left_behind(grace=90 if runner == "ray" else 15) == []


@pytest.mark.parametrize("runner", RUNNERS)
def test_sigterm_cancels_in_seconds_then_resumes(folder, calm, runner):
    run = Run(folder, SLOW, "stopped", runner)
    run.until(lambda: run.stage_tmp("features"), "a stored preprocess shard")
    run.process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    assert run.wait() == 128 + signal.SIGTERM, run.err[-3000:]
    # Cancelled, not finished: the stage's blocks of work were dropped, so it never committed
    # (on a quiet machine in about a second; the bound only catches a hang on a loaded one).
    assert not (run.root / "runs" / run.run_id / "features" / "manifest.json").exists()
    assert time.monotonic() - sent < 30
    assert "Run stopped cancelled (SIGTERM)" in run.err
    shown = _show(run)
    assert shown["status"] == "cancelled"
    # The stage the cancel stopped mid-way ran: cancelled, with its seconds and records so far
    features = next(s for s in shown["stages"] if s["name"] == "features")
    assert features["status"] == "cancelled" and features["seconds"] > 0, features
    assert features["reason"] == (f"stopped after {features['seconds']:.2f} s: the run was "
                                  "cancelled (SIGTERM)")
    assert run.left_behind() == []
    resumed = _resume(run, runner)
    _same_as_calm(resumed, calm)


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_cancel_while_ray_starts_is_a_cancelled_run_of_skipped_stages(folder, sent):
    """Before any stage's turn: the run is cancelled (exit 128 + the signal), its folder, log
    and every stage's row are there, each stage skipped with the cancel's reason, and verify
    and the log answer for it. Ray puts in a SIGTERM handler of its own as it starts (it
    exits with status 15): SIGTERM had been stored failed ("SystemExit: 15"), and a cancel
    then left a run with no stages, of which `verify` said "no run"."""
    run = Run(folder, QUICK, "early", "ray")
    run.until(lambda: any(_titled(p, "gcs_server") for p in list(run.started.values())),
              "Ray's gcs_server")
    assert not (run.root / "runs" / "early" / "read").exists()  # no stage has run yet
    run.process.send_signal(sent)
    assert run.wait() == 128 + sent, run.err[-3000:]
    name = signal.Signals(sent).name
    assert f"Run early cancelled ({name})" in run.err, run.err[-3000:]
    shown = _show(run)
    assert shown["status"] == "cancelled"
    assert [(s["name"], s["status"], s["seconds"], s["reason"]) for s in shown["stages"]] == [
        (stage, "skipped", None, f"not run: the run was cancelled ({name})")
        for stage in ("read", "write", "features")]
    said = subprocess.run([EXE, "verify", "early", "--root", str(run.root)],
                          capture_output=True, text=True, timeout=120)
    assert said.returncode == 1 and "no committed output" in said.stdout, said.stderr
    logs = subprocess.run([EXE, "runs", "logs", "early", "--root", str(run.root)],
                          capture_output=True, text=True, timeout=120)
    assert logs.returncode == 0 and f"not run: the run was cancelled ({name})" in logs.stdout
    assert run.left_behind(grace=90) == []


TRAIN = """\
  - {name: batches, component: batching, params: {batch_size: 32, label: y, features: [x]}}
  - {name: model, component: train, params: {model: tabular_regression, epochs: 6}}
"""


def test_driver_killed_mid_training_resumes_from_its_checkpoint(folder):
    text = QUICK + TRAIN
    undisturbed = Run(folder, text, "undisturbed")
    assert undisturbed.wait() == 0, undisturbed.err
    run = Run(folder, text, "crashed")
    run.until(lambda: list(run.root.glob("runs/crashed/.model.tmp-*/checkpoints/epoch-002*")),
              "a second epoch's checkpoint")
    run.process.send_signal(signal.SIGKILL)
    run.wait()
    resumed = _resume(run, text=text)
    assert resumed.process.returncode == 0, resumed.err[-3000:]
    assert "All artifacts hold the ordering contract." in resumed.out
    model = [json.loads((folder / "root/runs" / r / "model/manifest.json").read_text())
             for r in ("undisturbed", "crashed")]
    assert [e["epoch"] for e in model[1]["epochs"]][0] >= 2  # the first epochs not redone
    last = [{k: m["epochs"][-1][k] for k in ("epoch", "metrics", "seq_digest")} for m in model]
    assert last[0] == last[1]  # the same weights give the same losses, to the last bit
    for stage in ("write", "features", "batches"):
        assert (sorted((folder / "root/runs/crashed" / stage).rglob("*.tfrecord*")) == [] or
                _shards(folder, "crashed", stage) == _shards(folder, "undisturbed", stage))
    assert resumed.left_behind() == []


# -- storage ------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB filesystem of its own (tmpfs), grown later as a user would free space."""
    with small_filesystem(tmp_path / "disk", "3m") as mount:
        yield mount


def test_full_disk_fails_naming_the_path_and_resumes_identically(folder, small_disk):
    (folder / "in.csv").write_text("x,s\n" + "".join(f"{i},{i * 7919:032d}\n"
                                                    for i in range(60_000)))  # ~6 MiB stored
    big = pipeline(kwargs="base_ms: 1, slow_every: 1000", block=5000).replace(
        "shard_records: 5000}", "shard_records: 5000, compression: none}")
    reference = Run(folder, big, "reference")
    assert reference.wait() == 0, reference.err
    run = Run(folder, big, "full", root=small_disk)
    assert run.wait() == 1, run.out + run.err
    message = " ".join(run.err.split())
    assert "the disk is full: writing " + str(small_disk) in message
    assert "No space left on device" in message and "--resume" in message
    assert "Traceback" not in run.err
    assert list(small_disk.glob("runs/full/.*tmp*")) == []
    committed = {p.parent.name for p in small_disk.glob("runs/full/*/manifest.json")}
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    resumed = _resume(run, text=big)
    assert resumed.process.returncode == 0, resumed.err[-3000:]
    for stage in ("write", "features"):
        assert _shards(folder, "full", stage, small_disk) == _shards(folder, "reference", stage)
    assert committed <= {p.parent.name for p in small_disk.glob("runs/full/*/manifest.json")}
    assert resumed.left_behind() == []


def test_corrupted_shard_is_recomputed_before_resume(folder, calm):
    run = Run(folder, SLOW, "flipped")
    run.until(lambda: (run.root / "runs/flipped/write/manifest.json").exists(),
              "tfrecord_write committed")
    run.process.send_signal(signal.SIGTERM)
    run.wait()
    shard = sorted((run.root / "runs/flipped/write").glob("shard-*"))[3]
    data = bytearray(shard.read_bytes())
    data[100] ^= 1  # one flipped bit
    shard.write_bytes(bytes(data))
    resumed = _resume(run)
    assert f"{shard} changed since it was committed" in " ".join(resumed.err.split())
    _same_as_calm(resumed, calm)

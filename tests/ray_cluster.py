"""A two-node Ray cluster on this machine, for tests: a head and a second node, 1 CPU each.

ORCHESTRATION.md §5. Each node is `ray start --block` in a process group of its own, with a
private temp folder, so that teardown ends exactly the processes this fixture started (never
`ray stop`, which would end every Ray on the machine, other tests' included). Token
authentication stays on: RAY_AUTH_MODE=token for both nodes and every driver (`env`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["ClusterUnavailable", "RayCluster", "ray_cluster", "two_node_cluster"]

RAY = Path(sys.executable).parent / "ray"
START_SECONDS = 180  # two nodes starting on a busy 2-core machine: usually 20-40 s
STOP_GRACE_SECONDS = 5  # for a node to end its processes once told to (see _stop)


@dataclass(frozen=True)
class RayCluster:
    address: str  # 127.0.0.1:PORT, for `--ray-address` and ray.init
    env: dict[str, str]  # the environment a driver needs (RAY_AUTH_MODE, and any S3 vars)


def _free_port() -> int:
    """A free port outside 10002-19999, which Ray keeps for its workers' ports."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not 10002 <= port <= 19999:
            return int(port)


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([str(RAY), "start", *args, "--block", "--disable-usage-stats"],
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


# One process waits for the nodes (a process a try cost 0.8 CPU-s of importing Ray, and a start
# on a busy machine took 10-20 tries): it joins once the head answers, then asks for the nodes.
_PROBE = """
import sys, time
import ray
address, nodes, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    try:
        ray.init(address=address, logging_level="ERROR")
        break
    except Exception as exc:  # the head not up yet: Ray raises ConnectionError and others
        ray.shutdown()
        if time.monotonic() > deadline:
            sys.exit(f"the head at {address} did not answer: {exc}")
        time.sleep(1)
alive = 0
while time.monotonic() < deadline:
    alive = sum(n["Alive"] for n in ray.nodes())
    if alive == nodes:
        sys.exit(0)
    time.sleep(0.5)
sys.exit(f"{alive} of {nodes} nodes alive")
"""


def _wait_for_nodes(address: str, env: dict[str, str], nodes: int) -> str:
    """'' once the cluster has `nodes` live nodes, else why not (after START_SECONDS)."""
    proc = subprocess.run([sys.executable, "-c", _PROBE, address, str(nodes),
                           str(START_SECONDS)], env=env, capture_output=True, text=True,
                          timeout=START_SECONDS + 60)
    return "" if proc.returncode == 0 else proc.stderr[-500:] or f"exit {proc.returncode}"


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to each `ray start --block` (it ends its node's processes), then SIGKILL to
    whatever is left of the process groups this fixture created.

    The grace is short: after Ray Train has run on the cluster, the head's `ray start` did not
    exit in 30 s of it (the other node's at once), and every suite ended waiting for it."""
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_SECONDS)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


class ClusterUnavailable(Exception):
    """Why a two-node cluster could not start here."""


@contextmanager
def two_node_cluster(extra_env: dict[str, str] | None = None) -> Iterator[RayCluster]:
    """A head and a second node (1 CPU each) on a free port, ended on exit.

    Raises:
        ClusterUnavailable: the `ray` command is missing or the nodes did not come up.
    """
    if not RAY.exists():
        raise ClusterUnavailable(f"no `ray` command beside {sys.executable}")
    env = {**os.environ, **(extra_env or {}), "RAY_AUTH_MODE": "token"}
    token = subprocess.run([str(RAY), "get-auth-token", "--generate"], env=env,
                           capture_output=True, text=True, timeout=60)
    if token.returncode != 0:
        raise ClusterUnavailable(f"`ray get-auth-token --generate` failed: {token.stderr[-300:]}")
    temp = Path(tempfile.mkdtemp(prefix="rc-"))  # short: Ray's socket paths have a limit
    port = _free_port()
    address = f"127.0.0.1:{port}"
    procs = [_start(["--head", "--port", str(port), "--num-cpus", "1",
                     "--include-dashboard=false", "--temp-dir", str(temp)],
                    env, temp / "head.log")]
    try:
        procs.append(_start(["--address", address, "--num-cpus", "1", "--temp-dir", str(temp)],
                            env, temp / "node.log"))
        why = _wait_for_nodes(address, env, 2)
        if why:
            raise ClusterUnavailable(f"a two-node Ray cluster did not start on {address}: {why}")
        yield RayCluster(address, {k: v for k, v in env.items()
                                   if k == "RAY_AUTH_MODE" or k.startswith("AWS_")})
    finally:
        _stop(procs)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster(s3_server: object) -> Iterator[RayCluster]:
    """The two-node cluster for a test session; skips, saying why, if it cannot start.

    It starts after the S3 server (tests/s3.py), whose AWS_* variables the nodes must inherit
    to reach it: a node's environment is fixed when it starts.
    """
    try:
        with two_node_cluster() as cluster:
            yield cluster
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))

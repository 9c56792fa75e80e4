"""The dashboard under load while a run goes: benchmarks/dashboard.py, checked, not just run."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCH = REPO / "benchmarks" / "dashboard.py"


def _bench(*args: str, timeout: float) -> str:
    done = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    return done.stdout


def _check(out: str) -> float:
    """No request failed, pages were served, updates were pushed within 2 s (median)."""
    assert re.search(r"^errors: 0\b", out, re.M), out
    for kind in ("page",):
        count = re.search(rf"^{kind}\s+(\d+) requests\s+p50\s+([\d.]+) ms\s+p95\s+([\d.]+)",
                          out, re.M)
        assert count and int(count.group(1)) > 0, (kind, out)
    # The median: a single probe can wait longer while the run saturates both cores.
    delay = re.search(r"median ([\d.]+) s, max [\d.]+ s \(bound 2 s\)", out)
    assert delay and float(delay.group(1)) < 2.0, out
    slowdown = re.search(r"slowdown ([+-][\d.]+)%", out)
    assert slowdown, out
    return float(slowdown.group(1))


@pytest.mark.e2e
def test_dashboard_benchmark_smoke():
    _check(_bench("--smoke", timeout=300))


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fifty_clients_while_a_million_row_run_goes():
    # The slowdown's target (<= 5 %) is a benchmark figure (benchmarks/DASHBOARD.md), not a
    # timed assertion: on a shared 2-core machine one repeat swings by tens of percent.
    _check(_bench("--repeats", "1", timeout=1800))

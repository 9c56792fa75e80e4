"""The soak's 3-minute smoke (benchmarks/soak.py --smoke, issue 29) in the slow tier, so that it
cannot rot: every fault kind injected, then the audit's zeros."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SEED = 3  # a fixed seed: the same faults, manual runs and input parts on every run


@pytest.mark.timeout(1500)  # 3 min of chaos, the drain and the audit: 5-6 min here, 2 cores
@pytest.mark.skipif(os.geteuid() != 0, reason="the soak mounts a tmpfs (root only)")
def test_soak_smoke_injects_every_fault_kind_and_its_audit_finds_nothing(tmp_path):
    base = tmp_path / "soak"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "soak.py"), "--smoke",
                           "--seed", str(SEED), "--base", str(base),
                           "--out", str(tmp_path / "SOAK.md")],
                          capture_output=True, text=True, timeout=1400)
    said = f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    summary = json.loads((base / "summary.json").read_text())
    assert {kind: counts.get("injected", 0) for kind, counts in summary["faults"].items()
            if not counts.get("injected")} == {}, said
    ticks, runs = summary["ticks"], summary["runs"]
    assert {"lost": ticks["lost"], "duplicate": ticks["duplicate"],
            "outside": ticks["outside"], "no_run": ticks["no_run"],
            "stuck ticks": ticks["stuck"], "stuck runs": runs["stuck"],
            "not succeeded": runs["not_succeeded"],
            "divergent": summary["bytes"]["divergent"], "verify": summary["verify"],
            "orphans": summary["orphans"], "leftovers": summary["leftovers"]} == {
        "lost": [], "duplicate": [], "outside": [], "no_run": [], "stuck ticks": [],
        "stuck runs": [], "not succeeded": [], "divergent": [], "verify": [], "orphans": [],
        "leftovers": []}, said
    assert summary["bytes"]["compared"] > 0 and summary["dashboard_ok"], said
    assert done.returncode == 0, said

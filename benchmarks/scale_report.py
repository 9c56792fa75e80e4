"""benchmarks/dashboard_scale.py's figures as DASHBOARD_SCALE.md: machine, versions, set-up,
p50/p95/max per page against the target, and the figures of a baseline beside them."""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["machine", "percentile", "report"]

TARGET_MS = 100.0  # issue 27: "the runs page p95 < 100 ms and the run page p95 < 100 ms"
PACKAGES = ("SQLAlchemy", "starlette", "uvicorn", "httptools", "Jinja2", "psycopg", "httpx")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation, as numpy's default."""
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def machine() -> dict[str, Any]:
    """Cores, memory, CPU model, load, versions and the commit measured."""
    model = next((line.split(":", 1)[1].strip() for line in
                  Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    memory = next((int(line.split()[1]) // 1024 // 1024 for line in
                   Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), 0)
    versions = {"Python": platform.python_version(), "SQLite": sqlite3.sqlite_version}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    here = Path(__file__).resolve().parent
    commit = subprocess.run(["git", "-C", str(here), "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip()
    return {"cores": os.cpu_count(), "memory_gib": memory, "cpu": model,
            "system": f"{platform.system()} {platform.release()}", "versions": versions,
            "commit": commit, "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}


def _figures(case: dict[str, Any]) -> tuple[float, float, float] | None:
    seconds = case["seconds"]
    if not seconds:
        return None
    ms = [s * 1e3 for s in seconds]
    return statistics.median(ms), percentile(ms, 95), max(ms)


def _targeted(name: str) -> bool:
    """The pages the acceptance line names: the runs page and the run page (not the JSON,
    not the stage page, not a reload the LiveCache answers)."""
    return name.startswith(("runs page", "run page")) and "reloaded" not in name


def _row(name: str, case: dict[str, Any], beside: list[dict[str, Any] | None]) -> str:
    """A page's row: p50 / p95 of each version beside, then this one's p50 / p95 / max."""
    shown = []
    for other in beside:
        was = _figures(other) if other else None
        shown.append(f"{was[0]:.1f} / {was[1]:.1f}" if was else "—")
    now = _figures(case)
    if now is None:
        return "| " + " | ".join([name, *shown, "— (no such page)", "", "", ""]) + " |"
    p50, p95, top = now
    met = ("**yes**" if p95 < TARGET_MS else "**NO**") if _targeted(name) else ""
    errors = f" ({len(case['errors'])} errors)" if case["errors"] else ""
    return "| " + " | ".join([name, *shown, f"{p50:.1f} / **{p95:.1f}** / {top:.1f}{errors}",
                              str(len(case["seconds"])), f"{(case['bytes'] or 0):,}", met]) + " |"


def report(facts: dict[str, Any], baseline: dict[str, Any] | None, kept: Path | None) -> str:
    """The markdown file: how it was measured, the machine, and a row per page."""
    box = facts.get("machine") or machine()
    seeded = facts.get("seeded") or {}
    # Versions measured beside this one: a --baseline file's (measured apart), and each
    # --against source tree's (measured in turn with this one, under the same load).
    beside = {**({"before (--baseline)": baseline["cases"]} if baseline else {}),
              **facts.get("others", {})}
    lines = [
        f"# The dashboard with {facts['runs']:,} runs in its store",
        "",
        "`.venv/bin/python benchmarks/dashboard_scale.py` (`--smoke`: 300 runs; `--postgres URL`"
        " for an empty PostgreSQL database; `--json`/`--baseline` to keep figures and show "
        "them beside a later measurement). This file is written by that script; what was "
        "slow and what changed is in docs/decisions/0057-ten-thousand-runs.md.",
        "",
        f"**Target** (issue 27, item 6): with {facts['runs']:,} runs seeded, the runs page "
        f"p95 < {TARGET_MS:.0f} ms and the run page p95 < {TARGET_MS:.0f} ms.",
        "",
        "**Set-up.** The store is seeded through `RunWriter`, call by call as the recorder "
        "writes a run (benchmarks/scale_seed.py): four pipelines of 4–6 stages over 90 days, "
        "statuses, triggers and cache hits mixed, every 10th run and the newest 50 with their "
        "per-second samples and progress events, epochs and evaluation metrics, artifacts and "
        "lineage, four schedules and the scheduled runs' ticks; the newest 3 runs are going "
        "(heartbeats every 5 s while measured). The dashboard is a real `seqline dashboard` "
        "process on loopback (uvicorn, as people run it); the client is httpx in the "
        "benchmark's process, one request at a time, gzip accepted, so its own CPU never "
        "competes with the server's for the GIL. Each page gets the same number of requests, "
        "round-robin, after 10 warm-up requests each. A run page request names a run not read "
        "before (the dashboard keeps a run's page for 2 s: a repeated address would measure "
        "that cache, shown apart as \"reloaded\").",
        "",
        f"**Store.** {facts['database']}, {facts['store_bytes'] / 1e6:,.0f} MB; rows: "
        + ", ".join(f"{name} {count:,}" for name, count in sorted(facts["rows"].items())
                    if count) + ".",
    ]
    if seeded:
        lines += ["", f"**Seeded** in {facts['seed_seconds']:.0f} s: statuses "
                  + ", ".join(f"{k} {v:,}" for k, v in sorted(seeded["statuses"].items()))
                  + "; pipelines " + ", ".join(f"{k} {v:,}" for k, v in
                                               sorted(seeded["pipelines"].items()))
                  + "; triggers " + ", ".join(f"{k} {v:,}" for k, v in
                                              sorted(seeded["triggers"].items()))
                  + f"; {seeded['sampled']:,} runs with samples."]
    lines += ["", f"Opening the store (migrating it to head) took {facts['open_seconds']:.2f} s"
              + (f" (a store kept at {kept})." if kept else "."), "",
              f"**Machine** ({box['when']}, commit {box['commit']}): {box['cores']} cores "
              f"({box['cpu']}), {box['memory_gib']} GiB, {box['system']}; load average "
              f"{facts['load'][0]:.2f} before, {facts['load'][1]:.2f} after (the machine is "
              "shared with other jobs). **Versions:** "
              + ", ".join(f"{k} {v}" for k, v in box["versions"].items()) + ".", "",
              "Milliseconds, as the client saw them (request sent → body read).", "",
              "| " + " | ".join(["page", *(f"{label}: p50 / p95" for label in beside),
                                 "this checkout: p50 / **p95** / max", "requests", "bytes",
                                 f"p95 < {TARGET_MS:.0f} ms"]) + " |",
              "| --- " * (len(beside) + 5) + "|"]
    lines += [_row(name, case, [cases.get(name) for cases in beside.values()])
              for name, case in facts["cases"].items()]
    if baseline:
        lines += ["", f"\"Before\": the same script at commit "
                  f"{baseline.get('machine', {}).get('commit', '?')} "
                  f"({baseline.get('machine', {}).get('when', '?')})."]
    paths = {name: case["path"] for name, case in facts["cases"].items() if case["path"]}
    lines += ["", "Addresses (the first of each page's):", ""]
    lines += [f"- {name}: `{path}`" for name, path in paths.items()]
    return "\n".join(lines) + "\n"

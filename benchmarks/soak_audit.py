"""The soak's audit: the run store's ticks and runs, every successful run's bytes against an
undisturbed run of the same input (recomputed with the chaos off), `seqline verify` on each,
and what was left behind (temporary folders; the harness counts orphan processes itself)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from itertools import accumulate
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from seqline.orchestration.store import RunStore
from seqline.orchestration.store.tables import runs, stage_runs, ticks

__all__ = ["audit_bytes", "audit_runs", "audit_ticks", "audit_verify", "leftovers"]

STAGES = ("read", "write", "features")


def minutes_between(since: datetime, end: datetime) -> list[datetime]:
    """Every fire time of `* * * * *` in (since, end], computed here, not by seqline."""
    fire = since.replace(second=0, microsecond=0) + timedelta(minutes=1)
    found = []
    while fire <= end:
        found.append(fire)
        fire += timedelta(minutes=1)
    return found


def audit_ticks(store: RunStore, names: list[str], end: datetime) -> dict[str, Any]:
    """Each schedule's fire times in (its since, end]: exactly one scheduled tick each; each
    tick a run in the store, or a reason; none left queued or launching."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(ticks)).all()
        run_ids = {r.run_id for r in conn.execute(select(runs.c.run_id))}
    lost, duplicate, no_run, stuck, outside = [], [], [], [], []
    reasons: Counter[str] = Counter()
    for name in names:
        since = store.schedules.get_schedule(name).since
        mine = Counter(t.fire_time for t in rows if t.schedule == name and
                       t.trigger == "schedule")
        expected = minutes_between(since, end)
        lost += [f"{name} {f:%H:%M}" for f in expected if mine[f] == 0]
        duplicate += [f"{name} {f:%H:%M}" for f in expected if mine[f] > 1]
        outside += [f"{name} {f:%H:%M}" for f in mine if f not in set(expected)]
    for t in rows:
        label = f"{t.schedule} {t.trigger} {t.fire_time:%H:%M} ({t.status})"
        if t.status in ("queued", "launching"):
            stuck.append(label)
        elif t.status == "launched" and t.run_id not in run_ids:
            no_run.append(f"{label}: run {t.run_id} is not in the store")
        elif t.status in ("skipped", "failed"):
            if not t.reason:
                no_run.append(f"{label}: no reason")
            # a reason names its run: counted apart from the id, so like reasons add up
            why = (t.reason or "?").replace(t.run_id or "\0", "ID").split(":")[0]
            reasons[f"{t.status}: {why}"] += 1
    return {"ticks": len(rows), "scheduled": sum(t.trigger == "schedule" for t in rows),
            "lost": lost, "duplicate": duplicate, "outside": outside, "no_run": no_run,
            "stuck": stuck, "reasons": dict(reasons)}


def audit_runs(store: RunStore) -> dict[str, Any]:
    """Every run's final status (as stored, and as shown), and the blocks retried."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(runs.c.run_id, runs.c.status, runs.c.trigger)).all()
        retries = conn.execute(select(func.coalesce(func.sum(stage_runs.c.block_retries), 0))
                               ).scalar_one()
    shown = {r["run_id"]: r["status"] for r in store.list_runs_shown(limit=100_000)}
    return {"runs": len(rows), "status": dict(Counter(r.status for r in rows)),
            "stuck": sorted(r.run_id for r in rows if r.status in ("running", "queued")
                            or shown.get(r.run_id) in ("running", "queued")),
            "not_succeeded": sorted(f"{r.run_id} ({r.status})" for r in rows
                                    if r.status != "succeeded"),
            "succeeded": sorted(r.run_id for r in rows if r.status == "succeeded"),
            "block_retries": int(retries)}


def _fingerprint(run_dir: Path) -> dict[str, Any]:
    """What must be identical: each stage's records, seq digest and shards (path, sha256)."""
    found = {}
    for stage in STAGES:
        manifest = json.loads((run_dir / stage / "manifest.json").read_text())
        found[stage] = (manifest.get("records_out"), manifest.get("seq_digest"),
                        [(s["path"], s["sha256"]) for s in manifest.get("shards") or []])
    return found


def audit_bytes(root: Path, succeeded: list[str], rows: list[int], project: Path,
                calm: Path, seqline: str, env: dict[str, str]) -> dict[str, Any]:
    """Each successful run against an undisturbed local run of the same input.

    A run's input is the first N parts of the input folder (parts are only ever added); its
    ingest's record count names N, since each part adds at least one row.
    """
    by_total = {total: n for n, total in enumerate(accumulate(rows), start=1)}
    inputs: dict[str, int] = {}
    divergent: list[str] = []
    for run_id in succeeded:
        records = json.loads((root / "runs" / run_id / "read" / "manifest.json").read_text()
                             ).get("records_out")
        if records not in by_total:
            divergent.append(f"{run_id}: {records} records is no prefix of the input parts")
        else:
            inputs[run_id] = by_total[records]

    def recompute(n: int) -> dict[str, Any]:
        folder = calm / f"parts-{n}"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(project, folder, ignore=shutil.ignore_patterns("in", "__pycache__"))
        (folder / "in").mkdir()
        for part in sorted((project / "in").glob("part-*.csv"))[:n]:
            shutil.copy(part, folder / "in" / part.name)
        done = subprocess.run([seqline, "-q", "run", str(folder / "pipeline.yaml"), "--root",
                               str(folder / "root"), "--run-id", "calm", "--no-cache",
                               "--no-verify"], env=env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode:
            raise RuntimeError(f"the undisturbed run of {n} parts failed: {done.stderr[-2000:]}")
        return _fingerprint(folder / "root" / "runs" / "calm")

    with ThreadPoolExecutor(2) as pool:
        wanted = sorted(set(inputs.values()))
        undisturbed = dict(zip(wanted, pool.map(recompute, wanted), strict=True))
    for run_id, n in sorted(inputs.items()):
        got = _fingerprint(root / "runs" / run_id)
        for stage in STAGES:
            if got[stage] != undisturbed[n][stage]:
                divergent.append(f"{run_id}: stage {stage} differs from an undisturbed run "
                                 f"of {n} parts")
    return {"compared": len(inputs), "inputs": len(set(inputs.values())),
            "divergent": divergent}


def audit_verify(root: Path, succeeded: list[str], seqline: str,
                 env: dict[str, str], in_process: bool = False) -> list[str]:
    """`seqline verify` on each successful run: the ids it did not pass.

    With `in_process`, the function the command calls runs here (the smoke's way: a `seqline`
    process per run costs about a CPU-second, most of it imports).
    """
    if in_process:
        from seqline.orchestration.verify import verify_run

        failed = []
        for run_id in succeeded:
            checks = verify_run(root, run_id)
            if not all(c.ok for c in checks):
                failed.append(f"{run_id}: {sum(len(c.problems) for c in checks)} problem(s)")
        return failed

    def one(run_id: str) -> str | None:
        done = subprocess.run([seqline, "-q", "verify", run_id, "--root", str(root)], env=env,
                              capture_output=True, text=True, timeout=300)
        return None if done.returncode == 0 else f"{run_id}: exit {done.returncode}"

    with ThreadPoolExecutor(2) as pool:
        return [r for r in pool.map(one, succeeded) if r]


def leftovers(root: Path, tmp: Path, store: RunStore, started: set[int]) -> list[str]:
    """Temporary folders left: a stage's `.<stage>.tmp-*` under a run, `seqline-*` scratch
    folders in the runs' temp folder (the soak gives its processes one of their own), and
    those of the soak's drivers in /tmp, where a local Ray's go (its sockets do not fit under
    a longer temp folder): drivers the harness started, and those of the scheduler's ticks."""
    with store.engine.connect() as conn:
        drivers = started | {p for p in conn.execute(select(ticks.c.pid)).scalars() if p}
    left = [str(p) for p in (root / "runs").glob("*/.*.tmp-*")]
    left += [str(p) for p in tmp.glob("seqline-*")]
    left += [str(p) for p in Path("/tmp").glob("seqline-*-*")
             if any(f"-{pid}-" in p.name for pid in drivers)]
    return sorted(left)

"""The soak's set-up: its options (the full soak and the lean smoke), the project it schedules
(pipeline, function, input parts), the tmpfs root, and small helpers of the harness."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

__all__ = ["MAX_RESUMES", "PIPELINE", "SEQLINE", "add_part", "answers", "free_port", "live",
           "manual_runner", "mount_tmpfs", "parse_args", "schedules_of", "summary_clean",
           "write_project"]

SEQLINE = str(Path(sys.executable).parent / "seqline")
# Tries to finish one run; past them it counts as not succeeded. Ten (six before the mean
# gap went from 6 s to 4.5 s): a full disk comes every 27 s on average, and a run late in
# the hour has 40 s of work.
MAX_RESUMES = 10
# The chaos window of an hour is 3,545 s (a 45 s warm-up, a 10 s quiet tail): at a mean gap
# of 4.5 s, about 790 faults in rounds of the six kinds, 132 of each for seed 1 and at least
# 118 for every seed of 1-200 (at 6 s, 98: fewer than 100 even if every fault hit).
MEAN_GAP_S = 4.5
SMOKE_MEAN_GAP_S = 6.0  # the smoke's 3 minutes: each kind a few times (its plan as before)
# How long a fault that finds no target waits for one (tried once a second): both schedules
# start a run every minute, and a killed scheduler or dashboard is back within seconds.
PATIENCE_S = 120.0
SMOKE_PATIENCE_S = 75.0
PIPELINE = """\
name: soak
stages:
  - {name: read, component: ingest, params: {format: csv, paths: ["in/*.csv"], block_records: 10}}
  - {name: write, component: tfrecord_write, params: {shard_records: 50}}
  - {name: features, component: preprocess, params: {fn: "soakfns:work", fn_kwargs: {ms: MS}}}
"""
FNS = '''\
import time

import pyarrow.compute as pc


def work(batch, ms=0):
    """Some work per block (a sleep), then a column from the row's part and value."""
    time.sleep(ms / 1000)
    return batch.append_column("y", pc.add(pc.multiply(batch.column("x"), 3), batch.column("v")))
'''
# name -> (runner, overlap). Both `* * * * *`.
SCHEDULES = {"quick": ("local", "queue"), "onray": ("ray", "skip")}
# The smoke's: no Ray. A Ray run costs about 5 CPU-seconds more than a local one (its GCS,
# raylet and workers start each time), and no fault kind needs Ray: a worker kill hits the
# local runner's forked workers as well. The Ray runner's faults are the full soak's.
SMOKE_SCHEDULES = {"quick": ("local", "queue"), "skippy": ("local", "skip")}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The soak's options; `--smoke` is 3 minutes, lean in CPU (the slow test tier)."""
    parser = argparse.ArgumentParser(description="Soak: schedules under seeded chaos, then "
                                                 "an audit of every tick and every byte")
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mean-gap", type=float, default=None,
                        help=f"mean seconds between faults (default {MEAN_GAP_S:g}; "
                             f"--smoke {SMOKE_MEAN_GAP_S:g})")
    parser.add_argument("--tmpfs-mb", type=int, default=128)
    parser.add_argument("--smoke", action="store_true",
                        help="3 minutes, lean in CPU: local runner only, fewer input parts, "
                             "verify in-process (the slow test tier)")
    parser.add_argument("--base", type=Path, default=None,
                        help="where everything goes (default: /tmp/soak-SEED-PID)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "SOAK.md",
                        help="the Markdown file whose table is replaced")
    args = parser.parse_args(argv)
    # Seconds a fault that finds no target (no run going, a hold still on) waits for one
    # before it counts as "no target": the soak needs 100 of every kind, the smoke one.
    args.patience = PATIENCE_S
    args.first_parts = 12  # input parts at the start: about 7 s of work per run at first
    if args.smoke:
        args.minutes, args.tmpfs_mb, args.patience, args.first_parts = 3, 64, \
            SMOKE_PATIENCE_S, 6
    if args.mean_gap is None:
        args.mean_gap = SMOKE_MEAN_GAP_S if args.smoke else MEAN_GAP_S
    return args


def schedules_of(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    """The schedules the soak adds: name -> (runner, overlap)."""
    return SMOKE_SCHEDULES if args.smoke else SCHEDULES


def manual_runner(args: argparse.Namespace, planned: str) -> str:
    """The runner of a manual run: the plan's (drawn from the seed), local in the smoke."""
    return "local" if args.smoke else planned


def write_project(project: Path, block_ms: int) -> None:
    """The pipeline and its function (`block_ms` of sleep per 10-row block)."""
    (project / "in").mkdir(parents=True, exist_ok=True)
    (project / "pipeline.yaml").write_text(PIPELINE.replace("MS", str(block_ms)))
    (project / "soakfns.py").write_text(FNS)


def add_part(project: Path, seed: int, index: int, rows: int) -> None:
    """One more input part, written under another name then renamed (never half-seen)."""
    rng = random.Random(f"{seed}-{index}")
    text = "v,x\n" + "".join(f"{index},{rng.randint(0, 10**6)}\n" for _ in range(rows))
    (project / "in" / f".part-{index:04d}.tmp").write_text(text)
    os.rename(project / "in" / f".part-{index:04d}.tmp",
              project / "in" / f"part-{index:04d}.csv")


def mount_tmpfs(folder: Path, megabytes: int) -> str | None:
    """`folder` on a tmpfs of its own; None if mounting failed (the reason is printed)."""
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs",
                           str(folder)], capture_output=True, text=True)
    if done.returncode:
        print(f"mount failed, no disk_full faults: {done.stderr.strip()}", file=sys.stderr)
        return None
    return str(folder)


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (never the dashboard's default)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int) -> bool:
    """Whether the dashboard on `port` answers /api/runs within about 30 s."""
    for _ in range(30):
        with contextlib.suppress(OSError), urllib.request.urlopen(
                f"http://127.0.0.1:{port}/api/runs", timeout=5) as answer:
            return answer.status == 200
        time.sleep(1)
    return False


def live(process: psutil.Process) -> bool:
    """Whether a process still runs (a zombie does not)."""
    with contextlib.suppress(psutil.Error):
        return process.status() != psutil.STATUS_ZOMBIE
    return False


def summary_clean(summary: dict) -> bool:
    """The audit's zeros: what the acceptance asks for."""
    return not any([summary["ticks"][k] for k in ("lost", "duplicate", "outside", "no_run",
                                                   "stuck")] +
                   [summary["runs"]["stuck"], summary["runs"]["not_succeeded"],
                    summary["bytes"]["divergent"], summary["verify"], summary["orphans"],
                    summary["leftovers"], not summary["dashboard_ok"]])

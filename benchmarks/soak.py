"""Soak: schedules firing every minute while a seeded chaos loop kills workers, drivers, the
scheduler and the dashboard, fills the disk and locks the store; then an audit of every tick
and every byte (issue 29).

Run as root: `nice -n 19 .venv/bin/python benchmarks/soak.py --minutes 60 --seed 1`, or
`--smoke` (3 minutes, lean: what tests/slow/test_soak_smoke.py runs). Everything goes under
/tmp/soak-SEED-PID/: the project (pipeline, function, input parts), the root (a tmpfs of
`--tmpfs-mb`, unmounted at the end; its store and logs are copied to evidence/), the logs, the
runs' own temp folder, the undisturbed recomputes. It prints one table, writes it to
benchmarks/SOAK.md (`--out`), with every detail in summary.json beside the logs, and exits 1
if the audit found anything.

What runs: schedule `quick` (local runner, overlap queue) and `onray` (Ray, overlap skip),
both `* * * * *`, over an input folder that gains a part every minute; manual runs (local or
Ray); one backfill of three past fire times of `quick`. Faults come every 4.5 s on average
(about 130 of each kind in an hour); one that finds no target (no run going, another hold
still on) waits for one, up to 120 s (soak_faults).

The supervisor, as systemd would: a killed (or exited) scheduler or dashboard is started again
after 1 s; a run whose driver was killed, or that failed (a full disk, a store that refused a
write), is finished with `seqline run --resume --run-id ID` once its driver is gone - not left
to the next tick, whose input differs: its fire time would never get its run.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psutil
from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak_audit  # noqa: E402
import soak_chaos  # noqa: E402
import soak_end  # noqa: E402
import soak_faults  # noqa: E402
import soak_setup  # noqa: E402
from soak_report import table, write_markdown  # noqa: E402
from soak_setup import MAX_RESUMES, SEQLINE  # noqa: E402

from seqline.orchestration.processes import pid_alive  # noqa: E402
from seqline.orchestration.store import RunStore  # noqa: E402
from seqline.orchestration.store.liveness import shown_status  # noqa: E402
from seqline.orchestration.store.tables import runs  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.seconds = args.minutes * 60
        self.plan = soak_chaos.make_plan(args.seed, self.seconds, args.mean_gap,
                                         args.first_parts)
        self.schedules = soak_setup.schedules_of(args)
        self.base = args.base or Path(f"/tmp/soak-{args.seed}-{os.getpid()}")
        self.project, self.root, self.logs = (self.base / d for d in ("project", "root", "logs"))
        self.tmp, self.calm = self.base / "t", self.base / "calm"
        for folder in (self.project / "in", self.root, self.logs, self.tmp, self.calm):
            folder.mkdir(parents=True, exist_ok=True)
        # The runs' temp folder, by a short name: Ray's sockets go under it, and a Unix
        # socket's path has at most 107 bytes (seqline's Ray session adds about 95).
        self.tmp_link = Path(f"/tmp/sk{os.getpid()}")
        self.tmp_link.symlink_to(self.tmp)
        self.env = {**os.environ, "TMPDIR": str(self.tmp_link)}
        self.me = psutil.Process()
        self.owned: dict[str, subprocess.Popen[bytes]] = {}  # name -> a process we started
        self.faults: list[dict] = []
        self.kinds: dict[str, Counter[str]] = {k: Counter() for k in soak_chaos.KINDS}
        self.resumes: Counter[str] = Counter()  # run id -> tries
        self.resumed_ok: set[str] = set()
        self.resume_ended: dict[str, float] = {}
        self.exits: Counter[str] = Counter()  # scheduler/dashboard exits we did not cause
        self.killed: set[int] = set()
        self.rows: list[int] = []
        self.running: set[str] = set()
        self.holds: list[threading.Thread] = []
        self.waiting: list[soak_chaos.Fault] = []  # faults waiting for a target (soak_faults)
        self.started: set[int] = set()  # every pid we started (drivers among them)
        self.backfill: list[str] = []  # its command, run again if a fault stops it
        self.backfills_failed = self.backfill_tries = 0
        self.port = soak_setup.free_port()
        self.tmpfs = soak_setup.mount_tmpfs(self.root, args.tmpfs_mb)

    # -- set-up -----------------------------------------------------------------------------

    def set_up(self) -> None:
        # About 7 s of work per run at first, 20 s after 20 minutes (2 local workers): a run
        # is going most of the time, for the faults to hit.
        soak_setup.write_project(self.project, block_ms=300)
        for _, rows in [p for p in self.plan.parts if p[0] == 0.0]:
            self._add_part(rows)
        self.store = RunStore.open(self.root)
        for name, (runner, overlap) in self.schedules.items():
            self._cli("schedule", "add", name, str(self.project / "pipeline.yaml"), "--cron",
                      "* * * * *", "--runner", runner, "--overlap", overlap)
        self.since = {n: self.store.schedules.get_schedule(n).since for n in self.schedules}
        self._start("scheduler", [SEQLINE, "scheduler", "--root", str(self.root)])
        self._start("dashboard", [SEQLINE, "dashboard", "--root", str(self.root), "--port",
                                  str(self.port)])

    def _cli(self, *args: str) -> None:
        subprocess.run([SEQLINE, *args, "--root", str(self.root)], check=True, env=self.env,
                       cwd=self.project, capture_output=True)

    def _add_part(self, rows: int) -> None:
        soak_setup.add_part(self.project, self.args.seed, len(self.rows), rows)
        self.rows.append(rows)

    def _start(self, name: str, command: list[str]) -> None:
        with open(self.logs / f"{name}.log", "ab") as log:
            self.owned[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, cwd=self.project,
                                                env=self.env)
        self.started.add(self.owned[name].pid)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        t0 = time.monotonic()
        parts = [p for p in self.plan.parts if p[0] > 0]
        faults, manual = list(self.plan.faults), list(self.plan.manual)
        backfill = [self.plan.backfill_at]
        last_look = 0.0
        while (now := time.monotonic() - t0) < self.seconds:
            while parts and parts[0][0] <= now:
                self._add_part(parts.pop(0)[1])
            while manual and manual[0][0] <= now:
                at, runner = manual.pop(0)
                run_id = f"manual-{len(self.plan.manual) - len(manual):03d}"
                self._start(run_id, [SEQLINE, "run", "pipeline.yaml", "--root", str(self.root),
                                     "--run-id", run_id, "--runner",
                                     soak_setup.manual_runner(self.args, runner)])
            if backfill and backfill[0] <= now:
                backfill.pop()
                start = self.since["quick"].replace(second=0, microsecond=0)
                self.backfill = [SEQLINE, "backfill", "quick", "--root", str(self.root),
                                 "--from", (start - timedelta(minutes=4)).isoformat(),
                                 "--to", (start - timedelta(minutes=2)).isoformat()]
                self._start("backfill", self.backfill)
            while faults and faults[0].at <= now:
                soak_faults.inject(self, faults.pop(0), now)
            if now - last_look >= 1.0:
                self.supervise()
                last_look = now
                soak_faults.retry(self, now)  # once a second: each try walks our processes
            time.sleep(0.2)
        soak_faults.give_up(self)

    def supervise(self, restart: bool = True) -> None:
        """Reap, restart what died, resume what a fault stopped."""
        self._reap()
        for name in ("scheduler", "dashboard"):
            process = self.owned.get(name)
            if process is not None and process.poll() is not None:
                if process.pid not in self.killed:
                    self.exits[f"{name} exited {process.returncode}"] += 1
                del self.owned[name]
                if restart:
                    time.sleep(1)  # systemd's RestartSec
                    self._start(name, [SEQLINE, name, "--root", str(self.root)] +
                                (["--port", str(self.port)] if name == "dashboard" else []))
        # A backfill stopped by a fault (a store that could not record a tick) says "run the
        # same command again": a wrapper does, else its queued fire times never run.
        if self.backfill_tries < self.backfills_failed <= MAX_RESUMES and "backfill" not in \
                self.owned and self._backfill_left():
            self.backfill_tries += 1
            self._start("backfill", self.backfill)
        try:
            with self.store.engine.connect() as conn:
                rows = conn.execute(select(runs.c.run_id, runs.c.status, runs.c.runner,
                                           runs.c.heartbeat, runs.c.started, runs.c.host,
                                           runs.c.pid)).all()
        except Exception as exc:  # noqa: BLE001 - a locked or full store: look again soon
            print(f"supervisor: the store failed a read: {exc}", file=sys.stderr)
            return
        alive = soak_chaos.drivers(self.me)
        self.running = set()
        for r in rows:
            shown = shown_status(r.status, r.heartbeat, r.started, r.host, r.pid)
            if shown == "running":
                self.running.add(r.run_id)
            if shown == "succeeded" and self.resumes[r.run_id]:
                self.resumed_ok.add(r.run_id)
            if shown not in ("interrupted", "failed", "cancelled") or r.run_id in alive:
                continue
            if (r.pid and pid_alive(r.pid)) or self.resumes[r.run_id] >= MAX_RESUMES:
                continue
            if time.monotonic() - self.resume_ended.get(r.run_id, 0) < 3:
                continue
            self.resumes[r.run_id] += 1
            self._start(f"resume-{r.run_id}", [SEQLINE, "run", "pipeline.yaml", "--root",
                                               str(self.root), "--run-id", r.run_id,
                                               "--resume", "--runner", r.runner])

    def _backfill_left(self) -> bool:
        """Whether a backfill tick waits (its command stopped before launching it); a
        backfill that ended non-zero as one of its runs failed leaves none."""
        with contextlib.suppress(Exception):  # a locked or full store: look again soon
            return bool(self.store.schedules.ticks_with_status(("queued", "launching"),
                                                               trigger="backfill"))
        return False

    def _reap(self) -> None:
        """Collect our ended children, and the orphans we inherit as subreaper."""
        for name, process in list(self.owned.items()):
            if name.startswith(("manual-", "resume-", "backfill")) and \
                    process.poll() is not None:
                if name.startswith("resume-"):
                    self.resume_ended[name.removeprefix("resume-")] = time.monotonic()
                if name == "backfill" and process.returncode:
                    self.backfills_failed += 1
                del self.owned[name]
        ours = {p.pid for p in self.owned.values()}
        for child in self.me.children():
            with contextlib.suppress(psutil.Error, ChildProcessError):
                if child.pid not in ours and child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)

    # -- the end ----------------------------------------------------------------------------

    def audit(self, stopped: datetime) -> dict:
        ticks = soak_audit.audit_ticks(self.store, list(self.schedules), stopped - timedelta(
            seconds=10))
        ran = soak_audit.audit_runs(self.store)
        orphans = soak_end.orphans(self)
        same = soak_audit.audit_bytes(self.root, ran["succeeded"], self.rows, self.project,
                                      self.calm, SEQLINE, self.env)
        return {"minutes": self.args.minutes, "seed": self.args.seed,
                "digest": self.plan.digest(), "faults": {k: dict(v) for k, v in
                                                          self.kinds.items()},
                "disk_full": "on" if self.tmpfs else "skipped: mount failed",
                "ticks": ticks, "runs": ran, "bytes": same,
                "verify": soak_audit.audit_verify(self.root, ran["succeeded"], SEQLINE,
                                                  self.env, in_process=self.args.smoke),
                "resumes": sum(self.resumes.values()), "resumed_ok": len(self.resumed_ok),
                "orphans": orphans,
                "leftovers": soak_audit.leftovers(self.root, self.tmp, self.store, self.started),
                "exits": dict(self.exits), "dashboard_ok": self.dashboard_ok,
                "base": str(self.base)}


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    args = soak_setup.parse_args()
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans come to us, as to systemd
    signal.signal(signal.SIGTERM, _stop)  # so that `soak_end.close` runs
    soak = Soak(args)
    print(f"soak: {args.minutes:g} min, seed {args.seed}, plan digest {soak.plan.digest()}, "
          f"{len(soak.plan.faults)} faults planned; under {soak.base}", flush=True)
    try:
        soak.set_up()
        soak.run()
        stopped = soak_end.drain(soak)
        summary = soak.audit(stopped)
    finally:
        soak_end.close(soak)
    (soak.base / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    text = table(summary)
    print(text)
    write_markdown(args.out, text)
    return 0 if soak_setup.summary_clean(summary) else 1


if __name__ == "__main__":
    sys.exit(main())

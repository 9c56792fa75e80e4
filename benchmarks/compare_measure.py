"""Measuring one process from outside: wall time, peak RSS of its tree, and the CPU around it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

import psutil

__all__ = ["LOG", "BenchError", "Run", "measure"]

TIMEOUT_S = 1800  # one job; a hung engine fails its comparison instead of the whole run


class BenchError(Exception):
    """A job exited non-zero or timed out; the message holds the command and its output."""


@dataclass
class Run:
    """One process: wall seconds, peak RSS of its tree (MB), its output and what it reported."""

    wall: float
    peak_mb: float
    output: str
    result: dict = field(default_factory=dict)


# Every process measured, for the report's last table: the machine is shared, and the CPU
# that other processes used during a run says how far to trust its figure.
LOG: list[dict] = []


_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
# Linux names each thread's children in /proc (CONFIG_PROC_CHILDREN): the tree is then a
# few small reads a sample. psutil's children(recursive=True) reads every process on the
# machine (~1 ms a sample, 2 % of a core at 20 Hz, on the two cores the job runs on).
_CHILDREN_FILES = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def _tree(pid: int) -> list[int]:
    found = [pid]
    for parent in found:  # (grows as it goes: breadth first)
        with contextlib.suppress(OSError):  # exited meanwhile
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    found.extend(int(c) for c in f.read().split())
    return found


def _sample_tree(proc: psutil.Process, cpu: dict[int, float]) -> int:
    """RSS of the tree now; records each process's CPU seconds so far in `cpu`."""
    if not _CHILDREN_FILES:
        return _sample_tree_psutil(proc, cpu)
    total = 0
    for pid in _tree(proc.pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:  # a worker exited between listing and reading
            continue
        total += int(fields[21]) * _PAGE  # rss, in pages
        cpu[pid] = max(cpu.get(pid, 0.0), (int(fields[11]) + int(fields[12])) / _TICK)
    return total


def _sample_tree_psutil(proc: psutil.Process, cpu: dict[int, float]) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):  # a worker exited between listing and reading
            total += p.memory_info().rss
            times = p.cpu_times()
            cpu[p.pid] = max(cpu.get(p.pid, 0.0), times.user + times.system)
    return total


def _busy(times) -> float:
    return times.user + times.nice + times.system + times.irq + times.softirq


def measure(cmd: list[str], env: dict[str, str], label: str) -> Run:
    """Run `cmd` to its end; wall time, peak tree RSS, output, and its `RESULT {json}` line.

    Also logs the CPU the process tree used and the CPU every other process on the machine
    used meanwhile (host busy time minus the tree's, both as average cores; the tree's is
    sampled every 50 ms, so it misses a short-lived process's last moments).
    """
    host = psutil.cpu_times()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    peak, cpu, stop = [0], {}, threading.Event()

    def sample() -> None:
        with contextlib.suppress(psutil.Error):
            tree = psutil.Process(proc.pid)
            while not stop.wait(0.05):
                peak[0] = max(peak[0], _sample_tree(tree, cpu))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the group this Popen started, nothing else
        output, _ = proc.communicate()
        raise BenchError(f"timed out after {TIMEOUT_S} s: {' '.join(cmd)}\n"
                         f"{output[-3000:]}") from None
    finally:
        stop.set()
        sampler.join()
    wall = time.perf_counter() - start
    now = psutil.cpu_times()
    ours = sum(cpu.values())
    LOG.append({"label": label, "wall": wall, "peak_mb": peak[0] / 2**20, "ours": ours / wall,
                "others": max(0.0, _busy(now) - _busy(host) - ours) / wall,
                "steal": (now.steal - host.steal) / wall, "rc": proc.returncode})
    if proc.returncode:
        raise BenchError(f"exit {proc.returncode}: {' '.join(cmd)}\n{output[-3000:]}")
    result = {}
    for line in output.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    return Run(wall, peak[0] / 2**20, output, result)

"""Print each test tier's count and summed seconds from a JUnit XML report (`make suite`).

With workers side by side the tiers' sums add up to more than the wall time; they say which
tier to look at when the suite grows (decision 48). CPU seconds count each test's own and its
finished child processes' (tests/conftest.py): on two cores, they bound the suite's time.

With `--pacct FILE`, the kernel's process accounting of the run (as root: `accton FILE`
before the suite, `accton off` after) charges every process to the test that started it,
Ray's daemons and killed workers included, which the report's own figures miss: each
process's parent, start and CPU are in the file, and the report says when each test ran on
which worker. What no test started (set-up, lint, other jobs) is listed by command.

Usage: python tests/tier_times.py build/junit.xml [--pacct FILE] [--top 30]
"""

from __future__ import annotations

import argparse
import struct
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field

ACCT_V3 = struct.Struct("<BBHIIIIIIfHHHHHHHH16s")  # linux/acct.h, struct acct_v3
HZ = 100  # AHZ: the units of the times in the file


@dataclass
class Test:
    name: str
    tier: str
    seconds: float
    cpu: float  # the report's: the test's process and its reaped children
    worker: int | None = None
    t0: float = 0.0
    t1: float = 0.0
    charged: float = 0.0  # the accounting's: every process it started


@dataclass
class Process:
    pid: int
    ppid: int
    start: int  # Unix seconds (the file's resolution)
    end: float
    cpu: float
    command: str
    children: list[Process] = field(default_factory=list)


def tests_of(report: str) -> list[Test]:
    tests = []
    for case in ET.parse(report).iter("testcase"):
        parts = case.get("classname", "").split(".")
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        test = Test(f"{case.get('classname')}::{case.get('name')}",
                    parts[1] if len(parts) > 2 and parts[0] == "tests" else "docs",
                    float(case.get("time", 0)), float(props.get("cpu") or 0))
        if "pid" in props:
            test.worker, test.t0, test.t1 = int(props["pid"]), float(props["t0"]), \
                float(props["t1"])
        tests.append(test)
    return tests


def processes_of(pacct: str) -> list[Process]:
    def ticks(c: int) -> int:  # comp_t: 13-bit mantissa, 3-bit base-8 exponent
        return (c & 0x1FFF) << (3 * (c >> 13))

    with open(pacct, "rb") as file:
        data, found = file.read(), []
    for offset in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        (_, _, _, _, _, _, pid, ppid, btime, etime, utime, stime, *_, comm) = \
            ACCT_V3.unpack_from(data, offset)
        found.append(Process(pid, ppid, btime, btime + etime / HZ,
                             (ticks(utime) + ticks(stime)) / HZ,
                             comm.split(b"\0")[0].decode(errors="replace")))
    return found


def charge(tests: list[Test], processes: list[Process]) -> dict[str, float]:
    """Each test's `charged`: the CPU of every process below its worker that started while
    it ran, and a share of the daemons (parent gone) started then. Returns the rest by
    command."""
    by_pid: dict[int, list[Process]] = defaultdict(list)
    for p in processes:
        by_pid[p.pid].append(p)
    on_worker: dict[int, list[Test]] = defaultdict(list)
    for t in tests:
        if t.worker is not None:
            on_worker[t.worker].append(t)
    rest: dict[str, float] = defaultdict(float)
    for p in processes:
        if p.pid in on_worker:  # a worker's own CPU is in the report's figures
            rest["(pytest workers, between tests)"] += max(
                0.0, p.cpu - sum(t.cpu for t in on_worker[p.pid]))
            continue
        top, parent = p, _parent(p, by_pid)
        while parent is not None and parent.pid not in on_worker:
            top, parent = parent, _parent(parent, by_pid)
        running = [t for t in (on_worker[parent.pid] if parent else tests)
                   if t.t0 - 1 <= p.start <= t.t1 + 1]
        if parent is None and top.ppid not in (0, 1):  # another job's: not a daemon of ours
            running = []
        for t in running:
            t.charged += p.cpu / len(running)
        if not running:
            rest[p.command] += p.cpu
    return rest


def _parent(p: Process, by_pid: dict[int, list[Process]]) -> Process | None:
    alive = [q for q in by_pid.get(p.ppid, ()) if q.start <= p.start + 1 and q.end >= p.start - 1]
    return max(alive, key=lambda q: q.start) if alive else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--pacct", help="a process accounting file of the run (acct v3)")
    parser.add_argument("--top", type=int, default=30, help="tests listed by CPU")
    args = parser.parse_args()
    tests = tests_of(args.report)
    rest = charge(tests, processes_of(args.pacct)) if args.pacct else {}
    seconds: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    charged: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for t in tests:
        seconds[t.tier] += t.seconds
        cpu[t.tier] += t.cpu
        charged[t.tier] += t.charged
        count[t.tier] += 1
    print("tier          tests   summed s      CPU s" + ("  charged CPU s" if args.pacct else ""))
    for tier in [*sorted(seconds, key=seconds.__getitem__, reverse=True), "all"]:
        row = [sum(c.values()) if tier == "all" else c[tier]
               for c in (count, seconds, cpu, charged)]
        print(f"{tier:<12} {row[0]:>6} {row[1]:>10.0f} {row[2]:>10.0f}"
              + (f" {row[3]:>14.0f}" if args.pacct else ""))
    if args.pacct:
        print(f"\nThe {args.top} tests that cost the most CPU (charged s, wall s):")
        for t in sorted(tests, key=lambda t: -t.charged)[:args.top]:
            print(f"{t.charged:8.1f} {t.seconds:7.1f}  {t.name[:110]}")
        print("\nCPU no test started, by command (s):")
        for command, spent in sorted(rest.items(), key=lambda kv: -kv[1])[:12]:
            print(f"{spent:8.1f}  {command}")


if __name__ == "__main__":
    main()

"""Print each test tier's count and summed seconds from a JUnit XML report (`make suite`).

With workers side by side the tiers' sums add up to more than the wall time; they say which
tier to look at when the suite grows (decision 48). CPU seconds count each test's own and its
finished child processes' (tests/conftest.py): on two cores, they bound the suite's time."""

import sys
import xml.etree.ElementTree as ET
from collections import Counter


def main(report: str) -> None:
    seconds: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    tests: Counter[str] = Counter()
    for case in ET.parse(report).iter("testcase"):
        parts = case.get("classname", "").split(".")
        tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else "docs"
        seconds[tier] += float(case.get("time", 0))
        cpu[tier] += sum(float(p.get("value", 0)) for p in case.iter("property")
                         if p.get("name") == "cpu")
        tests[tier] += 1
    print("tier          tests   summed s      CPU s")
    for tier in sorted(seconds, key=seconds.__getitem__, reverse=True):
        print(f"{tier:<12} {tests[tier]:>6} {seconds[tier]:>10.0f} {cpu[tier]:>10.0f}")
    print(f"{'all':<12} {sum(tests.values()):>6} {sum(seconds.values()):>10.0f}"
          f" {sum(cpu.values()):>10.0f}")


if __name__ == "__main__":
    main(sys.argv[1])

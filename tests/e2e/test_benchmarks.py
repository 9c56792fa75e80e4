"""benchmarks/compare.py --smoke end to end: it runs every comparison and writes the report.

Nothing about speed is asserted: smoke sizes are too small for the figures to mean anything.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

COMPARISONS = [str(n) for n in range(1, 14)]


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_compare_smoke_writes_a_row_per_comparison(tmp_path):
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "compare.py"), "--smoke",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    text = out.read_text()
    row = re.compile(r"^\| (\d+)(?: \([\w-]+\))? \|")
    lines = [line for line in text.splitlines() if row.match(line)]
    assert sorted({row.match(line).group(1) for line in lines}, key=int) == COMPARISONS, lines
    for line in lines:
        assert "FAILED" not in line, line
        assert line.count(" | ") == 6, line  # 7 columns: # what seqline peer ratio target met
    assert "--one-by-one" in text  # the assembly line's row says what it was run against
    for heading in ("Machine:", "Versions:", "tensorflow", "apache-beam", "ray", "tfx-bsl"):
        assert heading in text

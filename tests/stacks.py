"""What every process under a test was doing when the test timed out: a hang that happens
once in some hundred runs (a CI's) is diagnosed from its failure report, not reproduced.

py-spy (installed with Ray's extras) reads each Python process's stacks from outside, as
`py-spy dump --pid` does, without stopping or changing it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

PY_SPY = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


def dump_descendants(limit: int = 40) -> str:
    """The Python stacks of this process's descendants (at most `limit`), one block each."""
    if PY_SPY is None:
        return "(py-spy is not installed: no stacks)"
    blocks = []
    for child in psutil.Process(os.getpid()).children(recursive=True)[:limit]:
        try:
            title = f"== pid {child.pid} (parent {child.ppid()}): {' '.join(child.cmdline())[:160]}"
        except psutil.Error:
            continue
        try:
            dumped = subprocess.run([PY_SPY, "dump", "--pid", str(child.pid)],
                                    capture_output=True, text=True, timeout=20)
            blocks.append(f"{title}\n{dumped.stdout or dumped.stderr}")
        except subprocess.TimeoutExpired:
            blocks.append(f"{title}\n(py-spy took over 20 s)")
    return "\n".join(blocks) or "(no processes under the test)"

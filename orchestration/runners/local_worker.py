"""What a local worker process runs around each block: a marker saying which block it runs.

A worker that dies abruptly (SIGKILL, the OOM killer, a segfault in native code) leaves its
marker behind; workers the pool stops on purpose afterwards (SIGTERM) remove theirs first. So
after a broken pool the driver knows exactly which blocks killed their workers.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType

from seqline.pipeline.blocks import Block
from seqline.pipeline.stage import BlockResult, MapTask

__all__ = ["init_worker", "marker", "run_marked"]

_running: Path | None = None  # this worker's current marker, if it is running a block


def marker(folder: str, stage: str, index: int, attempt: int) -> Path:
    return Path(folder) / f"{stage}.{index}.{attempt}"


def init_worker() -> None:
    """Installed in each worker: a SIGTERM from the pool removes the marker, then exits."""
    signal.signal(signal.SIGTERM, _stopped)


def _stopped(signum: int, frame: FrameType | None) -> None:
    if _running is not None:
        _running.unlink(missing_ok=True)
    sys.stdout.flush()
    os._exit(128 + signum)  # as the signal would have ended it


def run_marked(task: MapTask, block: Block, folder: str, attempt: int) -> BlockResult:
    """Run `task(block)` with a marker naming the block and attempt while it runs."""
    global _running
    _running = marker(folder, task.stage, block.index, attempt)
    _running.write_text(str(os.getpid()))
    try:
        return task(block)
    finally:
        _running.unlink(missing_ok=True)
        _running = None

"""What a local worker process runs around each block: a marker saying which block it runs.

A worker that dies abruptly (SIGKILL, the OOM killer, a segfault in native code) leaves its
marker behind; workers the pool stops on purpose afterwards (SIGTERM) remove theirs first. So
after a broken pool the driver knows exactly which blocks killed their workers.

A worker also exits when its driver does, however the driver ended (SIGKILL, a reboot of a
container): nothing else would stop it, since a pool worker waits on a queue whose write end
every worker holds, and the fork server lives until its last worker has gone.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from types import FrameType

from seqline.orchestration.runners.forked import exit_with
from seqline.pipeline.blocks import Block
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["init_worker", "marker", "run_marked"]

_running: Path | None = None  # this worker's current marker, if it is running a block


def marker(folder: str, stage: str, index: int, attempt: int) -> Path:
    return Path(folder) / f"{stage}.{index}.{attempt}"


def init_worker(driver: int, markers: str, environment: dict[str, str] | None = None) -> None:
    """Installed in each worker: a SIGTERM from the pool removes the marker, then exits; the
    driver's exit ends the worker too.

    Args:
        driver: the driver's pid.
        markers: the driver's marker folder (removed by the first worker to see it gone).
        environment: the driver's environment as the pool starts. Workers fork from the
            forkserver, which kept the environment of the process's first pool: credentials
            set later (an object store's, in a notebook) must still reach the workers.
    """
    if environment is not None:
        os.environ.update(environment)
        # -q (environment.quiet_engines): a forkserver's workers imported seqline before
        logging.getLogger("seqline").setLevel(environment.get("SEQLINE_LOG_LEVEL", logging.NOTSET))
    signal.signal(signal.SIGTERM, _stopped)
    threading.Thread(target=exit_with, args=(driver, partial(shutil.rmtree, markers, True)),
                     daemon=True, name="seqline-driver-watch").start()


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

"""Imported first by each of seqline's fork servers (forked.py), and by nothing else: a server
whose driver has gone exits at once, without CPython's teardown of every module it preloaded.

That teardown (pandas, Arrow, tfx-bsl, NumPy) took 0.12 s of CPU after each run, and the
server holds its driver's stdout and stderr for its workers: `seqline run ... | tee run.log`,
and any program that reads a run's output to its end, waited for it. Workers never run this:
a forked worker leaves by os._exit already (multiprocessing's forkserver.main). First in the
preload, so that the atexit handlers the other modules register run before it (LIFO).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys


def _exit_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(0)


atexit.register(_exit_now)

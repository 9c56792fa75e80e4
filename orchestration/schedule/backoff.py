"""The scheduler's waits for a run store that refuses it (a full disk, a database away)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

__all__ = ["FIRST_WAIT_S", "LONGEST_WAIT_S", "waits"]

# A disk freed by the next clean-up costs a second. Doubling to at most 30 s (the lease's TTL):
# a store away all night costs two log lines a minute, and the scheduler takes it back within
# 30 s of it taking writes again, as soon as a successor on another host would.
FIRST_WAIT_S = 1.0
LONGEST_WAIT_S = 30.0


def waits(stop: threading.Event) -> Iterator[float]:
    """The waits between tries: each yielded before the caller's try, and waited out after
    it failed (the caller stops iterating once a try succeeds); none once `stop` is set.

    Args:
        stop: the scheduler's stop signal (SIGTERM/SIGINT): it ends a wait at once.

    Example: `for wait in waits(stop): try: acquire(); return True; except
    OperationalError: log(f"… trying again in {wait:.0f} s")` tries at 0, 1, 3, 7, 15, 31,
    61, 91 … s and says 1, 2, 4, 8, 16, 30, 30 … s.
    """
    wait = FIRST_WAIT_S
    while not stop.is_set():
        yield wait
        if stop.wait(wait):
            return
        wait = min(2 * wait, LONGEST_WAIT_S)

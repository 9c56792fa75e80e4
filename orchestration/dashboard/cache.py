"""Answers about a live run, computed once per change of the run however many pages ask."""

from __future__ import annotations

import threading
from collections.abc import Callable

from starlette.responses import Response

__all__ = ["LiveCache"]

# Keys are page addresses of watched runs; a few hundred cover every page of dozens of runs.
MAX_ENTRIES = 512


class LiveCache:
    """Response bodies keyed by address, valid for one version of their run.

    Fifty pages of a running run all re-fetch the same fragment and chart data when it
    changes; the first request computes them and the others wait for it and reuse them. The
    version is the live watcher's count of changes it has seen, read before computing, so an
    answer is never older than the change that made a page ask for it.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, bytes, int, str | None]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: str, version: int | None, compute: Callable[[], Response]) -> Response:
        """The cached answer for `key` at `version`, else `compute()`'s (then cached).

        Args:
            key: the address (path and query).
            version: the run's version, or None when nobody watches it (then no caching).
            compute: makes the answer; its exceptions (a 404) pass through uncached.

        Returns:
            A fresh Response each time (middleware may change a response's headers).
        """
        if version is None:
            return compute()
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            hit = self._entries.get(key)
            if hit is None or hit[0] != version:
                made = compute()
                hit = (version, bytes(made.body), made.status_code, made.media_type)
                with self._guard:
                    self._entries.pop(key, None)
                    self._entries[key] = hit
                    while len(self._entries) > MAX_ENTRIES:  # the oldest first (dict order)
                        self._locks.pop(next(iter(self._entries)), None)
                        self._entries.pop(next(iter(self._entries)))
        _, body, status, media_type = hit
        return Response(body, status_code=status, media_type=media_type,
                        headers={"Cache-Control": "no-store"})

"""Answers about a live run, computed once per change of the run however many pages ask."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["LiveCache", "Memo"]

T = TypeVar("T")
# Keys are page addresses of watched runs; a few hundred cover every page of dozens of runs.
MAX_ENTRIES = 512
# Smaller bodies are sent as they are (as GZipMiddleware's minimum_size): not worth a header.
GZIP_MIN_BYTES = 1024
# Level 6 (gzip's default) is within a few % of 9's size at a third of its CPU; either way it
# is paid once per body, not once per load.
GZIP_LEVEL = 6


class Memo(Generic[T]):
    """Values keyed by a name, valid for one version; the first caller for a version computes
    it while later callers for the same key wait and reuse it.

    Fifty pages of a running run ask for the same answers each time it changes; the version
    is the live watcher's count of changes it has seen, read before computing, so a value is
    never older than the change that made a page ask for it.
    """

    def __init__(self, size: int = MAX_ENTRIES) -> None:
        self.size = size
        self._entries: dict[Any, tuple[int, T]] = {}
        self._locks: dict[Any, threading.Lock] = {}
        self._guard = threading.Lock()

    def peek(self, key: Any) -> T | None:
        """The newest value kept for `key`, at whatever version (None: none kept)."""
        hit = self._entries.get(key)
        return hit[1] if hit is not None else None

    def current(self, key: Any, version: int) -> T | None:
        """The value of `key` if one is kept at `version` (never computes, never waits)."""
        hit = self._entries.get(key)
        return hit[1] if hit is not None and hit[0] == version else None

    def get(self, key: Any, version: int, compute: Callable[[], T]) -> T:
        """The value of `key` at `version`, else `compute()`'s (then kept); its exceptions (a
        404) pass through, nothing kept."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            hit = self._entries.get(key)
            if hit is None or hit[0] != version:
                hit = (version, compute())
                with self._guard:
                    self._entries.pop(key, None)
                    self._entries[key] = hit
                    while len(self._entries) > self.size:  # the oldest first (dict order)
                        oldest = next(iter(self._entries))
                        self._entries.pop(oldest)
                        self._locks.pop(oldest, None)
        return hit[1]


class _Body:
    """A response body and its gzip, made once where the body is made (a worker thread),
    so that a load answered from the cache does no work but a socket write."""

    def __init__(self, made: Response) -> None:
        self.body, self.status, self.media_type = bytes(made.body), made.status_code, \
            made.media_type
        self.gzipped = gzip.compress(self.body, GZIP_LEVEL, mtime=0) \
            if len(self.body) >= GZIP_MIN_BYTES else None


class LiveCache:
    """Response bodies keyed by address, valid for one version of their run (see Memo), kept
    with their gzipped bytes: GZipMiddleware passes a response that is already encoded."""

    def __init__(self) -> None:
        self._bodies: Memo[_Body] = Memo()

    def cached(self, request: Request, key: str, version: int | None) -> Response | None:
        """The answer for `key` if one is kept at `version`, without waiting or computing:
        the event loop answers a hit itself, with no hop to a worker thread."""
        found = self._bodies.current(key, version) if version is not None else None
        return _response(request, found) if found is not None else None

    def get(self, request: Request, key: str, version: int | None,
            compute: Callable[[], Response]) -> Response:
        """The cached answer for `key` at `version`, else `compute()`'s (then cached).

        Args:
            request: asking (its Accept-Encoding decides whether the gzipped bytes go).
            key: the address (path and query).
            version: the run's version, or None when it must not be cached.
            compute: makes the answer; its exceptions (a 404) pass through uncached.

        Returns:
            A fresh Response each time (middleware may change a response's headers).
        """
        if version is None:
            return compute()
        return _response(request, self._bodies.get(key, version, lambda: _Body(compute())))


def _response(request: Request, found: _Body) -> Response:
    headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
    body = found.body
    if found.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
        body, headers["Content-Encoding"] = found.gzipped, "gzip"
    return Response(body, status_code=found.status, media_type=found.media_type,
                    headers=headers)

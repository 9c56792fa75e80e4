"""Live pages: one store poll a second per watched run, its news pushed to every open page.

A page of a running run opens `/runs/{id}/events` (or a stage's). When the run changes, the
server renders the page's live part and reads the run's samples once per change, however
many pages watch, and pushes to each page its HTML and the samples that page has not seen.
Pages then fetch nothing while they are live: fifty open pages cost fifty socket writes per
change, not a hundred requests.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from anyio import to_thread
from starlette.responses import Response, StreamingResponse

from seqline.orchestration.store.statuses import ENDED

__all__ = ["POLL_SECONDS", "Snapshot", "Watchers"]

log = logging.getLogger("seqline")

# The bound is 2 s from a store change to the page: a 1 s poll, then one push.
POLL_SECONDS = 1.0
# The recorder writes a running run every 2 s (recorder.FLUSH_SECONDS), in more than one
# transaction, and stages start and end in between: changes closer together than this are
# pushed as one, so a page gets one update per flush, not one per write. A change is still
# on the page within this (plus a render) of being seen, inside the 2 s bound.
MIN_PUSH_SECONDS = 1.8
# A comment line this often keeps proxies from closing a quiet stream.
KEEPALIVE_SECONDS = 15.0

Snapshot = tuple[str, dict[str, dict[str, list[Any]]]]
"""A view's live HTML and its samples ({stage: columns with "t"}), at one version of a run."""


class _Watch:
    """One run's latest stamp, a version that counts its changes, and snapshots per view."""

    def __init__(self) -> None:
        self.version = 0
        self.stamp: Any = None
        self.ended = False
        self.clients = 0
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.snapshots: dict[str, tuple[int, Snapshot]] = {}
        self.making: dict[str, asyncio.Lock] = {}
        self.bumped = float("-inf")  # loop time of the last change announced
        # Per view, the update events made at the current version, keyed by what the page
        # had: pages that followed the same updates share one JSON encoding.
        self.encoded: dict[str, tuple[int, dict[Any, tuple[bytes, dict[str, float]]]]] = {}

    def bump(self, stamp: Any) -> None:
        self.stamp, self.version = stamp, self.version + 1
        self.bumped = asyncio.get_running_loop().time()
        self.changed.set()
        self.changed = asyncio.Event()  # waiters already woke; later ones wait for the next


class Watchers:
    """Polls the store for each run somebody watches: once a second, however many watch.

    Args:
        stamp_of: blocking, run_id -> a stamp tuple (None: no such run); a changed stamp
            wakes every stream of that run.
        snapshot_of: blocking, (run_id, view, version) -> Snapshot; called once per view
            per change.
    """

    def __init__(self, stamp_of: Callable[[str], tuple[Any, ...] | None],
                 snapshot_of: Callable[[str, str, int], Snapshot]) -> None:
        self.stamp_of = stamp_of
        self.snapshot_of = snapshot_of
        self.watches: dict[str, _Watch] = {}

    def version_of(self, run_id: str) -> int | None:
        """How many changes of a live run have been seen (None: nobody watches it live)."""
        watch = self.watches.get(run_id)
        return watch.version if watch is not None and watch.version and not watch.ended \
            else None

    async def _poll(self, run_id: str, watch: _Watch) -> None:
        try:
            while watch.clients > 0 and not watch.ended:
                try:
                    stamp = await to_thread.run_sync(self.stamp_of, run_id)
                except Exception as exc:  # a busy or unreachable store: try again, don't end
                    log.warning("dashboard: reading run %s failed: %s", run_id, exc)
                    await asyncio.sleep(POLL_SECONDS)
                    continue
                if stamp != watch.stamp:
                    ended = stamp is None or stamp[0] in ENDED
                    wait = watch.bumped + MIN_PUSH_SECONDS - asyncio.get_running_loop().time()
                    if wait > 0 and not ended:  # coalesce: look again once a push is due
                        await asyncio.sleep(wait)
                        continue
                    watch.ended = ended
                    watch.bump(stamp)
                if not watch.ended:
                    await asyncio.sleep(POLL_SECONDS)
        finally:
            if self.watches.get(run_id) is watch:
                del self.watches[run_id]
            watch.ended = True
            watch.changed.set()

    def _join(self, run_id: str) -> _Watch:
        watch = self.watches.get(run_id)
        if watch is None or watch.ended:
            watch = self.watches[run_id] = _Watch()
        watch.clients += 1
        if watch.task is None:
            watch.task = asyncio.create_task(self._poll(run_id, watch))
        return watch

    async def _snapshot(self, run_id: str, view: str, watch: _Watch) -> Snapshot:
        """The view at the watch's version, made by the first stream that asks."""
        made = watch.snapshots.get(view)
        if made is not None and made[0] == watch.version:
            return made[1]  # the other 49 streams of a view: no lock to take
        lock = watch.making.setdefault(view, asyncio.Lock())
        async with lock:
            version = watch.version  # read first: the snapshot is at least this new
            made = watch.snapshots.get(view)
            if made is None or made[0] != version:
                snapshot = await to_thread.run_sync(self.snapshot_of, run_id, view, version)
                made = watch.snapshots[view] = (version, snapshot)
            return made[1]

    def stream(self, run_id: str, view: str) -> Response:
        """`text/event-stream`: `update` events ({status, html, samples}) until `end`.

        The first update carries every sample; later ones only samples newer than the last
        sent. The page closes its EventSource on `end` (else it would reconnect).
        """
        return StreamingResponse(self._events(run_id, view),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store",
                                          "X-Accel-Buffering": "no"})

    async def _events(self, run_id: str, view: str) -> AsyncIterator[bytes]:
        # A closed tab needs no check here: StreamingResponse listens for the disconnect
        # and cancels this generator (its `finally` still runs). Asking on every update
        # (request.is_disconnected) cost more CPU than the update itself.
        watch = self._join(run_id)
        sent: dict[str, float] = {}  # per stage: the newest sample time this page has
        try:
            yield b"retry: 2000\n\n"
            seen = 0
            while True:
                changed = watch.changed  # taken first: a change from here on wakes us
                if seen != watch.version and watch.stamp is not None:
                    seen = watch.version
                    snapshot = await self._snapshot(run_id, view, watch)
                    data, sent = _update(watch, view, seen, snapshot, sent)
                    yield data
                if watch.ended and seen == watch.version:
                    yield _event("end", {"status": watch.stamp[0] if watch.stamp else None})
                    return
                try:  # wake on a change, or now and then to keep proxies from closing it
                    async with asyncio.timeout(KEEPALIVE_SECONDS):
                        await changed.wait()
                except TimeoutError:
                    yield b": keep-alive\n\n"
        finally:
            watch.clients -= 1


def _update(watch: _Watch, view: str, version: int, snapshot: Snapshot,
            sent: dict[str, float]) -> tuple[bytes, dict[str, float]]:
    """The update event for a page that has the samples up to `sent`, and its new `sent`:
    encoded once per version, to bytes, for all pages that had the same samples (most follow
    along): every such page is sent the same bytes object."""
    made = watch.encoded.get(view)
    if made is None or made[0] != version:
        made = watch.encoded[view] = (version, {})
    key = tuple(sorted(sent.items()))
    hit = made[1].get(key)
    if hit is None:
        html, series = snapshot
        after = dict(sent)
        hit = made[1][key] = (_event("update", {"status": watch.stamp[0], "html": html,
                                                "samples": _newer(series, after)}), after)
    return hit[0], dict(hit[1])


def _newer(series: dict[str, dict[str, list[Any]]],
           sent: dict[str, float]) -> dict[str, dict[str, list[Any]]]:
    """The samples after those already sent (updates `sent`)."""
    out = {}
    for stage, columns in series.items():
        times = columns.get("t") or []
        start = bisect.bisect_right(times, sent.get(stage, float("-inf")))
        if start < len(times):
            out[stage] = {name: values[start:] for name, values in columns.items()}
            sent[stage] = times[-1]
    return out


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()

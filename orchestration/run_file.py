"""`runs/<run_id>/run.json`: the run as its folder tells it, for readers without the store."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from seqline.orchestration.events import Event, RunEnded, RunStarted, StagePlanned
from seqline.pipeline.storage import Folder, write_json

__all__ = ["RunFile"]


class RunFile:
    """A subscriber: writes run.json as the run starts (running) and as it ends, with what
    the plan did with each stage and why (what `seqline store rebuild` reads back)."""

    def __init__(self, folder: Folder, queue: int) -> None:
        self.folder, self.queue = folder, queue
        self._record: dict[str, Any] | None = None
        self._planned = False
        self._lock = threading.Lock()  # stages publish from threads of their own

    def __call__(self, event: Event) -> None:
        with self._lock:
            self._take(event)

    def _take(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self._record = {"run_id": event.run_id, "pipeline": event.pipeline,
                            "runner": event.runner, "workers": event.workers,
                            "window": event.window, "queue": self.queue, "started_at": _now()}
            self._write({**self._record, "status": "running"})
        elif isinstance(event, StagePlanned) and self._record is not None:
            self._record.setdefault("plan", []).append({
                "stage": event.stage, "component": event.component, "action": event.action,
                "reason": event.reason, "reused_from": event.reused_from,
                "cache_key": event.cache_key})
        elif isinstance(event, RunEnded) and self._record is not None:
            ended = {**self._record, "status": event.status, "finished_at": _now()}
            if event.status == "succeeded":  # verify reads the stages in this order
                ended["stages"] = [step["stage"] for step in self._record.get("plan") or []]
            if event.message:
                ended["error"] = event.message
            self._write(ended)
        elif self._record is not None and "plan" in self._record and not self._planned:
            # the plan whole (every stage is planned before any starts): written once, so
            # that a run whose driver is killed still tells verify its stages, in order
            self._planned = True
            self._write({**self._record, "status": "running"})

    def _write(self, record: dict[str, Any]) -> None:
        write_json(self.folder / "run.json", record)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

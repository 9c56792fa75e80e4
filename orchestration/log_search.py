"""Reading a run's log: its lines filtered by stage, level and text, a page at a time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from seqline.orchestration.run_log import LOG_FILE
from seqline.pipeline.storage import Folder, storage_of

__all__ = ["LEVELS", "LogPage", "LogQuery", "log_lines", "search_log"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# 200 lines fill a few screens and render in a few milliseconds; a capped log (~9 MB, about
# 50,000 lines) is read and filtered in well under a second.
PAGE_LINES = 200


@dataclass(frozen=True)
class LogQuery:
    """Which lines: of one stage (`"-"`: of none, the run's own), at `level` or above,
    holding `text` (any case) in the message, traceback or logger."""

    stage: str | None = None
    level: str | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if self.level is not None and self.level.upper() not in LEVELS:
            raise ValueError(f"unknown level {self.level!r}; use one of "
                             f"{', '.join(v.lower() for v in LEVELS)}")

    def keeps(self, line: dict[str, Any]) -> bool:
        if self.stage is not None and (line.get("stage") or "-") != self.stage:
            return False
        if self.level is not None and _rank(line.get("level")) < _rank(self.level):
            return False
        if self.text:
            needle = self.text.casefold()
            return any(needle in str(line.get(k) or "").casefold()
                       for k in ("message", "traceback", "logger"))
        return True


@dataclass(frozen=True)
class LogPage:
    """A page of the lines a query keeps, and what the whole log holds."""

    rows: list[dict[str, Any]]
    total: int  # lines the query keeps
    page: int
    pages: int
    lines: int  # lines in the log
    errors: int  # of which at ERROR or above
    stages: list[str]  # the stages that logged, in the order they first did
    found: bool  # the log file exists


def log_lines(run: Folder) -> Iterator[dict[str, Any]]:
    """Every line of the log in the run folder `run`, in order; a line that is not a JSON
    object (the last one, cut by a crash mid-write) is skipped. Nothing if there is no log."""
    place = run / LOG_FILE
    if not place.exists():
        return
    with storage_of(place).open(place, "rb") as file:
        for raw in file:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                yield line


def search_log(run: Folder, query: LogQuery, page: int = 0,
               page_lines: int = PAGE_LINES) -> LogPage:
    """The `page`th page (0-based; past the end: the last) of the lines `query` keeps.

    Example: search_log(folder, LogQuery(level="error")) -> the errors, with `errors` and
    `lines` counted over the whole log, for the page's "errors only (3)".
    """
    kept: list[dict[str, Any]] = []
    lines = errors = 0
    stages: dict[str, None] = {}
    found = (run / LOG_FILE).exists()
    for line in log_lines(run) if found else ():
        lines += 1
        errors += _rank(line.get("level")) >= _rank("ERROR")
        if line.get("stage"):
            stages.setdefault(str(line["stage"]), None)
        if query.keeps(line):
            kept.append(line)
    pages = max(1, -(-len(kept) // page_lines))
    page = min(max(page, 0), pages - 1)
    return LogPage(kept[page * page_lines:(page + 1) * page_lines], len(kept), page, pages,
                   lines, errors, list(stages), found)


def _rank(level: Any) -> int:
    name = str(level or "").upper()
    return LEVELS.index(name) if name in LEVELS else 0

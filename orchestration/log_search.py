"""Reading a run's log: its lines filtered by stage, level and text, a page at a time."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from seqline.orchestration.run_log import LOG_FILE
from seqline.pipeline.storage import Folder, storage_of

__all__ = ["LEVELS", "LogPage", "LogQuery", "log_lines", "search_log"]

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# 200 lines fill a few screens and render in a few milliseconds; a capped log (~9 MB, about
# 50,000 lines) is filtered in ~0.2 s on a busy 2-core machine.
PAGE_LINES = 200
# A line's level and stage as RunLog writes them, found in its text without parsing it (a
# quote inside a message is written \" and cannot end these keys).
_LEVEL = re.compile(rb'"level":\s*"([A-Za-z]+)"')
_STAGE = re.compile(rb'"stage":\s*("(?:[^"\\]|\\.)*"|null)')


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
    if not (run / LOG_FILE).exists():
        return
    for raw in _raw_lines(run):
        line = _parsed(raw)
        if line is not None:
            yield line


def search_log(run: Folder, query: LogQuery, page: int = 0,
               page_lines: int = PAGE_LINES) -> LogPage:
    """The `page`th page (0-based; past the end: the last) of the lines `query` keeps.

    A line's level and stage are read from its text, and only the lines shown (and those a
    text search must look into) are parsed: a log at its cap (~50,000 lines) is filtered
    several times faster than by parsing every line.

    Example: search_log(folder, LogQuery(level="error")) -> the errors, with `errors` and
    `lines` counted over the whole log, for the page's "errors only (3)".
    """
    kept: list[bytes] = []
    lines = errors = 0
    stages: dict[str, None] = {}
    found = (run / LOG_FILE).exists()
    wanted = _rank(query.level) if query.level else None
    needle = query.text.casefold() if query.text else None
    # A needle JSON writes as it is can be looked for in the line's text before parsing it.
    plain = needle is not None and needle.isprintable() and not any(c in needle for c in '"\\')
    for raw in _raw_lines(run) if found else ():
        level, stage_text = _LEVEL.search(raw), _STAGE.search(raw)
        if level is None or stage_text is None:  # not a line of a run's log
            continue
        lines += 1
        rank = _rank(level.group(1).decode())
        errors += rank >= ERROR_RANK
        stage = json.loads(stage_text.group(1))
        if stage:
            stages.setdefault(str(stage), None)
        if query.stage is not None and (stage or "-") != query.stage:
            continue
        if wanted is not None and rank < wanted:
            continue
        if needle is not None:
            if plain and needle not in raw.decode(errors="replace").casefold():
                continue
            line = _parsed(raw)
            if line is None or not query.keeps(line):
                continue
        kept.append(raw)
    pages = max(1, -(-len(kept) // page_lines))
    page = min(max(page, 0), pages - 1)
    rows = [line for raw in kept[page * page_lines:(page + 1) * page_lines]
            if (line := _parsed(raw)) is not None]
    return LogPage(rows, len(kept), page, pages, lines, errors, list(stages), found)


def _raw_lines(run: Folder) -> Iterator[bytes]:
    place = run / LOG_FILE
    with storage_of(place).open(place, "rb") as file:
        yield from file


def _parsed(raw: bytes) -> dict[str, Any] | None:
    """A line as its object; None for a line cut by a crash mid-write."""
    try:
        line = json.loads(raw)
    except ValueError:
        return None
    return line if isinstance(line, dict) else None


ERROR_RANK = LEVELS.index("ERROR")


def _rank(level: Any) -> int:
    name = str(level or "").upper()
    return LEVELS.index(name) if name in LEVELS else 0

"""A new schedule from the command line's words, every part checked before it is stored."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from seqline.orchestration.schedule.times import check_cron, parse_time, zone
from seqline.orchestration.store import Schedule
from seqline.orchestration.store.tables import CATCHUP_POLICIES, OVERLAP_POLICIES
from seqline.pipeline.errors import ConfigError

__all__ = ["NAME_PATTERN", "RUNNERS", "new_schedule"]

# A name becomes part of run ids and log file names: letters, digits, and . _ - inside, as
# run ids (pipeline/artifacts.py: RUN_ID_PATTERN, 128 long, room for `-backfill-<fire time>`).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
RUNNERS = ("local", "beam", "ray")


def new_schedule(name: str, pipeline: Path, cron: str, *, tz: str = "UTC",
                 runner: str = "local", workers: int = 2, overlap: str = "skip",
                 catchup: str = "latest", max_catchup: int = 5, start: str | None = None,
                 end: str | None = None, at: datetime) -> tuple[Schedule, str]:
    """Check a schedule's parts and build it.

    Args:
        name: its name (letters, digits, `.`, `_`, `-`; at most 80).
        pipeline: the pipeline file; it must load (a bad one is found now, not at 2 am).
        cron: a 5-field cron expression, or a nickname such as @daily.
        tz: the IANA zone the expression is read in.
        runner: local, beam or ray.
        workers: parallel workers of each run.
        overlap: skip, queue or allow.
        catchup: none, latest or all.
        max_catchup: how many missed ticks `all` runs.
        start: no fire time before this ISO time (no offset: in `tz`).
        end: none after this one.
        at: the time now (fire times count from here).

    Returns:
        The schedule, and cronsim's explanation of its expression.

    Raises:
        ConfigError: the first part that is wrong, and how to fix it.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"schedule name {name!r} is not a name; use letters, digits, '.', "
                          "'_' and '-' (at most 80, starting with a letter or digit), e.g. "
                          "nightly-train")
    _one_of(runner, RUNNERS, "--runner")
    _one_of(overlap, OVERLAP_POLICIES, "--overlap")
    _one_of(catchup, CATCHUP_POLICIES, "--catchup")
    if workers < 1 or max_catchup < 0:
        raise ConfigError(f"--workers {workers} and --max-catchup {max_catchup}: give at "
                          "least 1 worker and at least 0 catch-up ticks")
    zone(tz)
    explanation = check_cron(cron, tz)
    file = _pipeline_file(pipeline)
    first = parse_time(start, tz, "--start") if start else None
    last = parse_time(end, tz, "--end") if end else None
    if first and last and last < first:
        raise ConfigError(f"--end {end} is before --start {start}; swap them")
    schedule = Schedule(name=name, pipeline=str(file), cron=cron.strip(), tz=tz, runner=runner,
                        workers=workers, overlap=overlap, catchup=catchup,
                        max_catchup=max_catchup, start=first, end=last, paused=False,
                        since=at, created=at)
    return schedule, explanation


def _one_of(value: str, allowed: tuple[str, ...], option: str) -> None:
    if value not in allowed:
        raise ConfigError(f"{option} {value!r} is not one of {', '.join(allowed)}; pass one "
                          "of those")


def _pipeline_file(pipeline: Path) -> Path:
    """The pipeline file, absolute (the scheduler may run from another folder), loaded once."""
    from seqline.components import COMPONENTS  # late: only `schedule add` needs them
    from seqline.pipeline.config import load_pipeline

    file = Path(pipeline).expanduser().resolve()
    if not file.is_file():
        raise ConfigError(f"pipeline file {pipeline} not found; give the path of a pipeline "
                          "YAML file (e.g. data/seattle_weather/pipeline.yaml)")
    load_pipeline(file, COMPONENTS)
    return file

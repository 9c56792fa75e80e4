"""What the schedule tests share: a pipeline that runs in seconds, its folder, a settable clock."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tests.conftest import USERFNS

__all__ = ["QUICK", "Clock", "quick_project"]

# Two stages, 20 rows: a run takes about 2-3 s, most of it the interpreter starting.
QUICK = """\
name: quick
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 10}}
  - {name: work, component: preprocess,
     params: {fn: "latency:skewed", fn_kwargs: {base_ms: 1, slow_every: 1000}}}
"""


def quick_project(folder: Path) -> Path:
    """`folder` with quick.yaml, its input and its preprocess module."""
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(20)))
    (folder / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (folder / "quick.yaml").write_text(QUICK)
    return folder


class Clock:
    """The scheduler's clock, moved by the test."""

    def __init__(self, t: datetime) -> None:
        self.t = t

    def __call__(self) -> datetime:
        return self.t

"""The report of compare.py: the machine, the versions, the table and the notes, as Markdown."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from compare_measure import LOG

__all__ = ["TITLES", "Row", "report", "spread", "table"]

VERSIONS = ["seqline", "pyarrow", "tensorflow", "apache-beam", "ray", "tfx-bsl", "numpy",
            "pandas"]


@dataclass
class Row:
    key: str
    what: str
    seqline: str
    peer: str
    ratios: list[float] | None
    target: str
    met: str
    digits: int = 2


def spread(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    median = statistics.median(values)
    return (f"{min(values):.{digits}f} / {median:.{digits}f} / {max(values):.{digits}f}")


TITLES = {"1": "ordering cost", "2": "preprocessing vs tf.data", "3": "whole job vs Ray Data",
          "4": "whole job vs Beam", "5": "whole job vs the single-process limit",
          "6": "scaling 1 → 2 workers", "7": "the assembly line", "8": "memory vs input size",
          "9": "training input wait", "10": "cold start", "11": "what verify adds",
          "12": "fixed cost", "13": "the machinery"}


# ---------------------------------------------------------------------------- report

def processor() -> str:
    """The machine's processor, as /proc/cpuinfo names it."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def machine() -> list[str]:
    model = processor()
    versions = [f"python {platform.python_version()}"]
    for name in VERSIONS:
        try:
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    return [f"- Machine: {os.cpu_count()} logical cores "
            f"({psutil.cpu_count(logical=False)} physical), "
            f"{psutil.virtual_memory().total / 2**30:.1f} GiB RAM, {model}; "
            f"{platform.system()} {platform.release()}.",
            "- Versions: " + ", ".join(versions) + "."]


def table(rows: list[Row]) -> list[str]:
    lines = ["| # | what | seqline | peer | ratio (min / median / max) | target | met? |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r.key} | {r.what} | {r.seqline} | {r.peer} | "
                     f"{spread(r.ratios or [], r.digits)} | {r.target} | {r.met} |")
    return lines


def _load_warning() -> list[str]:
    busy = [e for e in LOG if e["others"] > 0.25]
    if not busy:
        return ["No measured process ran while other processes used more than a quarter of a "
                "core (see the last table)."]
    return [f"**{len(busy)} of {len(LOG)} measured processes ran while other processes used "
            "more than a quarter of a core** (the machine is shared; see the last table): "
            "their figures are slower than the machine can do."]


def report(b: Any, elapsed: float, command: str) -> str:
    args = b.args
    lines = ["# seqline against its peers", "",
             f"Written by `{command}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC in "
             f"{elapsed / 60:.1f} min; {args.repeats} repeat(s); {args.rows:,} rows (the "
             f"Ray Data and Beam comparisons: {b.peer_rows:,})"
             + (" — **smoke sizes: the figures mean nothing**" if args.smoke else "") + ".",
             "", *machine(), "",
             "Ratios are seqline ÷ peer (rows/s against rows/s, by the wall time of each "
             "job's own process, start-up included), computed per repeat (row 2: against the "
             "peer's fastest run) and given as min / median / max; `met?` judges the "
             "median. Rows/s columns are medians. Each side ran alone on the machine, one "
             "process at a time.", "", *_load_warning(), "",
             *table(b.rows), ""]
    for number, title in TITLES.items():
        if number in b.notes:
            lines += [f"## {number}. {title}", ""]
            lines += [f"- {text}" for text in b.notes[number]]
            lines.append("")
    lines += ["## Every process, in the order run", "",
              "The machine is shared. `others` is the CPU that processes outside the measured "
              "tree used while it ran (host busy time minus the tree's, average cores of "
              f"{os.cpu_count()}); a figure measured while others used a good part of a core "
              "is slower than the machine can do.", "",
              "| process | wall s | peak RSS MB | its CPU (cores) | others (cores) | steal |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {e['label']} | {e['wall']:.1f} | {e['peak_mb']:,.0f} | {e['ours']:.2f} | "
              f"{e['others']:.2f} | {e['steal']:.2f} |" for e in LOG]
    lines.append("")
    if b.failed:
        lines += ["## Failures", ""]
        for text in b.failed:
            lines += ["```", text.strip(), "```", ""]
    return "\n".join(lines)

"""The soak's one table (Markdown), and where it goes in SOAK.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["table", "write_markdown"]

BEGIN, END = "<!-- soak:table -->", "<!-- /soak:table -->"


def _n(items: list | int) -> str:
    """A count; the first few items named when it is not zero."""
    if isinstance(items, int):
        return str(items)
    if not items:
        return "0"
    return f"**{len(items)}**: " + "; ".join(str(i) for i in items[:4]) + \
        (" …" if len(items) > 4 else "")


def table(s: dict[str, Any]) -> str:
    """The summary as one Markdown table."""
    ticks, ran, same = s["ticks"], s["runs"], s["bytes"]
    faults = s["faults"]
    injected = sum(v.get("injected", 0) for v in faults.values())
    rows = [
        ("soak", f"{s['minutes']:g} min of chaos, seed {s['seed']}, plan digest "
                 f"`{s['digest']}`"),
        ("faults injected", f"{injected} in all"),
        *[(f"- {kind}", f"{v.get('injected', 0)}" + (f" ({v['no target']} found no target)"
                                                     if v.get("no target") else ""))
          for kind, v in faults.items()],
        ("disk_full", s["disk_full"]),
        ("runs", f"{ran['runs']} ({', '.join(f'{k} {v}' for k, v in ran['status'].items())})"),
        ("ticks", f"{ticks['ticks']} ({ticks['scheduled']} scheduled, the rest backfill); "
                  + ", ".join(f"{k} {v}" for k, v in ticks["reasons"].items())),
        ("resumes (runs resumed to success)", f"{s['resumes']} ({s['resumed_ok']})"),
        ("blocks retried (worker deaths)", str(ran["block_retries"])),
        ("runs compared byte for byte", f"{same['compared']} (over {same['inputs']} inputs, "
                                        "recomputed undisturbed)"),
        ("divergences", _n(same["divergent"])),
        ("verify failures", _n(s["verify"])),
        ("lost ticks", _n(ticks["lost"])),
        ("duplicate ticks", _n(ticks["duplicate"])),
        ("ticks outside the window", _n(ticks["outside"])),
        ("ticks without a run or a reason", _n(ticks["no_run"])),
        ("ticks left queued/launching", _n(ticks["stuck"])),
        ("runs stuck in running", _n(ran["stuck"])),
        ("runs not succeeded at the end", _n(ran["not_succeeded"])),
        ("orphan processes", _n(s["orphans"])),
        ("temporary folders left", _n(s["leftovers"])),
        ("scheduler/dashboard exits not caused by a fault",
         _n([f"{k} x{v}" for k, v in s["exits"].items()])),
        ("dashboard answers at the end", "yes" if s["dashboard_ok"] else "**no**"),
    ]
    return "\n".join(["| | |", "|---|---|", *[f"| {a} | {b} |" for a, b in rows]])


def write_markdown(path: Path, text: str) -> None:
    """Put the table between SOAK.md's markers (the rest of the file is kept)."""
    block = f"{BEGIN}\n{text}\n{END}"
    if path.exists() and BEGIN in (old := path.read_text()):
        head, rest = old.split(BEGIN, 1)
        path.write_text(head + block + rest.split(END, 1)[1])
    else:
        path.write_text(f"# Soak\n\n{block}\n")

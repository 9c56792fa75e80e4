"""A stage page's Profile section: per column figures, a histogram, and drift, as plain dicts."""

from __future__ import annotations

from typing import Any

from seqline.orchestration.dashboard import files
from seqline.orchestration.store import RunReader
from seqline.pipeline.drift import THRESHOLD, compare
from seqline.pipeline.profile import Profile
from seqline.pipeline.storage import Folder

__all__ = ["profile_view"]

# The inline SVGs' size in CSS pixels: a histogram and a drift strip fit a table cell.
CHART_WIDTH, CHART_HEIGHT = 120, 28
TOP_SHOWN = 5  # top values shown per string column (profile.json keeps more)


def profile_view(reader: RunReader, root: Folder, run_id: str, stage: str,
                 manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """The stage's data profile as its page shows it, with drift from the pipeline's last
    succeeded run before this one and along source order (seq windows against the whole).

    Args:
        reader: the run store's reads (which run to compare with).
        root: the artifact root.
        run_id: a run known to the store.
        stage: a stage of it known to the store.
        manifest: the stage's manifest (None: not committed yet: no profile yet).

    Returns:
        None before the stage commits or for a stage that keeps no records; {"off": True}
        for a data stage with `profile: false`; else rows, seq range, threshold, the
        baseline run (or None), seq windows, and one dict per column, every figure in text.

    Example: a stage whose `temp_max` moved by +20 since the last run -> its column dict
    has drift {"distance": 0.93, "measure": "ks", "drifted": True, ...}.
    """
    if manifest is None or "seq_digest" not in manifest:
        return None
    stored = files.profile_of(root, run_id, stage, manifest)
    if stored is None:
        return {"off": True}
    current = Profile.from_json(stored)
    baseline_run = reader.last_succeeded_before(run_id)
    baseline = _baseline(root, baseline_run, stage)
    drift = compare(current, baseline, stored.get("threshold", THRESHOLD)) if baseline else {}
    windows = stored.get("windows") or []
    return {
        "off": False, "rows": stored["rows"], "seq_min": stored.get("seq_min"),
        "seq_max": stored.get("seq_max"), "threshold": stored.get("threshold", THRESHOLD),
        "baseline": baseline_run if baseline else None, "windows": len(windows),
        "columns": [_column(name, data, drift.get(name), windows,
                            stored.get("threshold", THRESHOLD))
                    for name, data in stored["columns"].items()],
    }


def _baseline(root: Folder, run_id: str | None, stage: str) -> Profile | None:
    if run_id is None:
        return None
    manifest = files.manifest_of(root, run_id, stage)
    stored = files.profile_of(root, run_id, stage, manifest)
    return Profile.from_json(stored) if stored else None


def _column(name: str, data: dict[str, Any], drift: dict[str, Any] | None,
            windows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    quantiles = data.get("quantiles") or {}
    along = [w["distance"].get(name) for w in windows]
    measured = [d for d in along if d is not None]
    total = data["count"] + data["nulls"]
    return {
        "name": name, "kind": data["kind"], "count": f"{data['count']:,}",
        "nulls": f"{data['nulls']:,}" + (f" ({data['nulls'] / total:.1%})"
                                         if data["nulls"] and total else ""),
        "min": _figure(data.get("min")), "max": _figure(data.get("max")),
        "mean": _figure(data.get("mean")), "std": _figure(data.get("std")),
        "p50": _figure(quantiles.get("p50")), "p99": _figure(quantiles.get("p99")),
        "top": [{"value": v, "count": f"{n:,}"} for v, n in (data.get("top") or [])[:TOP_SHOWN]],
        "top_approximate": bool(data.get("approximate_top")),
        "distinct": data.get("distinct"),
        "histogram": _histogram(data.get("histogram")),
        # None: no baseline; "distance" None: a column that cannot be compared (dates, ids,
        # a column the baseline lacks)
        "drift": None if drift is None else {
            "distance": None if drift["distance"] is None else f"{drift['distance']:.3f}",
            "measure": drift["measure"], "drifted": drift["drifted"]},
        "along": _strip(along, windows, threshold) if measured else None,
        "along_max": f"{max(measured):.3f}" if measured else None,
        "along_drifted": bool(measured) and max(measured) > threshold,
    }


def _figure(value: Any) -> str:
    """A figure in a table cell: 4 significant digits, thousands separated; text as is.

    Example: 12.345678 -> "12.35"; 1234567.0 -> "1.235e+06"; 4 -> "4"; None -> "".
    """
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) and abs(value) < 10**7:
        return f"{value:,}"
    return f"{value:,.4g}" if abs(value) < 10**7 else f"{value:.4g}"


def _histogram(histogram: dict[str, list[float]] | None) -> dict[str, Any] | None:
    """Bars of the column's histogram, in the SVG's pixels, each with its range and count."""
    if not histogram or not histogram.get("counts"):
        return None
    counts, edges = histogram["counts"], histogram["edges"]
    tallest = max(counts) or 1.0
    width = CHART_WIDTH / len(counts)
    bars = []
    for i, n in enumerate(counts):
        height = round(CHART_HEIGHT * n / tallest, 1)
        bars.append({"x": round(i * width, 2), "y": round(CHART_HEIGHT - height, 1),
                     "width": round(max(width - 1, 1), 2), "height": height,
                     "title": f"{_figure(edges[i])} to {_figure(edges[i + 1])}: "
                              f"{n:,.0f}"})
    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "bars": bars,
            "low": _figure(edges[0]), "high": _figure(edges[-1])}


def _strip(distances: list[float | None], windows: list[dict[str, Any]],
           threshold: float) -> dict[str, Any]:
    """One bar per seq window: its distance to the whole stage (a full bar is 1.0), flagged
    past the threshold, which is drawn as a line."""
    width = CHART_WIDTH / len(distances)
    bars = []
    for i, d in enumerate(distances):
        height = round(CHART_HEIGHT * min(d or 0.0, 1.0), 1)
        bars.append({"x": round(i * width, 2), "y": round(CHART_HEIGHT - height, 1),
                     "width": round(max(width - 1, 1), 2), "height": height,
                     "drifted": d is not None and d > threshold,
                     "title": f"seq {windows[i]['seq_min']:,} to {windows[i]['seq_max']:,}: "
                              + ("no values" if d is None else f"{d:.3f}")})
    return {"width": CHART_WIDTH, "height": CHART_HEIGHT, "bars": bars,
            "line": round(CHART_HEIGHT * (1 - threshold), 1)}

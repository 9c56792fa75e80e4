"""What differs between two runs of a stage, in the user's words: the plan's reason for
running it again ("params changed (window.length 14 → 21)", "input changed (readings.csv)",
"function source changed (features.py)"), from the parts of their cache keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seqline.orchestration.cache import NOT_IN_FOLDER

__all__ = ["changes"]


def changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two stage runs' cache key parts, in the user's words."""
    found = []
    params = _differences(_flat(old.get("params") or {}), _flat(new.get("params") or {}))
    if params:
        found.append(f"params changed ({params})")
    old_files = (old.get("reads") or {}).get("files")
    new_files = (new.get("reads") or {}).get("files")
    if new_files is not None and old_files != new_files:
        names = sorted({_base(p) for p in set(old_files or {}) ^ set(new_files)}
                       | {_base(p) for p in new_files if (old_files or {}).get(p, new_files[p])
                          != new_files[p]})
        found.append(f"input changed ({', '.join(names)})")
    old_code, new_code = old.get("code") or {}, new.get("code") or {}
    # Modules outside the pipeline's folder (numpy, ...) are in a key by name only; their
    # coming or going is told by the module of the folder whose imports changed.
    modules = sorted(m for m in set(old_code) | set(new_code)
                     if old_code.get(m) != new_code.get(m)
                     and {old_code.get(m), new_code.get(m)} - {None, NOT_IN_FOLDER})
    if modules:
        found.append("function source changed ("
                     + ", ".join(m.replace(".", "/") + ".py" for m in modules) + ")")
    for part, what in (("errors", "error budget changed"),
                       ("depends_on", "the artifacts it compares with changed")):
        if old.get(part) != new.get(part):
            found.append(what)
    for part, what in (("version", "component version"), ("seqline", "seqline")):
        if old.get(part) != new.get(part):
            found.append(f"{what} changed ({old.get(part)} → {new.get(part)})")
    return found


def _flat(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], most: int = 3) -> str:
    """"window 14 → 21, label tmax → tmin": the first `most` parameters that differ."""
    changed = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    said = [f"{k} {_text(old.get(k))} → {_text(new.get(k))}" for k in changed[:most]]
    more = f", and {len(changed) - most} more" if len(changed) > most else ""
    return ", ".join(said) + more


def _text(value: Any) -> str:
    return "unset" if value is None else str(value)


def _base(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]

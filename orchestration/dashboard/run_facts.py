"""The Run section's options in words: how a run was set up, as a person would say it."""

from __future__ import annotations

from typing import Any

from seqline.pipeline.reorder import AdaptiveWindow

__all__ = ["options_in_words"]

# Blocks in flight per stage when --window is not given: 4 per worker (runners/base.py), and
# more while a slow block holds finished ones back (AdaptiveWindow).
WINDOW_PER_WORKER = 4


def options_in_words(options: dict[str, Any] | None, runner: str) -> list[str]:
    """A run's recorded options (RunOptions.recorded and its engine's) as short phrases.

    Example: {"workers": 2, "window": None, "queue": 4, "overlap": True, "cache": True} on
    local -> ["2 workers", "8 blocks in flight per stage (4 per worker), up to 64 behind a
    slow block", "4 blocks queued between stages", "stages overlap", "cache on"].
    """
    found = dict(options or {})
    workers = found.pop("workers", None)
    words = []
    if workers is not None:
        words.append(f"{workers} worker{'s' if workers != 1 else ''}")
    if "window" in found:
        window, start = found.pop("window"), WINDOW_PER_WORKER * (workers or 1)
        words.append(f"up to {window} blocks in flight per stage" if window is not None else
                     f"{start} blocks in flight per stage ({WINDOW_PER_WORKER} per worker), "
                     f"up to {AdaptiveWindow.widest(start, workers or 1)} behind a slow block")
    if "queue" in found:
        words.append(f"{found.pop('queue')} blocks queued between stages")
    if "overlap" in found:
        words.append("stages overlap" if found.pop("overlap") else "one stage after another")
    if "cache" in found:
        words.append("cache on" if found.pop("cache") else "cache off (--no-cache)")
    words += _engine(found, runner)
    return words


def _engine(found: dict[str, Any], runner: str) -> list[str]:
    """The engine's own options (Beam's mode and pipeline options, Ray's address), then
    anything else as `name: value`."""
    words = []
    if "mode" in found:
        words.append(f"Beam in {str(found.pop('mode')).replace('_', ' ')} mode")
    for option in found.pop("options", None) or []:
        words.append(f"Beam option {option}")
    if runner == "ray" or "address" in found:
        address = found.pop("address", None)
        words.append(f"Ray cluster at {address}" if address else "a Ray started for the run")
    found.pop("working_dir", None)  # the pipeline's folder: the pipeline row says it
    words += [f"{name.replace('_', ' ')}: {value}" for name, value in sorted(found.items())]
    return words

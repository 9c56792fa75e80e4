"""How a run is to go, in one frozen value: from the CLI or the Python API down to the runners."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from seqline.pipeline.errors import ConfigError
from seqline.pipeline.specs import did_you_mean

__all__ = ["RUNNERS", "Output", "RunOptions"]

RUNNERS = ("local", "beam", "ray")
Output = Literal["quiet", "normal", "verbose"]
# One sample per running stage a second is what a live chart needs (the run store, the
# dashboard); None samples nothing.
SAMPLE_SECONDS = 1.0


@dataclass(frozen=True)
class RunOptions:
    """Everything about a run that is not the pipeline: where it runs and how.

    `engine` holds the chosen engine's own options: Beam's `mode` and `options`, Ray's
    `address` and `working_dir`. `output` is what the engines may print (quiet: errors only;
    verbose: their own start-up and log lines too).

    Raises:
        ConfigError: an unknown runner, or a count below 1, named as its flag.
    """

    runner: str = "local"
    workers: int = 2
    window: int | None = None  # fixed blocks in flight per stage; None: adaptive (reorder.py)
    queue: int = 4  # blocks waiting between two stages (the line's belts)
    overlap: bool = True
    cache: bool = True
    resume: bool = False
    verify: bool = True
    trigger: str = "manual"
    output: Output = "normal"
    sample_seconds: float | None = SAMPLE_SECONDS
    engine: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise ConfigError(f"unknown runner {self.runner!r}."
                              f"{did_you_mean(self.runner, list(RUNNERS))} Runners: "
                              f"{', '.join(RUNNERS)}.")
        for flag, value in (("--workers", self.workers), ("--queue", self.queue),
                            ("--window", self.window or 1)):
            if value < 1:
                raise ConfigError(f"{flag} must be at least 1, got {value}.")
        object.__setattr__(self, "engine", MappingProxyType(dict(self.engine)))

    @property
    def recorded(self) -> dict[str, Any]:
        """The options as the run store keeps them with the run (JSON)."""
        return {"workers": self.workers, "window": self.window, "queue": self.queue,
                "overlap": self.overlap, "cache": self.cache, **self.engine}

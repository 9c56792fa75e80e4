"""Engine adapters: the same map stage on local processes, Apache Beam or Ray."""

from __future__ import annotations

from typing import Any

from seqline.orchestration.runners.base import Runner
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.specs import did_you_mean

__all__ = ["RUNNERS", "Runner", "make_runner"]

RUNNERS = ("local", "beam", "ray")


def make_runner(name: str, **options: Any) -> Runner:
    """Build a runner by name; engines are imported only when chosen (Beam and Ray are slow
    to import, and a local run should not pay for them)."""
    cls: type[Runner]
    if name == "local":
        from seqline.orchestration.runners.local import LocalRunner as cls
    elif name == "beam":
        from seqline.orchestration.runners.beam import BeamRunner as cls  # type: ignore[no-redef]
    elif name == "ray":
        from seqline.orchestration.runners.ray import RayRunner as cls  # type: ignore[no-redef]
    else:
        raise ConfigError(f"unknown runner {name!r}.{did_you_mean(name, list(RUNNERS))} "
                          f"Runners: {', '.join(RUNNERS)}.")
    return cls(**options)

"""Engine adapters: the same map stage on local processes, Apache Beam or Ray."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seqline.pipeline.errors import ConfigError

if TYPE_CHECKING:
    from seqline.orchestration.runners.base import Runner

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
        from seqline.pipeline.specs import did_you_mean

        raise ConfigError(f"unknown runner {name!r}.{did_you_mean(name, list(RUNNERS))} "
                          f"Runners: {', '.join(RUNNERS)}.")
    return cls(**options)


def __getattr__(name: str) -> Any:
    """`Runner` on first use: the package is imported light, so that `seqline run` can start
    the local runner's fork server (forked.py) before it imports the rest (decision 49)."""
    if name == "Runner":
        from seqline.orchestration.runners.base import Runner

        return Runner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""seqline: an ML pipeline run as an assembly line that keeps every record in source order.

The public Python API, equal to pipeline files:

    import seqline

    pipeline = seqline.Pipeline("weather", [
        seqline.Stage("read", seqline.IngestParams(format="csv",
                                                   paths=["seattle-weather.csv"])),
        seqline.Stage("examples", seqline.TFRecordWriteParams()),
    ], base_dir="data/seattle_weather")  # (the repository's demo data: paths are relative to it)
    result = pipeline.run(runner="local", root=".seqline")

This file is the `seqline` package's own `__init__` (pyproject maps the package here, since
the design card fixes the top-level folders); everything in it is defined elsewhere.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seqline.components import (
        BatchingParams,
        ErrorBound,
        EvaluateParams,
        IngestParams,
        PreprocessParams,
        ShareBound,
        TFRecordWriteParams,
        Thresholds,
        TrainParams,
        Window,
    )
    from seqline.orchestration.api import Pipeline, RunResult, Stage
    from seqline.pipeline.deadletters import ErrorBudget
    from seqline.pipeline.errors import ConfigError, InternalError, SeqlineError, StageError

    __version__: str

__all__ = ["BatchingParams", "ConfigError", "ErrorBound", "ErrorBudget", "EvaluateParams",
           "IngestParams", "InternalError", "Pipeline", "PreprocessParams", "RunResult",
           "SeqlineError", "ShareBound", "Stage", "StageError", "TFRecordWriteParams",
           "Thresholds", "TrainParams", "Window", "__version__"]

# Where each public name is defined. Imported on first use (PEP 562): `import seqline` and
# every `seqline` command load Arrow and the components only when they need them.
_HOMES = {
    **dict.fromkeys(["BatchingParams", "ErrorBound", "EvaluateParams", "IngestParams",
                     "PreprocessParams", "ShareBound", "TFRecordWriteParams", "Thresholds",
                     "TrainParams", "Window"], "seqline.components"),
    "Pipeline": "seqline.orchestration.api", "RunResult": "seqline.orchestration.api",
    "Stage": "seqline.orchestration.api",
    "ErrorBudget": "seqline.pipeline.deadletters",
    "ConfigError": "seqline.pipeline.errors", "InternalError": "seqline.pipeline.errors",
    "SeqlineError": "seqline.pipeline.errors", "StageError": "seqline.pipeline.errors",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # One source: the installed package's metadata, read when asked for (importing
        # importlib.metadata at the top would cost every `seqline` command about 50 ms).
        # Kept once read: a run asks twice (its cache keys, its row in the store).
        from importlib.metadata import PackageNotFoundError, version

        try:
            found: str | None = version("seqline")
        except PackageNotFoundError:  # a source tree on the path, not installed
            found = None
        globals()["__version__"] = found
        return found
    if name not in _HOMES:
        raise AttributeError(f"module 'seqline' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)

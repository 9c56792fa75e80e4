"""The six stages of the assembly line, engine-agnostic: pure functions over blocks plus a spec.

This module is the one door orchestration comes in by: the table of components, their
parameter models (the public API's `seqline.IngestParams`, ...) and the pipeline file's schema.
"""

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from seqline.components import batching, evaluate, ingest, preprocess, tfrecord_write, train
from seqline.components.batching import BatchingParams, Window
from seqline.components.evaluate import ErrorBound, EvaluateParams, ShareBound, Thresholds
from seqline.components.ingest import IngestParams
from seqline.components.ingest.readers import Source
from seqline.components.preprocess import PreprocessParams
from seqline.components.tfrecord_write import TFRecordWriteParams
from seqline.components.train import TrainParams
from seqline.pipeline.config import make_stage
from seqline.pipeline.specs import ComponentSpec, StageSpec

__all__ = ["COMPONENTS", "BatchingParams", "ErrorBound", "EvaluateParams", "IngestParams",
           "PreprocessParams", "ShareBound", "Source", "TFRecordWriteParams", "Thresholds",
           "TrainParams", "Window", "pipeline_schema", "schema_text", "stage"]


# An explicit table, in assembly-line order: no registry, no autoloading.
COMPONENTS: dict[str, ComponentSpec[Any]] = {
    "ingest": ingest.SPEC,
    "tfrecord_write": tfrecord_write.SPEC,
    "preprocess": preprocess.SPEC,
    "batching": batching.SPEC,
    "train": train.SPEC,
    "evaluate": evaluate.SPEC,
}


def stage(name: str, component: str, params: Mapping[str, Any] | BaseModel | None = None,
          **fields: Any) -> StageSpec[Any]:
    """A stage of `component` with its parameters checked, as in a pipeline file.

    Example: `stage("read", "ingest", {"format": "csv", "paths": ["in.csv"]})`.

    Raises:
        ConfigError: an unknown component or a bad parameter, with its own message.
    """
    return make_stage(name, component, params, COMPONENTS, **fields)


# Built from the table above, so imported after it (schema.py reads COMPONENTS).
from seqline.components.schema import pipeline_schema, schema_text  # noqa: E402

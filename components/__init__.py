"""The six stages of the assembly line, engine-agnostic: pure functions over blocks plus a spec."""

from seqline.components import batching, evaluate, ingest, preprocess, tfrecord_write, train
from seqline.pipeline.specs import ComponentSpec

__all__ = ["COMPONENTS"]


# An explicit table, in assembly-line order: no registry, no autoloading.
COMPONENTS: dict[str, ComponentSpec] = {
    "ingest": ingest.SPEC,
    "tfrecord_write": tfrecord_write.SPEC,
    "preprocess": preprocess.SPEC,
    "batching": batching.SPEC,
    "train": train.SPEC,
    "evaluate": evaluate.SPEC,
}

"""The six stages of the assembly line, engine-agnostic: pure functions over blocks plus a spec."""

from seqline.components import ingest, preprocess, tfrecord_write
from seqline.pipeline.specs import ComponentSpec

__all__ = ["COMPONENTS"]


def _planned(name: str, doc: str) -> ComponentSpec:
    return ComponentSpec(name, "planned", {}, doc=doc)


# An explicit table, in assembly-line order: no registry, no autoloading.
COMPONENTS: dict[str, ComponentSpec] = {
    "ingest": ingest.SPEC,
    "tfrecord_write": tfrecord_write.SPEC,
    "preprocess": preprocess.SPEC,
    "batching": _planned("batching", "Ordered stream -> exact-size batches."),
    "train": _planned("train", "Batches -> SavedModel with an order audit."),
    "evaluate": _planned("evaluate", "Model + eval split -> metrics and blessing."),
}

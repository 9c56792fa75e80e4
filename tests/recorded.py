"""A small project whose runs the recorder's tests record from events they publish: a CSV of
numbers, an identity function (`fns:same`) and a pipeline of read → write → pre."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seqline.components import COMPONENTS
from seqline.orchestration.api import plan_pipeline
from seqline.orchestration.events import EventBus, RunStarted
from seqline.orchestration.recorder import RunRecorder
from seqline.orchestration.run_options import RunOptions
from seqline.orchestration.store import RunStore
from seqline.pipeline.config import load_pipeline
from seqline.pipeline.specs import PipelineSpec

PIPELINE = """\
name: recorded
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv]}}
  - {name: write, component: tfrecord_write}
  - {name: pre, component: preprocess, params: {fn: "fns:same"}}
"""


def project(folder: Path, rows: int, pipeline: str = PIPELINE) -> PipelineSpec:
    """`pipeline` in `folder`, with its CSV of `rows` numbers and its function."""
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(rows)))
    (folder / "fns.py").write_text("def same(batch):\n    return batch\n")
    (folder / "p.yaml").write_text(pipeline)
    return load_pipeline(folder / "p.yaml", COMPONENTS)


@contextmanager
def recording(folder: Path, rows: int = 2) -> Iterator[tuple[RunStore, EventBus]]:
    """Run `r` of PIPELINE begun in `folder`/root: its row in the store, the real recorder
    on a bus, RunStarted published (sampling every 50 ms). The store closes after."""
    spec = project(folder, rows)
    plan = plan_pipeline(spec, RunOptions(sample_seconds=0.05), root=folder / "root",
                         run_id="r")
    with RunStore.open(folder / "root") as store:
        store.create_run("r", spec.name, pipeline_file=None, fingerprint=None, runner="local",
                         options={})
        bus = EventBus(RunRecorder(store, plan, spec, COMPONENTS))
        bus.publish(RunStarted(run_id="r", pipeline=spec.name, runner="local", workers=2,
                               window=8))
        yield store, bus

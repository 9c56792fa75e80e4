"""Checks before work: every stage's parameters against a sample of the records it will read.

A feature, label or slice column that is not in the records used to be found when the stage
came to it, after the stages before it had run for minutes. Here, once the plan is made, the
sample flows down the pipeline on the driver: the source reads its first block, a map stage's
function answers for the first rows of it, and each stage's `preview` checks what it can see
(decisions/0045). It costs one block read and one call of each user function on a few rows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from seqline.pipeline.errors import ConfigError
from seqline.pipeline.specs import ComponentSpec, DriverSpec, PipelineSpec, Sample

if TYPE_CHECKING:
    from seqline.orchestration.plan import Step

__all__ = ["SAMPLE_ROWS", "check_before_work"]

log = logging.getLogger(__name__)

# Enough rows for a function that looks at its neighbours (a rolling mean), few enough that a
# slow function answers at once.
SAMPLE_ROWS = 64


def check_before_work(spec: PipelineSpec, steps: Sequence[Step],
                      components: Mapping[str, ComponentSpec[Any]]) -> None:
    """Raise the first mismatch a stage's `preview` finds in the sample, before any stage runs.

    Nothing is checked when nothing runs (every stage reused or kept). A sample that cannot be
    made (a bad first record, a function that fails on it) ends the checks quietly: what
    happens to bad records is the run's error policy to decide, with the whole story.

    Raises:
        ConfigError: a stage's parameters name what its records do not have, e.g.
            "stage 'batches' (line 20): feature 'temprature' is not in the records
            of 'features'; Did you mean 'temperature'? columns: ...".
    """
    if not any(step.runs for step in steps):
        return
    wanted = _wanted(spec, steps, components)
    samples: dict[str, Sample | None] = {}
    for stage, step in zip(spec.stages, steps, strict=True):
        if stage.name not in wanted:
            continue
        before = samples.get(step.source) if step.source else None
        preview = components[stage.component].preview
        try:
            if preview is None:  # it passes its input on as it is (tfrecord_write, train)
                records = None if before is None else before.records
            else:
                records = preview(stage, spec.base_dir, before)
        except ConfigError:
            raise
        except Exception as exc:  # the run meets it again, under its error policy
            log.debug("no sample past stage %r: %s", stage.name, exc)
            records = None
        samples[stage.name] = None if records is None else \
            Sample(stage.name, records.slice(0, SAMPLE_ROWS))


def _wanted(spec: PipelineSpec, steps: Sequence[Step],
            components: Mapping[str, ComponentSpec[Any]]) -> set[str]:
    """The stages to preview: those that check (a driver stage with a preview: batching,
    evaluate) and every stage whose sample they read. A pipeline that ends in preprocess
    reads no sample and calls no function early."""
    wanted: set[str] = set()
    for stage, step in reversed(list(zip(spec.stages, steps, strict=True))):
        component = components[stage.component]
        if isinstance(component, DriverSpec) and component.preview is not None:
            wanted.add(stage.name)
        if stage.name in wanted and step.source:
            wanted.add(step.source)
    return wanted

"""The live progress bars of `seqline run` on a terminal: one per stage, from the run's
events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seqline.orchestration.cli.console import err
from seqline.orchestration.cli.options import output

if TYPE_CHECKING:
    from seqline.orchestration.events import Event
    from seqline.pipeline.specs import PipelineSpec

__all__ = ["progress_bars"]


def progress_bars(spec: PipelineSpec) -> Any:
    """A live progress bar per stage on a terminal: a subscriber of the run's events."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from seqline.orchestration.events import (
        BlocksDone,
        RecordsConsumed,
        StageCommitted,
        StageReused,
    )

    progress = Progress(SpinnerColumn(), TextColumn("{task.description:<16}"),
                        TextColumn("{task.fields[records]:>12,} records"), TimeElapsedColumn(),
                        console=err, transient=True,
                        disable=output.quiet or not err.is_terminal)  # bars on a terminal only
    tasks = {s.name: progress.add_task(s.name, records=0) for s in spec.stages}

    class Tracker:
        def __enter__(self) -> Tracker:
            progress.start()
            return self

        def __exit__(self, *exc: object) -> None:
            progress.stop()

        def __call__(self, event: Event) -> None:
            if isinstance(event, BlocksDone | StageCommitted | StageReused):
                progress.update(tasks[event.stage or ""], records=event.counts.records_out)
            elif isinstance(event, RecordsConsumed):
                progress.update(tasks[event.stage or ""], records=event.records)

    return Tracker()

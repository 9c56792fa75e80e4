"""The `seqline` command line: run a pipeline file on a chosen runner."""

from __future__ import annotations

import os
import secrets
import sys
import time
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from seqline.components import COMPONENTS
from seqline.orchestration.executor import StageReport, run_pipeline
from seqline.orchestration.runners import make_runner
from seqline.orchestration.verify import StageCheck, verify_run
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.config import load_pipeline
from seqline.pipeline.errors import ConfigError, SeqlineError
from seqline.pipeline.stage import Counts

__all__ = ["app"]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="seqline: an ML pipeline that keeps every record in source order.")
# On a terminal, rich fits tables to it. Piped or in a CI log, nothing is cut or wrapped:
# tables take their natural width and a message stays on one line, so grep finds it.
out = Console() if Console().is_terminal else Console(width=10_000, soft_wrap=True)
err = Console(stderr=True) if Console(stderr=True).is_terminal \
    else Console(stderr=True, width=10_000, soft_wrap=True)

# The one place seqline reads its environment: the default artifact root.
DEFAULT_ROOT = Path(os.environ.get("SEQLINE_ROOT", ".seqline"))


class RunnerName(StrEnum):
    local = "local"
    beam = "beam"
    ray = "ray"


@app.callback()
def main() -> None:
    """seqline: an ML pipeline that keeps every record in source order."""


@app.command()
def run(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    runner: Annotated[RunnerName, typer.Option(help="Where map stages run.")] = RunnerName.local,
    root: Annotated[Path, typer.Option(help="Artifact root ($SEQLINE_ROOT).")] = DEFAULT_ROOT,
    run_id: Annotated[str | None, typer.Option(help="Run id; default: time + random.")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Parallel workers.")] = 2,
    window: Annotated[int | None, typer.Option(
        min=1, help="Max blocks in flight per stage; default 4 x workers.")] = None,
    queue: Annotated[int, typer.Option(
        min=1, help="Blocks waiting between two stages (the assembly line's belts).")] = 4,
    overlap: Annotated[bool, typer.Option(
        "--overlap/--one-by-one", help="Run the stages as an assembly line (default), or "
                                       "each after the one before has finished (to see each "
                                       "stage's time alone).")] = True,
    ray_address: Annotated[str | None, typer.Option(
        help="Join this Ray cluster instead of starting Ray locally.")] = None,
    beam_mode: Annotated[str, typer.Option(
        help="FnApiRunner mode: in_memory, multi_threading or multi_processing.")]
        = "multi_processing",
    check: Annotated[bool, typer.Option(
        "--verify/--no-verify", help="End with `seqline verify` of the run (reads every "
                                     "shard back).")] = True,
    resume: Annotated[bool, typer.Option(
        help="Finish the interrupted run --run-id: keep its committed stages, go on from the "
             "first unfinished one (training resumes from its last epoch).")] = False,
) -> None:
    """Run PIPELINE: every stage in order, artifacts under ROOT/runs/RUN_ID/."""
    try:
        spec = load_pipeline(pipeline, COMPONENTS)
        options: dict = {"workers": workers, "window": window}
        if runner is RunnerName.ray:
            options |= {"address": ray_address, "working_dir": str(spec.base_dir)}
        elif runner is RunnerName.beam:
            options["mode"] = beam_mode
        if resume and not run_id:
            raise ConfigError("--resume needs the --run-id of the run to finish.")
        run_id = run_id or _new_run_id()
        start = time.perf_counter()
        with make_runner(runner.value, **options) as engine, _progress(spec) as progress:
            reports = run_pipeline(spec, engine, root, run_id, progress, resume=resume,
                                   queue=queue, overlap=overlap)
    except ConfigError as exc:
        _fail(f"Configuration error: {exc}", 2)
    except SeqlineError as exc:
        _fail(f"Run failed: {exc}", 1)
    _print_reports(reports, time.perf_counter() - start)
    out.print(f"Run [bold]{run_id}[/] succeeded on {runner.value}; artifacts in "
              f"{(root / 'runs' / run_id).resolve()}")
    for report in reports:
        out.print(f"  {report.stage:<16} {report.path}")
    _print_evaluations(reports)
    if check and not _print_checks(run_id, verify_run(root, run_id)):
        raise typer.Exit(1)


def _print_evaluations(reports: list[StageReport]) -> None:
    """Each evaluate stage's metrics and blessing, as the run's result."""
    for report in reports:
        if COMPONENTS[report.component].writes != "evaluation" or report.path is None:
            continue
        m = read_manifest(report.path)
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in m["metrics"].items())
        verdict = "[green]blessed[/]" if m["blessed"] else "[red]not blessed[/]"
        out.print(f"Evaluation [bold]{report.stage}[/] on {m['examples']:,} eval examples: "
                  f"{metrics}; {verdict}: {'; '.join(m['reasons'])}")
        for column, groups in m["slices"].items():
            for value, values in groups.items():
                out.print(f"  {column}={value}: "
                          + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))


@app.command()
def verify(
    run_id: Annotated[str, typer.Argument(help="The run to check.")],
    root: Annotated[Path, typer.Option(help="Artifact root ($SEQLINE_ROOT).")] = DEFAULT_ROOT,
) -> None:
    """Check RUN_ID's artifacts: shard order, coverage, counts, checksums. Exit 0 if all hold."""
    try:
        checks = verify_run(root, run_id)
    except ConfigError as exc:
        _fail(f"Configuration error: {exc}", 2)
    if not _print_checks(run_id, checks):
        raise typer.Exit(1)


def _print_checks(run_id: str, checks: list[StageCheck]) -> bool:
    """The verify table, then each problem in full; True if every stage holds."""
    table = Table(title=f"verify {run_id}")
    for column in ("stage", "component", "records", "shards", "dead letters", "contract"):
        table.add_column(column, justify="left" if column in ("stage", "component") else "right")
    for c in checks:
        verdict = "[green]ok[/]" if c.ok else f"[red]{len(c.problems)} problem(s)[/]"
        table.add_row(c.stage, c.component, f"{c.records:,}", str(c.shards),
                      f"{c.dead_letters:,}", verdict)
    out.print(table)
    for c in checks:
        for problem in c.problems:
            out.print(f"[red]{c.stage}[/]: {problem}", highlight=False)
    ok = all(c.ok for c in checks)
    out.print("All artifacts hold the ordering contract." if ok else
              "The run's artifacts break the contract; see the problems above.")
    return ok


def _progress(spec):
    progress = Progress(SpinnerColumn(), TextColumn("{task.description:<16}"),
                        TextColumn("{task.fields[records]:>12,} records"), TimeElapsedColumn(),
                        console=err, transient=True)
    tasks = {s.name: progress.add_task(s.name, records=0) for s in spec.stages}

    class Tracker:
        def __enter__(self):
            progress.start()
            return self

        def __exit__(self, *exc):
            progress.stop()

        def __call__(self, stage: str, counts: Counts) -> None:
            progress.update(tasks[stage], records=counts.records_out)

    return Tracker()


def _print_reports(reports: list[StageReport], seconds: float) -> None:
    table = Table(title=f"stages ({seconds:.1f} s)")
    for column in ("stage", "component", "in", "out", "filtered", "exploded",
                   "dead-lettered", "seq", "s", "records/s", "waited in", "waited out"):
        table.add_column(column, justify="left" if column in ("stage", "component") else "right")
    for r in reports:
        c = r.counts
        rate = f"{c.records_in / r.seconds:,.0f}" if r.seconds else "-"
        seq = f"{r.seq_min}..{r.seq_max}" if r.seq_min is not None else "-"
        table.add_row(r.stage, r.component, f"{c.records_in:,}", f"{c.records_out:,}",
                      f"{c.filtered:,}", f"{c.exploded:,}", f"{c.dead_lettered:,}", seq,
                      f"{r.seconds:.2f}", rate, f"{r.waited_input:.2f}",
                      f"{r.waited_output:.2f}")
    out.print(table)


def _new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(2)


def _fail(message: str, code: int) -> None:
    err.print(message, markup=False, highlight=False)
    sys.stdout.flush()
    raise typer.Exit(code)


if __name__ == "__main__":  # python -m seqline.orchestration.cli
    app()

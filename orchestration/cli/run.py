"""The `seqline` command line: run a pipeline file on a chosen runner."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from enum import StrEnum
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from seqline.components import COMPONENTS
from seqline.components.schema import schema_text
from seqline.orchestration.api import execute, new_run_id, plan_pipeline
from seqline.orchestration.console import (
    UNBOUNDED_WIDTH,
    Column,
    console,
    format_count,
    format_rate,
    format_seconds,
    one_line,
    print_table,
    stdout_to_stderr,
)
from seqline.orchestration.dashboard.cli import register as register_dashboard
from seqline.orchestration.environment import (
    DEFAULT_ROOT,
    DEFAULT_STORE,
    quiet_engines,
    quiet_tensorflow,
)
from seqline.orchestration.events import (
    BlocksDone,
    Event,
    RecordsConsumed,
    StageCommitted,
    StageReused,
)
from seqline.orchestration.options import (
    AsJson,
    RunnerName,
    Wide,
    fail,
    no_run,
    output,
    print_json,
    reraise_if_debug,
    usage_line,
)
from seqline.orchestration.plan import RunPlan
from seqline.orchestration.reports import StageReport
from seqline.orchestration.run_options import RunOptions
from seqline.orchestration.runs_cli import run_document, runs_app, store_app
from seqline.orchestration.schedule.cli import register as register_schedules
from seqline.orchestration.verify import StageCheck, verdict, verify_run
from seqline.pipeline.artifacts import check_run_id, read_manifest, run_dir
from seqline.pipeline.config import load_pipeline
from seqline.pipeline.errors import Cancelled, ConfigError, RunNotFound, SeqlineError
from seqline.pipeline.specs import PipelineSpec

__all__ = ["app"]

# Help piped or in a CI log: click's plain text, one line per option and paragraph (rich would
# box it and cut it to 80 columns, or to COLUMNS). On a terminal, rich's panels.
PLAIN_HELP: dict = {} if sys.stdout.isatty() else {
    "rich_markup_mode": None,
    "context_settings": {"terminal_width": UNBOUNDED_WIDTH, "max_content_width": UNBOUNDED_WIDTH}}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="seqline: an ML pipeline that keeps every record in source order.",
                  **PLAIN_HELP)
app.add_typer(runs_app, name="runs")
app.add_typer(store_app, name="store")
register_schedules(app)  # schedule …, scheduler, backfill
register_dashboard(app)  # dashboard
# On a terminal, rich fits tables to it. Piped or in a CI log, nothing is cut or wrapped:
# tables take their natural width and a message stays on one line, so grep finds it.
out = console()
err = console(stderr=True)


class Trigger(StrEnum):
    manual = "manual"
    schedule = "schedule"
    backfill = "backfill"


class BeamMode(StrEnum):
    in_memory = "in_memory"
    multi_threading = "multi_threading"
    multi_processing = "multi_processing"


def _show_version(value: bool) -> None:
    if value:
        out.print(f"seqline {version('seqline')}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[bool, typer.Option(
        "--version", callback=_show_version, is_eager=True,
        help="Print the installed version and exit.")] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print errors only (the exit code tells the rest).")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Also print the engines' own lines (TensorFlow's C++ logs, "
                                "absl, Beam, Ray), which are kept out by default.")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="On an error, print the full Python traceback, not one line (for a "
                        "bug report).")] = False,
) -> None:
    """seqline: an ML pipeline that keeps every record in source order."""
    output.quiet, output.verbose, output.debug = quiet, verbose, debug
    out.quiet = quiet
    quiet_engines(verbose, quiet)  # -q: a retry that succeeded is no error, nor its warning


ROOT_HELP = ("Artifact root ($SEQLINE_ROOT): a folder or an fsspec URL (s3://bucket/prefix; "
             "credentials from the environment, never in the URL).")

@app.command()
def run(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    runner: Annotated[RunnerName, typer.Option(help="Where map stages run.")] = RunnerName.local,
    root: Annotated[str, typer.Option(help=ROOT_HELP)] = str(DEFAULT_ROOT),
    store: Annotated[str | None, typer.Option(
        help="Run store URL ($SEQLINE_STORE), e.g. postgresql+psycopg://user@host/db; "
             "default: SQLite at ROOT/seqline.db.")] = DEFAULT_STORE,
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
    beam_mode: Annotated[BeamMode, typer.Option(
        help="The FnApiRunner's mode.")] = BeamMode.multi_processing,
    beam_option: Annotated[list[str] | None, typer.Option(
        metavar="KEY=VALUE", help="A Beam pipeline option, repeated: e.g. runner=FlinkRunner, "
                                  "temp_location=s3://bucket/tmp (another runner than the "
                                  "FnApiRunner needs one).")] = None,
    check: Annotated[bool, typer.Option(
        "--verify/--no-verify", help="End with `seqline verify` of the run (reads every "
                                     "shard back).")] = True,
    resume: Annotated[bool, typer.Option(
        help="Finish the interrupted run --run-id: keep its committed stages, go on from the "
             "first unfinished one (training resumes from its last epoch).")] = False,
    cache: Annotated[bool, typer.Option(
        "--cache/--no-cache", help="Reuse a stage whose inputs, parameters and code are "
                                   "unchanged since a committed run under ROOT (default), or "
                                   "recompute every stage.")] = True,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the plan (which stages would run, which would be reused, "
                          "and why) and exit 0, running and recording nothing.")] = False,
    trigger: Annotated[Trigger, typer.Option(
        hidden=True, help="Why this run started, for the run store (the scheduler passes "
                          "schedule or backfill).")] = Trigger.manual,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print the run as one JSON document on stdout, as `seqline runs show "
                       "--json` does, with `verify`: verify's verdict (null with "
                       "--no-verify); a failed run's too. With --dry-run, the plan. "
                       "Everything else goes to stderr.")] = False,
    wide: Wide = False,
) -> None:
    """Run PIPELINE: every stage in order, artifacts under ROOT/runs/RUN_ID/."""
    start = time.perf_counter()
    try:
        if run_id is not None:
            check_run_id(run_id)  # a name, never a path: before anything is made
        elif not resume:  # known before the run starts, so that a failed run's JSON is found
            run_id = new_run_id()
        options = RunOptions(
            runner=runner.value, workers=workers, window=window, queue=queue, overlap=overlap,
            cache=cache, resume=resume, verify=check, trigger=trigger.value,
            output="quiet" if output.quiet else "verbose" if output.verbose else "normal",
            engine=_engine(runner, ray_address, beam_mode, beam_option, pipeline))
        spec = load_pipeline(pipeline, COMPONENTS)
        if dry_run:
            _print_plan(plan_pipeline(spec, options, root=root, store=store, run_id=run_id),
                        as_json, wide)
            return
        _check_root(root)
        if not output.verbose and any("tensorflow" in COMPONENTS[s.component].driver_imports
                                      for s in spec.stages):
            quiet_tensorflow()  # training runs in this process: keep TF's C++ start-up out
        with stdout_to_stderr(as_json), _progress(spec) as progress:
            result = execute(spec, options, root=root, store=store, run_id=run_id,
                             pipeline_file=pipeline, subscribers=[progress])
    except ConfigError as exc:  # a user's mistake, before anything ran: exit 2
        fail(one_line(exc))
    except SeqlineError as exc:
        _print_run_json(as_json, root, store, run_id, None)
        _fail(f"Run failed: {one_line(exc)}", 1)
    except Cancelled as exc:
        _print_run_json(as_json, root, store, exc.run_id, None)
        _fail(f"Run {exc.run_id} cancelled ({exc.signal}): its committed stages are kept, "
              f"nothing half-written is. Finish it with: seqline run {pipeline} --resume "
              f"--run-id {exc.run_id}", 128 + signal.Signals[exc.signal].value)
    document = run_document(root, store, result.run_id)
    if as_json:
        _print_run_json(True, root, store, result.run_id, result.checks)
        if result.verified is False:
            _print_problems(result.checks or [], err)  # why exit 1, for the log
            raise typer.Exit(1)
        return
    _print_stages(document, time.perf_counter() - start, wide)
    ran = result.plan.summary() if result.plan else runner.value
    out.print(f"Run [bold]{result.run_id}[/] succeeded: ran {ran}; artifacts in "
              f"{run_dir(result.root, result.run_id).resolve()}", highlight=False)
    for report in result.stages:
        cached = f"  (reused from run {report.cached_from})" if report.cached_from else ""
        out.print(f"  {report.stage:<16} {report.path}{cached}", highlight=False)
    _print_evaluations(result.stages)
    if result.checks is not None and not _print_checks(result.run_id, result.checks, wide):
        raise typer.Exit(1)


def _engine(runner: RunnerName, ray_address: str | None, beam_mode: BeamMode,
            beam_option: list[str] | None, pipeline: Path) -> dict[str, Any]:
    """The chosen engine's own options."""
    if runner is RunnerName.ray:
        return {"address": ray_address, "working_dir": str(pipeline.resolve().parent)}
    if runner is RunnerName.beam:
        return {"mode": beam_mode.value,
                **({"options": _beam_options(beam_option)} if beam_option else {})}
    return {}


def _print_plan(plan: RunPlan, as_json: bool, wide: bool) -> None:
    """`run --dry-run`: each stage, what it would do and why."""
    if as_json:
        print_json(plan.as_json())
        return
    rows = [[step.stage, f"{step.action} (in {step.fused_after}'s job)" if step.fused_after
             else step.action, step.reason, step.component] for step in plan.steps]
    print_table(out, [Column("stage"), Column("action"), Column("why", 1),
                      Column("component", 2)], rows, wide=wide,
                title=f"plan {plan.run_id}: {plan.summary()}")


@app.command()
def schema() -> None:
    """Print the JSON Schema of pipeline files (for editors: VS Code's YAML extension, ...)."""
    sys.stdout.write(schema_text())


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
            for value, values in groups.items():  # the stage on each line, for grep
                out.print(f"  {report.stage} {column}={value}: "
                          + ", ".join(f"{k} {v:.4g}" for k, v in values.items()),
                          highlight=False)


def _print_run_json(asked: bool, root: str, store: str | None, run_id: str | None,
                    checks: list[StageCheck] | None) -> None:
    """`seqline run --json`: the run as the run store recorded it, and verify's verdict."""
    if not asked or run_id is None:
        return
    document = run_document(root, store, run_id)
    if document is not None:  # None: the run failed before its row was written
        print_json({**document, "verify": None if checks is None else verdict(checks)})


@app.command()
def verify(
    run_id: Annotated[str, typer.Argument(help="The run to check.")],
    root: Annotated[str, typer.Option(help=ROOT_HELP)] = str(DEFAULT_ROOT),
    as_json: AsJson = False,
    wide: Wide = False,
) -> None:
    """Check RUN_ID's artifacts: shard order, coverage, counts, checksums. Exit 0 if all hold.

    With --json, the verdict as runs/RUN_ID/verify.json holds it; the exit code is the same.
    """
    try:
        checks = verify_run(root, run_id)
    except RunNotFound:
        no_run(run_id, root)
    except ConfigError as exc:
        fail(one_line(exc))
    if as_json:
        print_json(verdict(checks))
        ok = _print_problems(checks, err)
    else:
        ok = _print_checks(run_id, checks, wide)
    if not ok:
        raise typer.Exit(1)


VERIFY_COLUMNS = [Column("stage"), Column("contract"), Column("records", 1, "right"),
                  Column("shards", 2, "right"), Column("dead letters", 3, "right"),
                  Column("component", 4)]


def _print_checks(run_id: str, checks: list[StageCheck], wide: bool = False) -> bool:
    """The verify table, then each problem in full; True if every stage holds."""
    rows: list[list[str | Text]] = [[
        c.stage, Text("ok", "green") if c.ok else Text(f"{len(c.problems)} problem(s)", "red"),
             format_count(c.records), format_count(c.shards), format_count(c.dead_letters),
             c.component] for c in checks]
    print_table(out, VERIFY_COLUMNS, rows, wide=wide, title=f"verify {run_id}")
    ok = _print_problems(checks, out)
    out.print("All artifacts hold the ordering contract." if ok else
              "The run's artifacts break the contract; see the problems above.")
    return ok


def _print_problems(checks: list[StageCheck], where: Console) -> bool:
    """Each problem on a line of its own, led by its stage; True if there is none."""
    for c in checks:
        for problem in c.problems:
            where.print(f"[red]{c.stage}[/]: {problem}", highlight=False)
    return all(c.ok for c in checks)


def _progress(spec: PipelineSpec) -> Any:
    """A live progress bar per stage on a terminal: a subscriber of the run's events."""
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


# The stage table of a run, as `runs show` has it: what the next look needs always shows.
STAGE_COLUMNS = [Column("stage"), Column("status"), Column("in", 1, "right"),
                 Column("out", 2, "right"), Column("s", 1, "right"),
                 Column("records/s", 3, "right"), Column("waited in", 2, "right"),
                 Column("waited out", 3, "right"), Column("filtered", 4, "right"),
                 Column("dead-lettered", 4, "right"), Column("why", 5)]


def _print_stages(document: dict[str, Any] | None, seconds: float, wide: bool) -> None:
    """The stage table, from the run as the store recorded it (what `runs show --json` and
    the dashboard read). records/s: records in over the stage's seconds, for a stage that
    ran now."""
    rows = []
    for s in (document or {}).get("stages", []):
        ran = s["status"] in ("succeeded", "failed") and s["seconds"]
        rows.append([s["name"], s["status"], format_count(s["records_in"]),
                     format_count(s["records_out"]), format_seconds(s["seconds"]),
                     format_rate((s["records_in"] or 0) / s["seconds"]) if ran else "-",
                     format_seconds(s["waited_input"]), format_seconds(s["waited_output"]),
                     format_count(s["filtered"]), format_count(s["dead_lettered"]),
                     s.get("reason") or ""])
    print_table(out, STAGE_COLUMNS, rows, wide=wide, title=f"stages ({seconds:.1f} s)")


# Beam options are recorded with the run (the run store, the dashboard): never a secret.
SECRET = re.compile(r"key|secret|token|password|credential", re.I)


def _beam_options(given: list[str]) -> list[str]:
    """`--beam-option runner=FlinkRunner` -> Beam's `--runner=FlinkRunner`."""
    options = []
    for option in given:
        key, sep, value = option.partition("=")
        key = key.strip().lstrip("-")
        if not sep or not key:
            raise ConfigError(f"--beam-option {option!r}: expected KEY=VALUE, e.g. "
                              "runner=FlinkRunner.")
        if SECRET.search(key):
            raise ConfigError(
                f"--beam-option {key}: options are recorded with the run, so they must not "
                "carry secrets; give credentials through the environment or the runner's own "
                "configuration (e.g. GOOGLE_APPLICATION_CREDENTIALS, AWS_PROFILE).")
        options.append(f"--{key}={value}")
    return options


def _check_root(root: str) -> None:
    """A local root must be a folder seqline can write, before anything runs (a URL's
    credentials and bucket are checked when the run store opens)."""
    if "://" in root:
        return
    folder = Path(root)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--root {root}: cannot create it ({exc.strerror}). Give a folder "
                          "you can write, or set $SEQLINE_ROOT.") from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"--root {root}: not writable by this user. Give a folder you can "
                          "write, or set $SEQLINE_ROOT.")


def _fail(message: str, code: int) -> None:
    reraise_if_debug()
    err.print(message, markup=False, highlight=False)
    sys.stdout.flush()
    raise typer.Exit(code)


def main_command() -> None:
    """The `seqline` console script: the app, with click's usage errors (a bad option value,
    an unknown option or command, a missing argument) in seqline's one-line voice, exit 2."""
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `seqline` alone (or a group alone): its help
        exc.show()
        code = exc.exit_code
    except UsageError as exc:
        try:
            fail(usage_line(exc))
        except typer.Exit as exit_:
            code = exit_.exit_code
    except ClickException as exc:  # (click's other errors: a file it could not open)
        exc.show()
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # python -m seqline.orchestration.cli
    main_command()

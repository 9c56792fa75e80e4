"""`seqline run`: run a pipeline file on a chosen runner, print its stages, its evaluation
and its verdict (or, with --dry-run, its plan)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from seqline.orchestration.cli.console import (
    Column,
    err,
    format_count,
    format_rate,
    format_seconds,
    one_line,
    out,
    print_table,
    stdout_to_stderr,
)
from seqline.orchestration.cli.options import (
    ROOT_HELP,
    STORE_HELP,
    RunnerName,
    Wide,
    fail,
    output,
    print_json,
    reraise_if_debug,
)
from seqline.orchestration.cli.progress import progress_bars
from seqline.orchestration.cli.runs import run_document
from seqline.orchestration.cli.verify import print_checks, print_problems
from seqline.orchestration.environment import (
    DEFAULT_ROOT,
    ROOT_VARIABLE,
    STORE_VARIABLE,
    quiet_tensorflow,
    tell_launcher,
)
from seqline.orchestration.store.errors import Conflict
from seqline.pipeline.errors import RESUME, Cancelled, ConfigError, SeqlineError

if TYPE_CHECKING:
    from seqline.orchestration.plan import RunPlan
    from seqline.orchestration.reports import StageReport
    from seqline.orchestration.verify import StageCheck

__all__ = ["run"]


class Trigger(StrEnum):
    """What --trigger may say (statuses.Trigger but `resume`, which --resume records)."""

    manual = "manual"
    schedule = "schedule"
    backfill = "backfill"


class BeamMode(StrEnum):
    in_memory = "in_memory"
    multi_threading = "multi_threading"
    multi_processing = "multi_processing"


def run(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline file (YAML).")],
    runner: Annotated[RunnerName, typer.Option(help="Where map stages run.")] = RunnerName.local,
    root: Annotated[str, typer.Option(envvar=ROOT_VARIABLE, help=ROOT_HELP)] = DEFAULT_ROOT,
    store: Annotated[str | None, typer.Option(envvar=STORE_VARIABLE, help=STORE_HELP)] = None,
    run_id: Annotated[str | None, typer.Option(help="Run id; default: time + random.")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Parallel workers.")] = 2,
    window: Annotated[int | None, typer.Option(
        min=1, help="Fix the blocks in flight per stage; default adaptive, from 4 x "
        "workers, widened behind a slow block.")] = None,
    queue: Annotated[int, typer.Option(
        min=1, help="Blocks waiting between two stages (the assembly line's belts).")] = 4,
    overlap: Annotated[bool, typer.Option(
        "--overlap/--one-by-one", help="Run the stages as an assembly line (default), or "
                                       "each after the one before has finished (to see each "
                                       "stage's time alone).")] = True,
    ray_address: Annotated[str | None, typer.Option(
        help="Join this Ray cluster instead of starting Ray locally.")] = None,
    beam_mode: Annotated[BeamMode, typer.Option(
        metavar="MODE", help="The FnApiRunner's mode: in_memory, multi_threading or "
                             "multi_processing.")] = BeamMode.multi_processing,
    beam_option: Annotated[list[str] | None, typer.Option(
        metavar="KEY=VALUE", help="A Beam pipeline option, repeated: e.g. runner=FlinkRunner, "
                                  "or temp_location= a bucket's path (a runner other than "
                                  "the FnApiRunner needs one).")] = None,
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
    from seqline.orchestration.runners.forked import start_early, workers_preload

    preload = workers_preload(runner.value, beam_mode.value, beam_option or [])
    if preload and not dry_run:
        # First: the workers' fork server imports Arrow and the coders (Beam's, Beam too) in
        # its own process while this one imports the rest (decision 49: a tiny local run
        # 0.2 s sooner, a Beam run ~1 s). Its workers inherit its stdout: with --json,
        # stderr, as the run's own below.
        with stdout_to_stderr(as_json):
            start_early(preload)
    # Here, not at the top: the components, the executor and the store load Arrow, pydantic
    # and SQLAlchemy, which `seqline --help` and the other commands do not need.
    from seqline.components import COMPONENTS
    from seqline.orchestration.api import execute, new_run_id, plan_pipeline, quiet_run
    from seqline.orchestration.run_options import RunOptions
    from seqline.pipeline.artifacts import check_run_id, run_dir
    from seqline.pipeline.config import load_pipeline
    from seqline.pipeline.storage import shown

    made: Path | None = None  # the root's folder, if this command made it
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
        if not output.verbose and _model_module(pipeline):
            quiet_tensorflow()  # (before the pipeline loads: the model's module imports keras)
        spec = load_pipeline(pipeline, COMPONENTS)
        if dry_run:
            _print_plan(plan_pipeline(spec, options, root=root, store=store, run_id=run_id),
                        as_json, wide)
            return
        made = _check_root(root)
        quiet_run(spec, options.output)  # here, before the progress bars take the terminal
        with stdout_to_stderr(as_json), progress_bars(spec) as progress:
            result = execute(spec, options, root=root, store=store, run_id=run_id,
                             pipeline_file=pipeline, subscribers=[progress])
    except (ConfigError, Conflict) as exc:  # a user's mistake, or a taken id: exit 2
        if made is not None and made.is_dir() and not any(made.iterdir()):  # a --store typo
            made.rmdir()
        fail(one_line(exc))
    except SeqlineError as exc:
        _print_run_json(as_json, root, store, run_id, None)
        said = one_line(exc)
        if RESUME in said and run_id is not None:  # as execute() recorded it (_say_its_resume)
            said = said.replace(RESUME, f"`{_resume_command(root, store, run_id, pipeline)}`")
        _fail(f"Run failed: {said}", 1)
    except Cancelled as exc:
        code = 128 + signal.Signals[exc.signal].value
        if exc.run_id is None:  # while it was planned: nothing was recorded or written
            _fail(f"Cancelled ({exc.signal}) before the run started: nothing ran.", code)
        _print_run_json(as_json, root, store, exc.run_id, None)
        if exc.succeeded:  # it came after the run's end: only verify was stopped
            _fail(f"Run {exc.run_id} succeeded; its verify was stopped ({exc.signal}). "
                  f"Check it with: {_verify_command(root, store, exc.run_id)}", code)
        _fail(f"Run {exc.run_id} cancelled ({exc.signal}): its committed stages are kept, "
              f"nothing half-written is. Finish it with: "
              f"{_resume_command(root, store, exc.run_id, pipeline)}", code)
    document = run_document(root, store, result.run_id)
    if as_json:
        _print_run_json(True, root, store, result.run_id, result.checks)
        if result.verified is False:
            print_problems(result.checks or [], err)  # why exit 1, for the log
            raise typer.Exit(1)
        return
    _print_stages(document, wide)
    ran = result.plan.summary() if result.plan else runner.value
    out.print(f"Run [bold]{result.run_id}[/] succeeded: ran {ran}; artifacts in "
              f"{run_dir(result.root, result.run_id).resolve()}", highlight=False)
    for report in result.stages:
        cached = f"  (reused from run {report.cached_from})" if report.cached_from else ""
        where = shown(report.path) if report.path is not None else "-"
        out.print(f"  {report.stage:<16} {where}{cached}", highlight=False)
    _print_evaluations(result.stages)
    if result.checks is not None and not print_checks(result.run_id, result.checks, wide):
        raise typer.Exit(1)


def _model_module(pipeline: Path) -> bool:
    """Whether a stage's `model` is `module:function`, imported as the pipeline loads (read as
    plain YAML: load_pipeline then checks the file and says what is wrong with it)."""
    import yaml

    try:
        stages = yaml.safe_load(pipeline.read_text()).get("stages") or []
        return any(":" in str((s.get("params") or {}).get("model", "")) for s in stages)
    except (OSError, yaml.YAMLError, AttributeError, TypeError):
        return False


def _engine(runner: RunnerName, ray_address: str | None, beam_mode: BeamMode,
            beam_option: list[str] | None, pipeline: Path) -> dict[str, Any]:
    """The chosen engine's own options; another engine's (`--beam-option` on the local
    runner) are a ConfigError: they would be dropped, and the run would go on without them."""
    given = {"--ray-address": (ray_address, "ray"), "--beam-option": (beam_option, "beam"),
             "--beam-mode": (beam_mode is not BeamMode.multi_processing, "beam")}
    for option, (value, engine) in given.items():
        if value and runner.value != engine:
            raise ConfigError(f"{option} is an option of --runner {engine}, and this run's "
                              f"runner is {runner.value}: add `--runner {engine}`, or drop "
                              f"{option}.")
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
    print_table(out, [Column("stage"), Column("action"), Column("why", 1, wraps=24),
                      Column("component", 2)], rows, wide=wide,
                title=f"plan {plan.run_id}: {plan.summary()}")


def _print_evaluations(reports: list[StageReport]) -> None:
    """Each evaluate stage's metrics and blessing, as the run's result."""
    from seqline.components import COMPONENTS
    from seqline.pipeline.artifacts import read_manifest

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
    from seqline.orchestration.verify import verdict

    document = run_document(root, store, run_id)
    if document is not None:  # None: the run failed before its row was written
        print_json({**document, "verify": None if checks is None else verdict(checks)})


# The stage table of a run, as `runs show` has it: what the next look needs always shows.
STAGE_COLUMNS = [Column("stage"), Column("status"), Column("in", 1, "right"),
                 Column("out", 2, "right"), Column("s", 1, "right"),
                 Column("records/s", 3, "right"), Column("waited in", 3, "right"),
                 Column("waited out", 3, "right"), Column("filtered", 4, "right"),
                 Column("dead-lettered", 2, "right"), Column("why", 2, wraps=20)]


def _print_stages(document: dict[str, Any] | None, wide: bool) -> None:
    """The stage table, from the run as the store recorded it (what `runs show --json` and
    the dashboard read), titled with the run's seconds as they show them. records/s: records
    in over the stage's seconds, for a stage that ran now."""
    rows = []
    for s in (document or {}).get("stages", []):
        ran = s["status"] in ("succeeded", "failed", "cancelled") and s["seconds"]
        rows.append([s["name"], s["status"], format_count(s["records_in"]),
                     format_count(s["records_out"]), format_seconds(s["seconds"]),
                     format_rate((s["records_in"] or 0) / s["seconds"]) if ran else "-",
                     format_seconds(s["waited_input"]), format_seconds(s["waited_output"]),
                     format_count(s["filtered"]), format_count(s["dead_lettered"]),
                     s.get("reason") or ""])
    seconds = (document or {}).get("seconds")
    title = "stages" if seconds is None else f"stages ({format_seconds(seconds)} s)"
    print_table(out, STAGE_COLUMNS, rows, wide=wide, title=title)


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


def _check_root(root: str) -> Path | None:
    """A local root must be a folder seqline can write, before anything runs (a URL's
    credentials and bucket are checked when the run store opens). The folder, if this made
    it (removed again if the run is refused before anything is written there)."""
    if "://" in root:
        return None
    folder = Path(root)
    made = None if folder.exists() else folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--root {root}: cannot create it ({exc.strerror}). Give a folder "
                          "you can write, or set $SEQLINE_ROOT.") from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"--root {root}: not writable by this user. Give a folder you can "
                          "write, or set $SEQLINE_ROOT.")
    return made


def _resume_command(root: str, store: str | None, run_id: str | None, pipeline: Path) -> str:
    """The command that finishes a cancelled run, as `runs show` and the run's page print it
    (its root, runner and options); the short form if the store cannot say."""
    from seqline.orchestration.reruns import resume_command
    from seqline.orchestration.schedule.launch import root_text
    from seqline.pipeline.storage import open_root

    run = run_document(root, store, run_id) if run_id else None
    found = resume_command(run, root_text(open_root(root)), store) if run else None
    return found or f"seqline run {pipeline} --resume --run-id {run_id}"


def _verify_command(root: str, store: str | None, run_id: str) -> str:
    """`seqline verify` of a run, with the root (and store) it was run with."""
    import shlex

    from seqline.orchestration.reruns import where_words
    from seqline.orchestration.schedule.launch import root_text
    from seqline.pipeline.storage import open_root

    return shlex.join(["seqline", "verify", run_id, *where_words(root_text(open_root(root)),
                                                                 store)])


def _fail(message: str, code: int) -> NoReturn:
    reraise_if_debug()
    tell_launcher(message)  # first: stderr may be a log on a full disk
    with contextlib.suppress(OSError):  # (which must not change the exit code)
        err.print(message, markup=False, highlight=False)
    sys.stdout.flush()
    raise typer.Exit(code)

"""The Python API: a pipeline built from typed stages, run on a chosen runner, like its YAML."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from dataclasses import fields as dataclass_fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from seqline.components import COMPONENTS
from seqline.orchestration.environment import quiet_engines, quiet_tensorflow
from seqline.orchestration.events import EventBus, Subscriber
from seqline.orchestration.executor import never_started, run_plan
from seqline.orchestration.plan import RunPlan, plan_run
from seqline.orchestration.processes import signals_cancel, signals_held
from seqline.orchestration.recorder import RunRecorder
from seqline.orchestration.reports import RunReports, StageReport
from seqline.orchestration.reruns import with_its_resume
from seqline.orchestration.run_file import RunFile
from seqline.orchestration.run_options import RunOptions
from seqline.orchestration.runners import Runner, make_runner
from seqline.orchestration.schedule.launch import root_text
from seqline.orchestration.shard_reads import ShardReads
from seqline.orchestration.store import DB_FILE, RunNotFound, RunStore
from seqline.orchestration.store.engine import store_url
from seqline.orchestration.store.errors import storing
from seqline.orchestration.verify import StageCheck, verify_run
from seqline.pipeline.artifacts import check_run_id, read_manifest, run_dir
from seqline.pipeline.config import (
    as_file,
    build_pipeline,
    load_pipeline,
    make_stage,
    parse_pipeline,
)
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import RESUME, Cancelled, ConfigError, SeqlineError
from seqline.pipeline.specs import PipelineSpec, StageSpec
from seqline.pipeline.storage import Folder, absolute, open_root

__all__ = ["Pipeline", "RunResult", "Stage", "execute", "new_run_id", "plan_pipeline",
           "quiet_run", "run_options", "run_pipeline"]


@dataclass(frozen=True)
class Stage:
    """A stage of a Python-built pipeline: a name and its component's typed parameters.

    The component follows from the parameters' type: `Stage("read", IngestParams(...))` is an
    ingest stage. `inputs` names an earlier stage whose stored records it reads (default: the
    stage before it); `errors` is its error budget; `cache=False` always recomputes it.
    `retries` (default: the pipeline's), `retry_user_errors` and `profile` (False: no data
    profile of its output) are as in a pipeline file.
    """

    name: str
    params: BaseModel
    inputs: Sequence[str] = ()
    errors: ErrorBudget | None = None
    cache: bool = True
    retries: int | None = None
    retry_user_errors: int = 0
    profile: bool = True

    def spec(self) -> StageSpec[Any]:
        component = next((name for name, c in COMPONENTS.items()
                          if type(self.params) is c.params), None)
        if component is None:
            raise ConfigError(f"stage {self.name!r}: {type(self.params).__name__} is not a "
                              "component's parameters; use one of "
                              f"{', '.join(c.params.__name__ for c in COMPONENTS.values())}.")
        for field_, value in (("retries", self.retries),
                              ("retry_user_errors", self.retry_user_errors)):
            if value is not None and not 0 <= value <= 10:
                raise ConfigError(f"stage {self.name!r}: {field_} must be from 0 to 10, "
                                  f"got {value}.")
        return make_stage(self.name, component, self.params, COMPONENTS,
                          inputs=tuple(self.inputs), errors=self.errors, cache=self.cache,
                          retries=3 if self.retries is None else self.retries,
                          retry_user_errors=self.retry_user_errors, profile=self.profile)


@dataclass(frozen=True)
class RunResult:
    """What a run did: its status, each stage's report and artifact, the evaluation, verify."""

    run_id: str
    status: str  # "succeeded" or "failed"
    root: Folder
    stages: list[StageReport] = field(default_factory=list)
    checks: list[StageCheck] | None = None  # `seqline verify`'s verdict, when it ran
    error: SeqlineError | None = None
    plan: RunPlan | None = None  # what ran, what was reused, and why

    @property
    def artifacts(self) -> dict[str, Folder]:
        """Each committed stage's artifact folder, by stage name."""
        return {r.stage: r.path for r in self.stages if r.path is not None}

    @property
    def evaluations(self) -> dict[str, dict[str, Any]]:
        """Each evaluate stage's manifest (metrics, slices, blessed, reasons), by stage name."""
        return {r.stage: read_manifest(r.path) for r in self.stages if r.path is not None
                and COMPONENTS[r.component].writes == "evaluation"}

    @property
    def verified(self) -> bool | None:
        return None if self.checks is None else all(c.ok for c in self.checks)


class Pipeline:
    """A pipeline as a Python object: the same checks and messages as a pipeline file.

    Example:
        >>> pipeline = Pipeline("weather", [
        ...     Stage("read", IngestParams(format="csv", paths=["seattle-weather.csv"])),
        ...     Stage("examples", TFRecordWriteParams()),
        ... ], base_dir="data/seattle_weather")  # paths are relative to base_dir
        >>> result = pipeline.run(runner="local", root=".seqline")  # doctest: +SKIP

    Raises:
        ConfigError: on construction, for anything a pipeline file would be refused for.
    """

    def __init__(self, name: str, stages: Sequence[Stage], *, base_dir: Path | str = ".",
                 errors: ErrorBudget | None = None, retries: int = 3) -> None:
        specs = [replace(s, errors=s.errors or errors,
                         retries=retries if s.retries is None else s.retries).spec()
                 for s in stages]
        self.spec = build_pipeline(name, specs, Path(base_dir).resolve(), COMPONENTS,
                                   source=f"pipeline {name!r}", errors=errors)

    @classmethod
    def from_spec(cls, spec: PipelineSpec) -> Pipeline:
        pipeline = cls.__new__(cls)
        pipeline.spec = spec
        return pipeline

    @classmethod
    def from_yaml(cls, path: Path | str) -> Pipeline:
        """Load a pipeline file (relative paths and user modules resolve beside it)."""
        return cls.from_spec(load_pipeline(path, COMPONENTS))

    @classmethod
    def from_yaml_text(cls, text: str, base_dir: Path | str = ".") -> Pipeline:
        return cls.from_spec(parse_pipeline(text, Path(base_dir).resolve(), COMPONENTS))

    def to_yaml(self) -> str:
        """The pipeline as a pipeline file: parameters as set (defaults left out)."""
        return yaml.safe_dump(as_file(self.spec), sort_keys=False, width=100)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def stages(self) -> tuple[StageSpec[Any], ...]:
        return self.spec.stages

    def run(self, *, runner: str = "local", root: Path | str = ".seqline",
            run_id: str | None = None, raise_on_error: bool = True,
            **options: Any) -> RunResult:
        """Run every stage on `runner` ("local", "beam" or "ray"); `options` are RunOptions'
        fields (workers, resume, verify, cache, ...) and engine options; see `execute`."""
        return execute(self.spec, root=root, run_id=run_id, raise_on_error=raise_on_error,
                       runner=runner, **options)

    def plan(self, *, runner: str = "local", root: Path | str = ".seqline",
             run_id: str | None = None, **options: Any) -> RunPlan:
        """What `run` would do, and why, without doing anything; see `plan_pipeline`."""
        return plan_pipeline(self.spec, root=root, run_id=run_id, runner=runner, **options)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and self.spec == other.spec

    __hash__ = None  # type: ignore[assignment]  # mutable-looking: compare, don't hash


def execute(spec: PipelineSpec, options: RunOptions | None = None, *,
            root: Folder | str = Path(".seqline"), store: str | None = None,
            run_id: str | None = None, raise_on_error: bool = True,
            pipeline_file: Path | None = None, subscribers: Sequence[Subscriber] = (),
            **fields: Any) -> RunResult:
    """Run a pipeline: the one path behind `seqline run` and `Pipeline.run`.

    Plan (which stages run, which are reused, and why), record the run, run the plan on the
    chosen engine, end with `seqline verify` (of shards read back as the run went). All that
    happens is published to the run store, run.json and `subscribers` (the progress).

    Args:
        spec: the validated pipeline.
        options: how the run goes; or, instead, its fields as keywords (`runner="ray"`,
            `workers=4`, ...), any other keyword being an engine option (Beam's `mode`, Ray's
            `address`).
        root: the artifact root, a local folder or an fsspec URL (s3://bucket/prefix, ...);
            the run's folders go to `<root>/runs/<run_id>/`.
        store: the run store's URL; default: SQLite at `<root>/seqline.db`, or for an
            object-store root at `~/.seqline/stores/<root as a name>.db` (store.engine.store_url).
        run_id: default: the time and a random suffix.
        raise_on_error: raise the run's error (else return it in a failed RunResult).
        pipeline_file: the file the pipeline came from, for the run store.
        subscribers: more receivers of the run's events.

    Raises:
        ConfigError: bad options, or a run id that is taken (or unknown, resuming).
        StageError: a stage failed (unless `raise_on_error` is False).
    """
    options, run_id = _options_and_id(spec, options, run_id, fields)
    _check_engine(options)
    root = absolute(open_root(root))
    quiet_run(spec, options.output)
    # Ctrl-C and SIGTERM cancel from here on (a cancel the process drops is found again), as
    # the engine starts (Ray's own SIGTERM exit included) and after (Ray sets its handler).
    ended = False  # once the run's success is recorded, a cancel stops only its verify
    try:
        with signals_cancel(), RunStore.open(*store_url(root, store)) as runs:
            plan = plan_run(spec, options, COMPONENTS, run_id=run_id, root=root, store=runs)
            _open_record(runs, spec, plan, pipeline_file)
            reports, reads = RunReports(), ShardReads() if options.verify else None
            bus = EventBus(RunRecorder(runs, plan, spec, COMPONENTS), reports,
                           RunFile(run_dir(root, run_id), options.queue), *subscribers)
            try:
                with signals_cancel(), _runner(options) as runner, signals_cancel():
                    run_plan(plan, spec, runner, root, bus, reads)
            except KeyboardInterrupt as exc:
                cancelled = exc if isinstance(exc, Cancelled) else Cancelled("SIGINT")
                cancelled.run_id = run_id
                if not reports.stages:  # as the engine started: no stage was even planned
                    never_started(plan, spec, root, bus, cancelled)
                bus.publish(reports.run_ended(plan, "cancelled", cancelled))
                raise cancelled from None
            except SeqlineError as exc:
                _say_its_resume(exc, runs, root, store, run_id)
                bus.publish(reports.run_ended(plan, "failed", exc))
                if raise_on_error or isinstance(exc, ConfigError):
                    raise
                return RunResult(run_id, "failed", root, reports.stages, error=exc, plan=plan)
            except BaseException as exc:
                bus.publish(reports.run_ended(plan, "failed", exc))
                raise
            with signals_held():  # not cut halfway: the run's record says it succeeded
                bus.publish(reports.run_ended(plan, "succeeded"))
                ended = True
        with signals_cancel():
            checks = verify_run(root, run_id, reads) if options.verify else None
    except KeyboardInterrupt as exc:
        if not ended:
            raise
        late = exc if isinstance(exc, Cancelled) else Cancelled("SIGINT")
        late.run_id, late.succeeded = run_id, True  # (the command line says how to verify)
        raise late from None
    return RunResult(run_id, "succeeded", root, reports.stages, checks, plan=plan)


def _say_its_resume(exc: SeqlineError, runs: RunStore, root: Folder, store: str | None,
                    run_id: str) -> None:
    """A failure said where the run was not known gives the run's own resume command, on
    every surface alike (the terminal, the store, the launcher's last words)."""
    if not (exc.args and isinstance(exc.args[0], str) and RESUME in exc.args[0]):
        return
    try:
        run = runs.show_run(run_id)
    except Exception:  # noqa: BLE001 - the store failing too: the hint stays as said
        return
    exc.args = (with_its_resume(exc.args[0], run, root_text(root), store), *exc.args[1:])


def run_pipeline(spec: PipelineSpec, runner: Runner, root: Folder | str, run_id: str, *,
                 subscribers: Sequence[Subscriber] = (), **fields: Any) -> list[StageReport]:
    """Run `spec` on an engine already started, with no run store (so nothing is cached):
    for tests, benchmarks and a user's own engine. `fields` are RunOptions' (queue, overlap,
    resume, ...). Returns each stage's report; raises as `execute` does.
    """
    options = run_options(spec, runner=runner.name, workers=runner.workers,
                          window=runner.window, cache=False, **fields)
    root = absolute(open_root(root))
    plan = plan_run(spec, options, COMPONENTS, run_id=check_run_id(run_id), root=root,
                    store=None)
    reports = RunReports()
    bus = EventBus(reports, RunFile(run_dir(root, run_id), options.queue), *subscribers)
    try:
        run_plan(plan, spec, runner, root, bus)
    except BaseException as exc:
        bus.publish(reports.run_ended(plan, "cancelled" if isinstance(exc, KeyboardInterrupt)
                                      else "failed", exc))
        raise
    bus.publish(reports.run_ended(plan, "succeeded"))
    return reports.stages


def plan_pipeline(spec: PipelineSpec, options: RunOptions | None = None, *,
                  root: Folder | str = Path(".seqline"), store: str | None = None,
                  run_id: str | None = None, **fields: Any) -> RunPlan:
    """What `execute` would do, and why, without doing anything (`seqline run --dry-run`).

    Reads the root and, if there is one, the run store; creates and writes nothing.
    """
    options, run_id = _options_and_id(spec, options, run_id, fields)
    root = open_root(root)
    folder, url = store_url(root, store, create=False)
    if url is None and not (Path(folder) / DB_FILE).exists():
        return plan_run(spec, options, COMPONENTS, run_id=run_id, root=root, store=None)
    if url is not None and url.startswith("sqlite:///") \
            and not Path(url.removeprefix("sqlite:///")).exists():
        return plan_run(spec, options, COMPONENTS, run_id=run_id, root=root, store=None)
    with RunStore.open(folder, url) as runs:
        return plan_run(spec, options, COMPONENTS, run_id=run_id, root=root, store=runs)


def _options_and_id(spec: PipelineSpec, options: RunOptions | None, run_id: str | None,
                    fields: dict[str, Any]) -> tuple[RunOptions, str]:
    """The run's options, and its id: a given one checked before anything (it names a
    folder), else a fresh one; resuming needs one."""
    if run_id is not None:
        check_run_id(run_id)
    options = options or run_options(spec, **fields)
    if options.resume and run_id is None:
        raise ConfigError("resuming needs the run id of the run to finish (--run-id).")
    return options, run_id if run_id is not None else new_run_id()


def run_options(spec: PipelineSpec, **fields: Any) -> RunOptions:
    """RunOptions from keywords: its own fields by name, any other an engine option."""
    own = {f.name for f in dataclass_fields(RunOptions)}
    engine = {k: v for k, v in fields.items() if k not in own}
    if fields.get("runner") == "ray":  # user modules import on every node of a cluster
        engine.setdefault("working_dir", str(spec.base_dir))
    return RunOptions(**{k: v for k, v in fields.items() if k in own},
                      engine={**dict(fields.get("engine") or {}), **engine})


def _check_engine(options: RunOptions) -> None:
    """The engine's own options, checked before the run is recorded: a ConfigError."""
    if options.runner == "beam":  # (Beam is imported here only when it runs)
        from seqline.orchestration.runners.beam_options import scratch_location

        scratch_location(list(options.engine.get("options") or []),
                         options.engine.get("scratch"))


def _runner(options: RunOptions) -> Runner:
    """The chosen engine's runner; `with` starts the engine."""
    engine = dict(options.engine)
    if options.runner == "ray":
        engine["verbose"] = options.output == "verbose"
    return make_runner(options.runner, workers=options.workers, window=options.window, **engine)


def quiet_run(spec: PipelineSpec, output: str) -> None:
    """The engines' own lines (TF's C++ start-up, their loggers) only when `output` is
    verbose; TensorFlow imported quietly if a stage needs it here (again: a no-op)."""
    quiet_engines(output == "verbose", output == "quiet")
    if output != "verbose" and any(
            "tensorflow" in COMPONENTS[s.component].driver_imports for s in spec.stages):
        quiet_tensorflow()


def _open_record(runs: RunStore, spec: PipelineSpec, plan: RunPlan,
                 pipeline_file: Path | None) -> None:
    """The run's row, made before anything runs: a taken run id fails here (exit 2), a store
    that refuses the write (a full disk) in one line, exit 1 (soak finding 10)."""
    options = plan.options
    with storing(runs.url, f"run {plan.run_id}'s start", "run the same command again "
                 "(nothing has run)"):
        if options.resume:
            try:
                runs.resume_run(plan.run_id, options.runner, options.recorded)
                return
            except RunNotFound:  # a run from before the store: it is recorded from here on
                pass
        text = pipeline_file.read_text() if pipeline_file else \
            Pipeline.from_spec(spec).to_yaml()
        runs.create_run(plan.run_id, spec.name, runner=options.runner, options=options.recorded,
                        trigger="resume" if options.resume else options.trigger,
                        pipeline_file=str(pipeline_file.resolve()) if pipeline_file else None,
                        fingerprint=hashlib.sha256(text.encode()).hexdigest())


def new_run_id() -> str:
    """The time (UTC) and a random suffix: sortable, and unique among concurrent starts."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(2)

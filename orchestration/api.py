"""The Python API: a pipeline built from typed stages, run on a chosen runner, like its YAML."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from types import FrameType
from typing import Any

import yaml
from pydantic import BaseModel

from seqline.components import COMPONENTS
from seqline.orchestration.cache import cache_hits, cache_keys, damage
from seqline.orchestration.executor import Progress, StageReport, run_pipeline
from seqline.orchestration.recorder import SAMPLE_SECONDS, RunRecorder
from seqline.orchestration.runners import make_runner
from seqline.orchestration.store import RunStore
from seqline.orchestration.verify import StageCheck, verify_run
from seqline.pipeline.artifacts import committed_stages, read_manifest, run_dir
from seqline.pipeline.config import build_pipeline, load_pipeline, make_stage, parse_pipeline
from seqline.pipeline.deadletters import ErrorBudget
from seqline.pipeline.errors import Cancelled, ConfigError, SeqlineError
from seqline.pipeline.specs import PipelineSpec, StageSpec
from seqline.pipeline.storage import Folder, Location, open_root, slug

__all__ = ["Pipeline", "RunResult", "Stage", "execute", "new_run_id"]

log = logging.getLogger("seqline")


@dataclass(frozen=True)
class Stage:
    """A stage of a Python-built pipeline: a name and its component's typed parameters.

    The component follows from the parameters' type: `Stage("read", IngestParams(...))` is an
    ingest stage. `inputs` names an earlier stage whose stored records it reads (default: the
    stage before it); `errors` is its error budget; `cache=False` always recomputes it.
    `retries` (default: the pipeline's) and `retry_user_errors` are as in a pipeline file.
    """

    name: str
    params: BaseModel
    inputs: Sequence[str] = ()
    errors: ErrorBudget | None = None
    cache: bool = True
    retries: int | None = None
    retry_user_errors: int = 0

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
                          retry_user_errors=self.retry_user_errors)


@dataclass(frozen=True)
class RunResult:
    """What a run did: its status, each stage's report and artifact, the evaluation, verify."""

    run_id: str
    status: str  # "succeeded" or "failed"
    root: Folder
    stages: list[StageReport] = field(default_factory=list)
    checks: list[StageCheck] | None = None  # `seqline verify`'s verdict, when it ran
    error: SeqlineError | None = None

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
        ...     Stage("read", IngestParams(format="csv", paths=["weather.csv"])),
        ...     Stage("examples", TFRecordWriteParams()),
        ... ], base_dir="data")
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
        return yaml.safe_dump(_as_file(self.spec), sort_keys=False, width=100)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def stages(self) -> tuple[StageSpec[Any], ...]:
        return self.spec.stages

    def run(self, *, runner: str = "local", root: Path | str = ".seqline",
            run_id: str | None = None, resume: bool = False, verify: bool = True,
            raise_on_error: bool = True, **options: Any) -> RunResult:
        """Run every stage on `runner` ("local", "beam" or "ray"); see `execute`."""
        return execute(self.spec, runner=runner, root=root, run_id=run_id,
                       resume=resume, verify=verify, raise_on_error=raise_on_error, **options)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and self.spec == other.spec

    __hash__ = None  # type: ignore[assignment]  # mutable-looking: compare, don't hash


def execute(spec: PipelineSpec, *, runner: str = "local",
            root: Folder | str = Path(".seqline"),
            store: str | None = None, run_id: str | None = None, resume: bool = False,
            verify: bool = True, cache: bool = True, raise_on_error: bool = True,
            progress: Progress | None = None, workers: int = 2, window: int | None = None,
            queue: int = 4, overlap: bool = True, trigger: str = "manual",
            pipeline_file: Path | None = None, sample_seconds: float | None = SAMPLE_SECONDS,
            **engine: Any) -> RunResult:
    """Run a pipeline: the one path behind `seqline run` and `Pipeline.run`.

    Args:
        spec: the validated pipeline.
        runner: "local", "beam" or "ray"; `engine` holds its own options (Beam's `mode`,
            Ray's `address`).
        root: the artifact root, a local folder or an fsspec URL (s3://bucket/prefix, ...);
            the run's folders go to `<root>/runs/<run_id>/`.
        store: the run store's URL; default: SQLite at `<root>/seqline.db`, or for an
            object-store root at `~/.seqline/stores/<root as a name>.db` (store_url).
        run_id: default: the time and a random suffix.
        resume: finish the interrupted run `run_id`, keeping its committed stages.
        verify: end with `seqline verify` of the run.
        cache: reuse stages an earlier run under `root` made from the same inputs,
            parameters and code (a stage's `cache: false` still recomputes it).
        raise_on_error: raise the run's error (else return it in a failed RunResult).
        progress, workers, window, queue, overlap: see `run_pipeline`.
        trigger: why the run started (manual, schedule, backfill), for the run store.
        pipeline_file: the file the pipeline came from, for the run store.
        sample_seconds: how often the run store samples running stages (None: never).

    Raises:
        ConfigError: bad options, or a run id that is taken (or unknown, resuming).
        StageError: a stage failed (unless `raise_on_error` is False).
    """
    if resume and not run_id:
        raise ConfigError("resuming needs the run id of the run to finish (--run-id).")
    run_id = run_id or new_run_id()
    root = open_root(root)
    if runner == "ray":
        engine.setdefault("working_dir", str(spec.base_dir))
    options = {"workers": workers, "window": window, "queue": queue, "overlap": overlap,
               "cache": cache, **engine}
    keys = cache_keys(spec, COMPONENTS, seqline_version=version("seqline"),
                      inputs=_input_files, root=root)
    with RunStore.open(*store_url(root, store)) as runs:
        _open_record(runs, root, spec, run_id, runner, options, trigger, resume, pipeline_file)
        if resume:
            _drop_damaged(runs, run_dir(root, run_id))
        hits = cache_hits(spec, keys, runs, root) if cache and not resume else {}
        recorder = RunRecorder(runs, run_id, COMPONENTS, keys, sample_seconds)
        try:
            # After the engine starts: Ray installs a SIGTERM handler of its own that ends
            # the process at once.
            with make_runner(runner, workers=workers, window=window, **engine) as engine_, \
                    _sigterm_cancels():
                recorder.start(engine_)
                reports = run_pipeline(spec, engine_, root, run_id, progress, resume=resume,
                                       queue=queue, overlap=overlap, recorder=recorder,
                                       cached=hits)
        except KeyboardInterrupt as exc:
            cancelled = exc if isinstance(exc, Cancelled) else Cancelled("SIGINT")
            cancelled.run_id = run_id
            recorder.close("cancelled", cancelled)
            raise cancelled from None
        except SeqlineError as exc:
            recorder.close("failed", exc)
            if raise_on_error or isinstance(exc, ConfigError):
                raise
            return RunResult(run_id, "failed", root, error=exc)
        except BaseException as exc:
            recorder.close("failed", exc)
            raise
        recorder.close("succeeded")
    checks = verify_run(root, run_id) if verify else None
    return RunResult(run_id, "succeeded", root, reports, checks)


def store_url(root: Folder, url: str | None) -> tuple[Path, str | None]:
    """`RunStore.open`'s arguments: the store of a local root is beside its runs; an object
    store holds no database, so by default its store is a local SQLite file named after it.

    Example: s3://bucket/team/root -> ~/.seqline/stores/s3-bucket-team-root.db ($SEQLINE_HOME
    instead of ~/.seqline). Several machines sharing a root share a store through --store.
    """
    if url is not None or isinstance(root, Path):
        return (root if isinstance(root, Path) else Path()), url
    home = Path(os.environ.get("SEQLINE_HOME") or Path.home() / ".seqline") / "stores"
    home.mkdir(parents=True, exist_ok=True)
    return home, f"sqlite:///{(home / slug(root.url)).resolve()}.db"


def _drop_damaged(runs: RunStore, folder: Folder) -> None:
    """Before a resume keeps a run's committed stages: remove those whose bytes changed
    since their commit (a flipped bit, a truncated shard), so that they are made again."""
    try:
        stages = runs.show_run(folder.name)["stages"]
    except ConfigError:  # a run from before the store: the manifests' hashes still hold
        stages = []
    recorded = {s["name"]: _output_checksum(s) for s in stages}
    for stage in committed_stages(folder):
        problem = damage(stage, recorded.get(stage.name))
        if problem is not None:
            log.warning("run %s, stage %r: %s; making the stage again instead of trusting it",
                        folder.name, stage.name, problem)
            stage.remove() if isinstance(stage, Location) else shutil.rmtree(stage)


def _output_checksum(stage: dict[str, Any]) -> str | None:
    """The checksum recorded when the stage committed (in its latest attempt that did)."""
    for attempt in [stage, *reversed(stage.get("history") or [])]:
        for artifact in attempt.get("artifacts") or []:
            if artifact.get("role") == "output" and artifact.get("checksum"):
                return str(artifact["checksum"])
    return None


@contextmanager
def _sigterm_cancels() -> Iterator[None]:
    """SIGTERM (systemd, Kubernetes, `kill`) cancels the run as Ctrl-C does.

    Only from the main thread, where Python delivers signals; elsewhere (a run inside a
    user's thread) the default stays.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def cancel(signum: int, frame: FrameType | None) -> None:
        signal.signal(signum, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup
        raise Cancelled(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, cancel)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _open_record(runs: RunStore, root: Folder, spec: PipelineSpec, run_id: str, runner: str,
                 options: dict[str, Any], trigger: str, resume: bool,
                 pipeline_file: Path | None) -> None:
    """The run's row, made before anything runs: a taken run id fails here (exit 2)."""
    if resume:
        try:
            runs.resume_run(run_id)
            return
        except ConfigError:
            if not (run_dir(root, run_id) / "run.json").exists():
                raise  # else: a run from before the store; it is recorded from here on
    text = pipeline_file.read_text() if pipeline_file else Pipeline.from_spec(spec).to_yaml()
    runs.create_run(run_id, spec.name, runner=runner, options=options,
                    trigger="resume" if resume else trigger,
                    pipeline_file=str(pipeline_file.resolve()) if pipeline_file else None,
                    fingerprint=hashlib.sha256(text.encode()).hexdigest())


def _input_files(stage: StageSpec[Any], base_dir: Path) -> list[str]:
    from seqline.components.ingest import resolve_sources

    return [source.name for source in resolve_sources(stage, base_dir)]


def new_run_id() -> str:
    """The time (UTC) and a random suffix: sortable, and unique among concurrent starts."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(2)


def _as_file(spec: PipelineSpec) -> dict[str, Any]:
    data: dict[str, Any] = {"name": spec.name}
    if spec.errors is not None:
        data["errors"] = spec.errors.model_dump(exclude_defaults=True)
    data["stages"] = [_stage_entry(s, spec.errors) for s in spec.stages]
    return data


def _stage_entry(stage: StageSpec[Any], default: ErrorBudget | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": stage.name, "component": stage.component}
    params = stage.params.model_dump(mode="json", exclude_unset=True)
    if params:
        entry["params"] = params
    if stage.inputs:
        entry["inputs"] = list(stage.inputs)
    if stage.errors is not None and stage.errors != default:
        entry["errors"] = stage.errors.model_dump(exclude_defaults=True)
    if not stage.cache:
        entry["cache"] = False
    if stage.retries != 3:
        entry["retries"] = stage.retries
    if stage.retry_user_errors:
        entry["retry_user_errors"] = stage.retry_user_errors
    return entry

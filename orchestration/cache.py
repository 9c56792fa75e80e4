"""Cache keys: what a stage's output depends on, hashed, so an unchanged stage is not redone.

Like TFX's: a stage's key covers its component and the component's version, its typed
parameters and error budget, the seqline version, the source of the user code it runs (the
function's module and the pipeline folder's modules that module imports), and what it reads:
the input files' bytes for ingest, the key of the stage it reads otherwise (stages are
deterministic, so equal keys mean equal outputs). Evaluate adds the baseline it compares with.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqline.components.ingest.readers import Source
from seqline.pipeline.artifacts import MANIFEST, listed_files, read_manifest
from seqline.pipeline.errors import RunNotFound
from seqline.pipeline.specs import ComponentSpec, PipelineSpec, StageSpec
from seqline.pipeline.storage import Folder, fspath, storage_of
from seqline.pipeline.storage import folder as storage_folder

__all__ = ["NOT_IN_FOLDER", "CacheHit", "artifact_checksum", "cache_hit", "cache_keys",
           "cache_hits", "cache_parts", "code_digest", "damage", "file_digest", "intact_committed",
           "key_of"]

# The source digest of a module the pipeline's folder does not have (an installed package).
NOT_IN_FOLDER = hashlib.blake2b(b"", digest_size=16).hexdigest()
# 1 MiB reads: large enough that hashing runs at disk speed, small enough to stream any file.
_CHUNK = 1 << 20


def cache_keys(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]], *,
               seqline_version: str, inputs: Callable[[StageSpec[Any], Path], list[str]],
               root: Folder) -> dict[str, str]:
    """Every stage's cache key, in pipeline order (the digest of its `cache_parts`).

    Example: changing only preprocess's function changes the keys of preprocess and every
    stage after it, never those of ingest and tfrecord_write.
    """
    parts = cache_parts(spec, components, seqline_version=seqline_version, inputs=inputs,
                        root=root)
    return {name: key_of(part) for name, part in parts.items()}


def cache_parts(spec: PipelineSpec, components: Mapping[str, ComponentSpec[Any]], *,
                seqline_version: str, inputs: Callable[[StageSpec[Any], Path], list[str]],
                root: Folder) -> dict[str, dict[str, Any]]:
    """What every stage's cache key is made of, in pipeline order, as JSON: kept with each
    stage run, so that the next plan can say which part changed.

    Args:
        spec: the pipeline.
        components: the component of each stage, by name.
        seqline_version: the running seqline's version.
        inputs: the files a stage that reads files reads (ingest's resolved paths).
        root: the artifact root (what a component's `depends_on` may look at).

    Returns:
        Per stage: component, version, params, errors, seqline, code (module -> digest),
        reads ({"files": {path: digest}} or {"stage": name, "key": its key}), depends_on.
    """
    parts: dict[str, dict[str, Any]] = {}
    for i, stage in enumerate(spec.stages):
        component = components[stage.component]
        source = stage.inputs[0] if stage.inputs else spec.stages[i - 1].name if i else None
        reads = {"files": {p: file_digest(p) for p in inputs(stage, spec.base_dir)}} \
            if component.reads == "files" \
            else {"stage": source, "key": key_of(parts[source]) if source in parts else None}
        depends = None if component.depends_on is None else \
            component.depends_on(root, spec.name, stage)  # type: ignore[arg-type]
        parts[stage.name] = {
            "component": stage.component, "version": component.version,
            "params": stage.params.model_dump(mode="json"),
            "errors": stage.errors.model_dump(mode="json") if stage.errors else None,
            "seqline": seqline_version, "code": _code_of(stage, spec.base_dir),
            "reads": reads,
            "depends_on": json.loads(json.dumps(depends, default=str)),
        }
    return parts


def key_of(parts: Mapping[str, Any]) -> str:
    """A stage's cache key: the digest of its parts."""
    return _digest(parts)


def _code_of(stage: StageSpec[Any], base_dir: Path) -> dict[str, str] | None:
    named = [getattr(stage.params, name, None) for name in ("fn", "model")]
    refs = [r for r in named if isinstance(r, str) and ":" in r]
    if not refs:
        return None
    return {module: digest for ref in refs for module, digest in code_parts(ref, base_dir).items()}


def code_digest(ref: str, base_dir: Path) -> str:
    """The source of `module:function`'s module and the pipeline folder's modules it imports.

    Modules outside the folder (installed packages) are covered by their versions elsewhere;
    a module the folder lacks is noted by name, so adding it later changes the digest.
    """
    return _digest(sorted(code_parts(ref, base_dir).items()))


def code_parts(ref: str, base_dir: Path) -> dict[str, str]:
    """`code_digest`'s parts: each module's source digest, by module name."""
    module = ref.partition(":")[0]
    seen: dict[str, str] = {}
    pending = [module]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        path = _module_file(name, base_dir)
        source = path.read_text() if path else ""
        seen[name] = hashlib.blake2b(source.encode(), digest_size=16).hexdigest()
        pending.extend(_imports(source, name) if path else [])
    return dict(sorted(seen.items()))


def _module_file(name: str, base_dir: Path) -> Path | None:
    base = Path(base_dir, *name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(source: str, module: str) -> Iterator[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return  # the source itself is in the digest; loading it will report the error
    package = module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .helpers import x
                parts = package.split(".") if package else []
                base = ".".join([*parts[:len(parts) - node.level + 1], base]).strip(".")
            yield base
            yield from (f"{base}.{alias.name}".strip(".") for alias in node.names)


def file_digest(path: str) -> str:
    """A file's content hash (local path or fsspec URL), for ingest's cache key."""
    digest = hashlib.blake2b(digest_size=16)
    with Source(path, local="://" not in path).open(decompress=False) as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def artifact_checksum(folder: Folder | str, known: Mapping[str, str] | None = None) -> str:
    """Every file of a committed stage folder, names and bytes: changes if any byte does.

    The digest covers each file's name and SHA-256. `known` gives the SHA-256 of files whose
    writer hashed them already (a manifest's shards and dead letters), so a commit does not
    read them again; checking a folder before reuse passes none and reads every byte.

    On an object store it covers what the manifest vouches for (files not listed are an
    abandoned attempt's garbage): the manifest, its shards and dead letters by SHA-256, and
    files a driver stage uploaded (a SavedModel, checkpoints) by size and the store's ETag,
    which the store computed itself, rather than downloading a model again at every commit.
    """
    folder = storage_folder(folder) if isinstance(folder, str) else folder
    known = known or {}
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError):  # unreadable: the digest of what is there, which differs
        manifest = {}
    listed = [MANIFEST, *listed_files(manifest)]
    digest = hashlib.sha256()
    for name, tag in storage_of(folder).committed_files(
            folder, listed, manifest.get("uploaded") or {}).items():
        value = tag or known.get(name) or _sha256(folder / name)
        digest.update(os.fsencode(name) + b"\0" + value.encode())
    return "sha256:" + digest.hexdigest()


def damage(folder: Folder, checksum: str | None) -> str | None:
    """Why a committed stage folder cannot be trusted (a flipped bit, a truncated or missing
    shard), or None when its bytes are what was committed.

    Args:
        folder: the stage's committed folder.
        checksum: its `artifact_checksum` recorded at commit, if the run store has it; the
            manifest's own shard and dead-letter hashes are checked either way.
    """
    if checksum is not None and artifact_checksum(folder) == checksum:
        return None
    manifest = read_manifest(folder)
    files = [*(manifest.get("shards") or []), manifest.get("dead_letters") or {}]
    for entry in (f for f in files if "sha256" in f):
        path = folder / entry["path"]
        if not path.is_file():
            return f"{path} is missing"
        if _sha256(path) != entry["sha256"]:
            return f"{path} changed since it was committed (its SHA-256 differs)"
    if checksum is not None:
        return f"a file under {folder} changed since it was committed (its checksum differs)"
    return None


def _sha256(path: Folder) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass(frozen=True)
class CacheHit:
    """An earlier stage run whose output a stage may reuse: its run, folder and seconds."""

    run_id: str
    folder: Folder
    seconds: float


def cache_hit(key: str, store: Any, root: Folder) -> CacheHit | None:
    """The newest stage run under `root` with cache key `key` whose stored bytes are still
    what was committed (a changed file is recomputed, never trusted); None on a miss."""
    runs = (storage_folder(root) if isinstance(root, str) else root) / "runs"
    found = store.find_cached(key)
    output = next((a for a in (found or {}).get("artifacts", []) if a.get("checksum")), None)
    if found is None or output is None:
        return None
    folder = storage_folder(output["uri"])
    if not _intact(folder, output["checksum"], runs):
        return None
    # The run that made it (a hit of a hit names the first), and what it took there.
    took = read_manifest(folder).get("seconds") or 0.0
    return CacheHit(found.get("cached_from") or found["run_id"], folder, float(took))


def _intact(folder: Folder, checksum: str, runs: Folder) -> bool:
    """A stored stage folder under this root whose bytes are what was committed."""
    return _inside(folder, runs) and (folder / MANIFEST).exists() \
        and artifact_checksum(folder) == checksum


def _inside(folder: Folder, runs: Folder) -> bool:
    # Text comparisons: a local path never starts with a URL, nor a URL with a path.
    return fspath(folder.resolve()).startswith(fspath(runs.resolve()).rstrip("/") + "/")


def output_elsewhere(key: str, store: Any, root: Folder) -> str | None:
    """Where the newest committed output with cache key `key` is, if not under `root`: a run
    store shared by several roots records runs that this root's cache cannot reuse."""
    runs = (storage_folder(root) if isinstance(root, str) else root) / "runs"
    found = store.find_cached(key)
    output = next((a for a in (found or {}).get("artifacts", []) if a.get("checksum")), None)
    if output is None or _inside(storage_folder(output["uri"]), runs):
        return None
    return str(output["uri"])


def intact_committed(spec: PipelineSpec, folder: Folder, store: Any | None
               ) -> tuple[dict[str, Folder], dict[str, str]]:
    """A resumed run's committed stages whose bytes are still what was committed, and those
    that changed since (a flipped bit, a truncated shard), with what changed."""
    recorded: dict[str, str | None] = {}
    if store is not None:
        try:
            stages = store.show_run(folder.name)["stages"]
        except RunNotFound:  # a run from before the store: the manifests' hashes still hold
            stages = []
        recorded = {s["name"]: _output_checksum(s) for s in stages}
    kept, damaged = {}, {}
    for stage in spec.stages:
        place = folder / stage.name
        if not (place / MANIFEST).exists():
            continue
        problem = damage(place, recorded.get(stage.name))
        if problem is None:
            kept[stage.name] = place
        else:
            damaged[stage.name] = problem
    return kept, damaged


def _output_checksum(stage: dict[str, Any]) -> str | None:
    """The checksum recorded when the stage committed (in its latest attempt that did)."""
    for attempt in [stage, *reversed(stage.get("history") or [])]:
        for artifact in attempt.get("artifacts") or []:
            if artifact.get("role") == "output" and artifact.get("checksum"):
                return str(artifact["checksum"])
    return None


def cache_hits(spec: PipelineSpec, keys: Mapping[str, str], store: Any | None, root: Folder
          ) -> dict[str, Any]:
    """The stages an earlier run already made, looked up in order: the first that misses (or
    says `cache: false`) and every stage after it run again."""
    hits: dict[str, Any] = {}
    for stage in spec.stages if store is not None else ():
        hit = cache_hit(keys[stage.name], store, root) if stage.cache else None
        if hit is None:
            break
        hits[stage.name] = hit
    return hits

"""Artifact folders `<root>/runs/<run_id>/<stage>/`, each committed with its manifest.

One commit protocol on every storage (storage.py, as Beam's file-based sink): an attempt
writes into the folder `begin_stage` gives it, the manifest last, and `commit_stage` makes
that the stage's folder. Locally that is a `.<stage>.tmp-*` folder renamed into place; on an
object store (no rename) the final prefix itself, every file under a name of its own attempt,
and the manifest's one PUT is the commit. A stage folder without a manifest is an unfinished
attempt; files a manifest does not list are garbage that no reader trusts. Driver stages
whose libraries write only local files (TensorFlow) write into `StageArtifact.out_dir`,
which an object store's commit uploads before the manifest and lists under "uploaded".
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from seqline.pipeline.errors import ConfigError
from seqline.pipeline.storage import Folder, folder, storage_of, write_json

__all__ = ["MANIFEST", "RUN_ID_PATTERN", "StageArtifact", "check_run_id", "committed_stages",
           "link_stage", "listed_files", "read_manifest", "run_dir"]

MANIFEST = "manifest.json"
VERDICT = "verify.json"  # a run's last `verify` verdict, beside its stage folders


# A run id names a folder under ROOT/runs/, a log file and a URL path segment, so it is a name,
# never a path: letters, digits, and . _ - inside, as schedule names (schedule/spec.py: at most
# 80, so that `<name>-backfill-<fire time>` stays within these 128).
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_run_id(run_id: str) -> str:
    """`run_id` if it is a name that stays inside ROOT/runs/, else a ConfigError saying the rule.

    Example: "nightly-20261123T020000Z" -> itself; "../x", "/tmp/x", "a/b", ".." -> ConfigError.

    Raises:
        ConfigError: `run_id` is empty, starts with anything but a letter or digit, holds
            anything but letters, digits, '.', '_' and '-', or is longer than 128.
    """
    if not isinstance(run_id, str) or not RUN_ID_PATTERN.fullmatch(run_id):
        raise ConfigError(
            f"run id {run_id!r} is not a name; use letters, digits, '.', '_' and '-' (at most "
            "128, starting with a letter or digit), e.g. --run-id nightly-3, or leave it out "
            "for a generated one")
    return run_id


def run_dir(root: Folder, run_id: str) -> Folder:
    """`<root>/runs/<run_id>`, for a run id that passes `check_run_id` (else ConfigError)."""
    root = folder(root) if isinstance(root, str) else root
    return root / "runs" / check_run_id(run_id)


def read_manifest(stage_dir: Folder | str) -> dict[str, Any]:
    place = folder(stage_dir) if isinstance(stage_dir, str) else stage_dir
    return json.loads((place / MANIFEST).read_text())  # type: ignore[no-any-return]


def read_run_record(run: Folder) -> dict[str, Any]:
    """The run's run.json (its status, plan and stages), or {} if it has none yet."""
    try:
        found = json.loads((run / "run.json").read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def committed_stages(run: Folder) -> list[Folder]:
    """A run's stage folders that hold a committed manifest, by name."""
    return [d for d in storage_of(run).entries(run) if (d / MANIFEST).exists()]


def listed_files(manifest: dict[str, Any]) -> list[str]:
    """Every file a committed manifest vouches for (relative paths), the manifest excluded."""
    names = [s["path"] for s in manifest.get("shards") or []]
    if manifest.get("dead_letters"):
        names.append(manifest["dead_letters"]["path"])
    if manifest.get("profile"):
        names.append(manifest["profile"]["path"])
    return names + sorted(manifest.get("uploaded") or {})


class StageArtifact:
    """A stage's output folder, committed whole or not at all (see the module docstring).

    `path` is where workers write (the attempt's folder: a temporary one, or the final prefix
    on an object store); `out_dir` is the local folder a driver stage writes into.
    """

    def __init__(self, root: Folder, run_id: str, stage: str) -> None:
        self.final = run_dir(root, run_id) / stage
        self.storage = storage_of(self.final)
        if (self.final / MANIFEST).exists():
            raise ConfigError(
                f"run {run_id!r} already has a committed stage {stage!r} at {self.final}. "
                "Choose another --run-id, or delete that run's folder to redo it.")
        self.path: Folder = self.storage.begin_stage(self.final)
        self._local: Path | None = None

    @property
    def out_dir(self) -> Path:
        """A local folder for a driver stage's files: the attempt's own on a local root, a
        staging folder uploaded at commit on an object store."""
        if self._local is None:
            self._local = self.storage.local_work(self.path)
        return self._local

    def commit(self, manifest: dict[str, Any]) -> Folder:
        """Write manifest.json last, then make the attempt the stage's folder; remove shards
        of other attempts that the manifest does not list."""
        if self._local is not None:
            uploaded = self.storage.upload(self._local, self.path)
            if uploaded is not None:
                manifest = {**manifest, "uploaded": uploaded}
        # what the manifest vouches for is on disk before it is (workers write without
        # waiting for the disk: ShardSink)
        self.storage.make_durable(self.path, listed_files(manifest))
        write_json(self.path / MANIFEST, manifest, durable=True)
        self.storage.commit_stage(self.path, self.final)
        # Shards of attempts whose worker died after writing (its block ran again and wrote
        # its own): no reader trusts them, and once committed no one writes them.
        listed = set(listed_files(manifest))
        self.storage.remove(self.final, [name for name in self.storage.files(self.final)
                                         if name.startswith("shard-") and name not in listed])
        return self.final

    def abandon(self) -> None:
        """Remove what this attempt wrote, unless it was committed."""
        if self._local is not None:
            shutil.rmtree(self._local, ignore_errors=True)
        if not (self.path == self.final and (self.final / MANIFEST).exists()):
            self.storage.remove(self.path)


def link_stage(source: Folder, target: Folder) -> None:
    """A committed stage folder into another run, without rewriting its bytes.

    Locally by hard links (files are immutable once committed, so runs may share them; copied
    where the two folders are on different filesystems). On an object store by server-side
    copies of the files the manifest lists, then the manifest: no bytes pass through here.
    """
    names = [*listed_files(read_manifest(source)), MANIFEST]
    storage_of(source).copy_stage(source, target, names)

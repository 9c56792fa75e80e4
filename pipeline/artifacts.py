"""Artifact folders `<root>/runs/<run_id>/<stage>/`, each committed with its manifest.

Two commit protocols, one per kind of root (storage.py):
- a local folder: the stage writes into a `.<stage>.tmp-*` folder that is renamed into place
  with its manifest, atomically;
- an object store (no atomic rename): the stage writes straight into its final prefix, every
  file under a name of its own attempt, and the manifest, written last in one PUT, is the
  commit. A prefix without a manifest is an unfinished attempt; files a manifest does not list
  are garbage that no reader trusts. Driver stages whose libraries cannot write the scheme
  (TensorFlow) write into a local staging folder (`StageArtifact.out_dir`), uploaded at commit
  before the manifest and listed in it under "uploaded".
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from seqline.pipeline.errors import ConfigError
from seqline.pipeline.storage import Folder, Location, folder

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


def committed_stages(run: Folder) -> list[Folder]:
    """A run's stage folders that hold a committed manifest, by name."""
    if isinstance(run, Path):
        return [m.parent for m in sorted(run.glob(f"*/{MANIFEST}"))]
    return [d for d in run.iterdir() if (d / MANIFEST).exists()]


def listed_files(manifest: dict[str, Any]) -> list[str]:
    """Every file a committed manifest vouches for (relative paths), the manifest excluded."""
    names = [s["path"] for s in manifest.get("shards") or []]
    if manifest.get("dead_letters"):
        names.append(manifest["dead_letters"]["path"])
    return names + sorted(manifest.get("uploaded") or {})


class StageArtifact:
    """A stage's output folder, committed whole or not at all (see the module docstring).

    `path` is where workers write (the temporary folder, or the final prefix on an object
    store); `out_dir` is the local folder a driver stage writes into.
    """

    def __init__(self, root: Folder, run_id: str, stage: str) -> None:
        self.final = run_dir(root, run_id) / stage
        self.remote = isinstance(self.final, Location)
        if (self.final / MANIFEST).exists() if self.remote else self.final.exists():
            raise ConfigError(
                f"run {run_id!r} already has a committed stage {stage!r} at {self.final}. "
                "Choose another --run-id, or delete that run's folder to redo it.")
        self._staging: Path | None = None
        if isinstance(self.final, Location):
            self.final.remove()  # an earlier attempt's leftovers: no manifest vouched for them
            self.path: Folder = self.final
        else:
            self.path = self.final.parent / f".{stage}.tmp-{uuid.uuid4().hex[:8]}"
            self.path.mkdir(parents=True)

    @property
    def out_dir(self) -> Path:
        """A local folder for a driver stage's files: the artifact's own on a local root, a
        staging folder uploaded at commit on an object store."""
        if isinstance(self.path, Path):
            return self.path
        if self._staging is None:
            self._staging = Path(tempfile.mkdtemp(prefix=f"seqline-{self.final.name}-"))
        return self._staging

    def commit(self, manifest: dict[str, Any]) -> Folder:
        """Write manifest.json last: renamed into place locally, one PUT on an object store."""
        if isinstance(self.final, Location):
            if self._staging is not None:
                manifest = {**manifest, "uploaded": self.final.put_folder(self._staging)}
                shutil.rmtree(self._staging, ignore_errors=True)
            (self.final / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
            # Shards of attempts whose worker died after writing (its block ran again and
            # wrote its own): no reader trusts them, and once committed no one writes them.
            listed = set(listed_files(manifest))
            self.final.remove_files([name for name in self.final.files()
                                     if name.startswith("shard-") and name not in listed])
            return self.final
        assert isinstance(self.path, Path)
        with open(self.path / MANIFEST, "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.rename(self.path, self.final)  # atomic on one filesystem
        return self.final

    def abandon(self) -> None:
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        if isinstance(self.path, Location):
            if not (self.final / MANIFEST).exists():
                self.path.remove()
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def link_stage(source: Folder, target: Folder) -> None:
    """A committed stage folder into another run, without rewriting its bytes.

    Locally by hard links (files are immutable once committed, so runs may share them; copied
    where the two folders are on different filesystems). On an object store by server-side
    copies of the files the manifest lists, then the manifest: no bytes pass through here.
    """
    if isinstance(source, Location) and isinstance(target, Location):
        manifest = read_manifest(source)
        target.remove()
        source.copy_to(target, listed_files(manifest))
        source.copy_to(target, [MANIFEST])  # last: the copy is committed once it exists
        return
    assert isinstance(source, Path) and isinstance(target, Path)
    tmp = target.parent / f".{target.name}.tmp-link"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, copy_function=_link_or_copy)
    os.rename(tmp, target)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)

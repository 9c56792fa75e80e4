"""Artifact folders `<root>/runs/<run_id>/<stage>/`, each committed atomically with its manifest."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

from seqline.pipeline.errors import ConfigError

__all__ = ["MANIFEST", "StageArtifact", "link_stage", "read_manifest", "run_dir"]

MANIFEST = "manifest.json"
VERDICT = "verify.json"  # a run's last `verify` verdict, beside its stage folders


def run_dir(root: Path, run_id: str) -> Path:
    return Path(root) / "runs" / run_id


def read_manifest(stage_dir: Path) -> dict[str, Any]:
    return json.loads((Path(stage_dir) / MANIFEST).read_text())


class StageArtifact:
    """A stage's output folder, written under a temporary name and renamed when complete.

    Readers therefore see either no folder or a whole one with its manifest: a crash mid-stage
    leaves only a `.tmp-*` folder, which the next attempt ignores.
    """

    def __init__(self, root: Path, run_id: str, stage: str) -> None:
        self.final = run_dir(root, run_id) / stage
        if self.final.exists():
            raise ConfigError(
                f"run {run_id!r} already has a committed stage {stage!r} at {self.final}. "
                "Choose another --run-id, or delete that run's folder to redo it.")
        self.path = self.final.parent / f".{stage}.tmp-{uuid.uuid4().hex[:8]}"
        self.path.mkdir(parents=True)

    def commit(self, manifest: dict[str, Any]) -> Path:
        """Write manifest.json, flush it to disk and rename the folder into place."""
        target = self.path / MANIFEST
        with open(target, "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.rename(self.path, self.final)  # atomic on one filesystem
        return self.final

    def abandon(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def link_stage(source: Path, target: Path) -> None:
    """A committed stage folder into another run, by hard links: no bytes are copied.

    Files are immutable once committed, so runs may share them. Where the two folders are on
    different filesystems, the files are copied instead.
    """
    tmp = target.parent / f".{target.name}.tmp-link"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, copy_function=_link_or_copy)
    os.rename(tmp, target)


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)

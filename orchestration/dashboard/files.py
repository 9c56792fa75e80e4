"""Files under the artifact root a page may show: manifests, shards, dead letters, paged.

The rule: a run id and a stage name from a URL are first looked up in the run store (the
caller does that); only then is `ROOT/runs/<run>/<stage>/<file>` opened, and only if its
resolved path (symlinks followed) is still inside the root. Nothing is unpickled: JSON only.
On an object-store root (a URL or a storage.Location) there are no symlinks: a part that is
empty, absolute or `..` is refused, and the object is read through fsspec.
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import Any

from seqline.pipeline.artifacts import MANIFEST, VERDICT
from seqline.pipeline.deadletters import DEAD_LETTERS
from seqline.pipeline.storage import Folder, Location, folder, is_remote

__all__ = ["PAGE_SIZE", "dead_letters_page", "inside_root", "manifest_of", "shards_page",
           "verify_of"]

# 50 rows fill a screen; a page of a million-row table is read in a few milliseconds.
PAGE_SIZE = 50
# A manifest larger than this is not a seqline manifest (a train manifest with every batch's
# first/last seq for 100 epochs of a large run stays well below it).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


def inside_root(root: Folder | str, *parts: str) -> Folder | None:
    """`root/parts…` resolved, or None when that leaves the root (`..`, a symlink out).

    Args:
        root: the artifact root.
        parts: path parts, each already known to the store (a run id, a stage name, a file);
            a stage named `a/b` is the nested folder seqline wrote for it.

    Returns:
        The resolved path inside the root, or None.

    Example: inside_root(Path("/r"), "runs", "x", "../../../etc") -> None.
    """
    if any(not p or "\0" in p or Path(p).is_absolute() for p in parts):
        return None
    place = folder(root) if isinstance(root, str) else root
    if isinstance(place, Location):
        if any(".." in p.split("/") for p in parts):
            return None
        for part in parts:
            place = place / part
        return place
    base = place.resolve()
    path = base.joinpath(*parts).resolve()  # follows symlinks: a link out of the root fails
    return path if path.is_relative_to(base) else None


def manifest_of(root: Folder | str, run_id: str, stage: str) -> dict[str, Any] | None:
    """A committed stage's manifest (None before it commits, or if it is unsafe to read)."""
    path = inside_root(root, "runs", run_id, stage, MANIFEST)
    if path is None or not path.is_file() or _size(path) > MAX_MANIFEST_BYTES:
        return None
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def verify_of(root: Folder | str, run_id: str) -> dict[str, Any] | None:
    """The verdict `seqline run` saved as ROOT/runs/<run>/verify.json, if it saved one."""
    path = inside_root(root, "runs", run_id, VERDICT)
    if path is None or not path.is_file():
        return None
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def shards_page(manifest: dict[str, Any] | None, page: int) -> dict[str, Any]:
    """One page of the manifest's shard table: path, seq range, records, bytes, sha256.

    Args:
        manifest: the stage's manifest (None: not committed yet).
        page: 0-based page number.

    Returns:
        {"rows": [...], "page", "pages", "total"}.
    """
    shards = (manifest or {}).get("shards") or []
    return _page(len(shards), page, [
        {key: s.get(key) for key in ("path", "seq_first", "seq_last", "records", "bytes",
                                     "sha256")}
        for s in shards[page * PAGE_SIZE:(page + 1) * PAGE_SIZE]])


def dead_letters_page(root: Folder | str, run_id: str, stage: str, total: int,
                      page: int) -> dict[str, Any] | None:
    """One page of a stage's dead letters: seq, file, line, reason, raw text.

    Args:
        root: the artifact root.
        run_id: a run known to the store.
        stage: a stage of it known to the store.
        total: how many the store counted (for the page count).
        page: 0-based page number.

    Returns:
        {"rows", "page", "pages", "total"}; None when the file is outside the root.
    """
    entry = ((manifest_of(root, run_id, stage) or {}).get("dead_letters") or {}) \
        if is_remote(root) else {}  # named per attempt on an object store
    name = str(entry.get("path") or DEAD_LETTERS)
    path = inside_root(root, "runs", run_id, stage, name) if "/" not in name else None
    if path is None:
        return None
    if not path.is_file():
        return _page(total, page, [])
    with path.open("rb") as f:
        text = (line.decode("utf-8", errors="replace") for line in f)
        lines = list(islice(text, page * PAGE_SIZE, (page + 1) * PAGE_SIZE))
    rows = []
    for line in lines:
        try:
            letter = json.loads(line)
        except ValueError:
            letter = {"reason": "unreadable line", "raw": line}
        rows.append({key: letter.get(key) for key in ("seq", "file", "line", "reason", "raw")})
    return _page(total, page, rows)


def _size(path: Folder) -> int:
    return path.stat().st_size if isinstance(path, Path) else int(path.fs.size(path.path))


def _page(total: int, page: int, rows: list[Any]) -> dict[str, Any]:
    pages = max(1, -(-total // PAGE_SIZE))
    return {"rows": rows, "page": page, "pages": pages, "total": total}

"""Files under the artifact root a page may show: manifests, shards, dead letters, paged.

The rule: a run id and a stage name from a URL are first looked up in the run store (the
caller does that); only then is `ROOT/runs/<run>/<stage>/<file>` opened, and only if its
resolved path (symlinks followed) is still inside the root. Nothing is unpickled: JSON only.
On an object-store root there are no symlinks: a part that is empty, absolute, `.` or `..` is
refused (storage.py's `inside`), and the object is read through the same code as a local
file: one read, no listing; the manifest names a stage's dead letters.
"""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import IO, Any

from seqline.pipeline.artifacts import MANIFEST, VERDICT
from seqline.pipeline.deadletters import DEAD_LETTERS
from seqline.pipeline.storage import Folder, folder, storage_of

__all__ = ["PAGE_SIZE", "dead_letters_page", "inside_root", "manifest_of", "profile_of",
           "shards_page", "verify_of"]

# 50 rows fill a screen; a page of a million-row table is read in a few milliseconds.
PAGE_SIZE = 50
# A manifest larger than this is not a seqline manifest (a train manifest with every batch's
# first/last seq for 100 epochs of a large run stays well below it).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
# How much of an object-store file one request reads: a page of dead letters is ~10-50 KB.
READ_BLOCK_BYTES = 256 * 1024


def inside_root(root: Folder | str, *parts: str) -> Folder | None:
    """`root/parts…` resolved, or None when that leaves the root (`..`, a symlink out).

    Args:
        root: the artifact root: a local folder, or a URL or folder on an object store.
        parts: path parts, each already known to the store (a run id, a stage name, a file);
            a stage named `a/b` is the nested folder seqline wrote for it.

    Returns:
        The resolved path inside the root, or None.

    Example: inside_root(Path("/r"), "runs", "x", "../../../etc") -> None.
    """
    if any(not p or "\0" in p or Path(p).is_absolute() for p in parts):
        return None
    place = folder(root) if isinstance(root, str) else root
    return storage_of(place).inside(place, *parts)


def manifest_of(root: Folder | str, run_id: str, stage: str) -> dict[str, Any] | None:
    """A committed stage's manifest (None before it commits, or if it is unsafe to read)."""
    return _json_at(inside_root(root, "runs", run_id, stage, MANIFEST))


def profile_of(root: Folder | str, run_id: str, stage: str,
               manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """A committed stage's data profile, as its manifest names it (per attempt on an object
    store); None when it has none (`profile: false`, a driver stage) or it is unsafe to read."""
    name = str(((manifest or {}).get("profile") or {}).get("path") or "")
    if not name or "/" in name:
        return None
    return _json_at(inside_root(root, "runs", run_id, stage, name))


def verify_of(root: Folder | str, run_id: str) -> dict[str, Any] | None:
    """The verdict `seqline run` saved as ROOT/runs/<run>/verify.json, if it saved one."""
    return _json_at(inside_root(root, "runs", run_id, VERDICT))


def _json_at(path: Folder | None) -> dict[str, Any] | None:
    """The JSON object in a file under the root; None if absent, too large or not JSON.

    Read in one go rather than asked about first: on an object store every question is a
    request, and a listing cached by fsspec could hide a manifest committed since.
    """
    if path is None:
        return None
    try:
        with _open(path) as f:
            data = f.read(MAX_MANIFEST_BYTES + 1)
        found = json.loads(data) if len(data) <= MAX_MANIFEST_BYTES else None
    except (OSError, ValueError):  # missing (not committed yet), a folder, unreadable
        return None
    return found if isinstance(found, dict) else None


def _open(path: Folder) -> IO[bytes]:
    """`path` for reading bytes; on an object store without a cached listing (other
    processes write there) and in small blocks (a page needs a few KB, not fsspec's
    default of tens of MB read ahead)."""
    return storage_of(path).open(path, "rb", block_size=READ_BLOCK_BYTES)


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
                      page: int, manifest: dict[str, Any] | None = None
                      ) -> dict[str, Any] | None:
    """One page of a stage's dead letters: seq, file, line, reason, raw text.

    Args:
        root: the artifact root.
        run_id: a run known to the store.
        stage: a stage of it known to the store.
        total: how many the store counted (for the page count).
        page: 0-based page number.
        manifest: the stage's manifest if committed: it names the file (on an object store
            the name is per attempt); else the local name, written as they arrive.

    Returns:
        {"rows", "page", "pages", "total"}; None when the file is outside the root.
    """
    entry = (manifest or {}).get("dead_letters") or {}
    name = str(entry.get("path") or DEAD_LETTERS)
    path = inside_root(root, "runs", run_id, stage, name) if "/" not in name else None
    if path is None:
        return None
    try:
        with _open(path) as f:
            text = (line.decode("utf-8", errors="replace") for line in f)
            lines = list(islice(text, page * PAGE_SIZE, (page + 1) * PAGE_SIZE))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return _page(total, page, [])  # none set aside yet (or not uploaded until commit)
    rows = []
    for line in lines:
        try:
            letter = json.loads(line)
        except ValueError:
            letter = {"reason": "unreadable line", "raw": line}
        rows.append({key: letter.get(key) for key in ("seq", "file", "line", "reason", "raw")})
    return _page(total, page, rows)


def _page(total: int, page: int, rows: list[Any]) -> dict[str, Any]:
    pages = max(1, -(-total // PAGE_SIZE))
    return {"rows": rows, "page": page, "pages": pages, "total": total}

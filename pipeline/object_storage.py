"""Object stores: any fsspec filesystem (S3, GCS, Azure, memory): no rename, no append."""

from __future__ import annotations

import io
import posixpath
import shutil
import tempfile
import uuid
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, cast

from seqline.pipeline.storage import Folder, Location, on_object_store

__all__ = ["ObjectStorage"]


class ObjectStorage:
    """An fsspec filesystem (S3, GCS, Azure, memory): objects put whole, no rename."""

    def entries(self, place: Folder) -> list[Folder]:
        at = on_object_store(place)
        try:
            names = at.fs.ls(at.path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        return [Location(at.fs, str(name).rstrip("/")) for name in sorted(names)]

    def files(self, place: Folder) -> dict[str, int]:
        at = on_object_store(place)
        at.fs.invalidate_cache(at.path)  # another process may have written meanwhile
        try:
            found = at.fs.find(at.path, detail=True)
        except FileNotFoundError:
            return {}
        base = at.path.rstrip("/") + "/"
        return {str(p)[len(base):]: int(info.get("size") or 0) for p, info in found.items()
                if str(p).startswith(base) and info.get("type") != "directory"}

    def open(self, place: Folder, mode: str = "rb", block_size: int | None = None) -> IO[Any]:
        at = on_object_store(place)
        at.fs.invalidate_cache(at.path)
        if "r" not in mode:
            return cast(IO[Any], _PutAtClose(at, "b" in mode))
        if block_size is not None:
            return at.fs.open(at.path, mode, block_size=block_size)  # type: ignore[no-any-return]
        data = io.BytesIO(at.read_bytes())  # one GET, no range requests
        return data if "b" in mode else io.TextIOWrapper(data, encoding="utf-8")

    def modified(self, place: Folder) -> datetime:
        at = on_object_store(place)
        found = at.fs.info(at.path).get("LastModified")  # S3's; a store without one: now
        return found if isinstance(found, datetime) else datetime.now(UTC)

    def write_atomically(self, place: Folder, data: str | bytes | memoryview,
                         durable: bool = False) -> None:
        on_object_store(place).write_bytes(data.encode() if isinstance(data, str) else bytes(data))

    def make_durable(self, place: Folder, names: Iterable[str]) -> None:
        pass  # a PUT that returned is durable

    def remove(self, place: Folder, names: Iterable[str] | None = None) -> None:
        at = on_object_store(place)
        names = list(self.files(at) if names is None else names)
        if names:  # one batch request
            at.fs.rm([posixpath.join(at.path, name) for name in names])
        at.fs.invalidate_cache(at.path)

    @contextmanager
    def local_copy(self, place: Folder) -> Iterator[Path]:
        at = on_object_store(place)
        with tempfile.TemporaryDirectory(prefix="seqline-") as tmp:
            target = Path(tmp) / at.name
            at.fs.get(at.path, str(target), recursive=at.is_dir())
            yield target

    def on_disk(self, place: Folder) -> Path | None:
        return None

    def inside(self, root: Folder, *parts: str) -> Folder | None:
        # Keys have no symlinks, but fsspec and some stores normalise `..` and `.`, and an
        # empty segment (`a//b`) is another key than the one seqline wrote: refuse them all.
        if any(seg in ("", ".", "..") for p in parts for seg in p.split("/")):
            return None
        place = on_object_store(root)
        for part in parts:
            place = place / part
        return place

    def attempt_name(self, name: str) -> str:
        stem, dot, suffix = name.partition(".")
        return f"{stem}-{uuid.uuid4().hex[:8]}{dot}{suffix}"

    def begin_stage(self, final: Folder) -> Folder:
        self.remove(final)  # an earlier attempt's leftovers: no manifest vouched for them
        return final

    def local_work(self, work: Folder) -> Path:
        return Path(tempfile.mkdtemp(prefix=f"seqline-{on_object_store(work).name}-"))

    def upload(self, local: Path, work: Folder) -> dict[str, int] | None:
        at = on_object_store(work)
        sizes = _local_files(local)
        for name in sizes:
            at.fs.put_file(str(local / name), posixpath.join(at.path, name))
        shutil.rmtree(local, ignore_errors=True)
        return sizes

    def commit_stage(self, work: Folder, final: Folder) -> None:
        """Nothing more: the attempt wrote into `final`, and its manifest's PUT committed it."""

    def committed_files(self, place: Folder, listed: Iterable[str],
                        uploaded: Collection[str]) -> dict[str, str | None]:
        # Files a driver stage uploaded (a SavedModel, checkpoints) by size and the ETag the
        # store computed itself, rather than downloading a model again at every commit.
        at = on_object_store(place)
        tags = {}
        for name in sorted(listed):
            info = at.fs.info(posixpath.join(at.path, name)) if name in uploaded else None
            tags[name] = None if info is None else \
                f"size:{info.get('size')}:etag:{info.get('ETag') or info.get('etag')}"
        return tags

    def copy_stage(self, source: Folder, target: Folder, names: list[str]) -> None:
        # Server-side copies: no bytes pass through here. The manifest's copy, last, commits.
        at, to = on_object_store(source), on_object_store(self.begin_stage(target))
        for name in names:
            at.fs.copy(posixpath.join(at.path, name), posixpath.join(to.path, name))


class _PutAtClose:
    """A file written locally and PUT whole at close: one request, and none at all if it is
    never closed (a stage that failed leaves no part of it)."""

    def __init__(self, place: Location, binary: bool) -> None:
        self._place = place
        self._file = tempfile.TemporaryFile("w+b" if binary else "w+")  # noqa: SIM115

    def write(self, data: Any) -> int:
        return self._file.write(data)

    def close(self) -> None:
        if not self._file.closed:
            self._file.seek(0)
            data = self._file.read()
            self._place.write_bytes(data.encode() if isinstance(data, str) else data)
            self._file.close()

    def __enter__(self) -> _PutAtClose:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _local_files(local: Path) -> dict[str, int]:
    """A local folder's files (relative posix paths) and their sizes, sorted."""
    return {p.relative_to(local).as_posix(): p.stat().st_size
            for p in sorted(local.rglob("*")) if p.is_file()}

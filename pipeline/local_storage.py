"""The local storage: files on this machine, a stage committed by renaming its folder into place."""

from __future__ import annotations

import functools
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, NoReturn

from seqline.pipeline.errors import DISK_FULL, disk_full_message
from seqline.pipeline.storage import DiskFull, Folder, on_this_disk

__all__ = ["LocalStorage"]

# A few passes suffice: each only races the files workers wrote during the pass before.
_REMOVE_TRIES = 5
# fsyncs in flight at a commit: the filesystem's journal commits concurrent ones together
# (300 shards: ~80 ms one by one, ~25 ms 16 at a time).
_SYNCS = 16
_SYNC_FILE_RANGE_WRITE = 2  # <linux/fs.h>: start writing the dirty pages, do not wait


class LocalStorage:
    """Files on this machine: a temporary folder renamed into place commits a stage."""

    def entries(self, place: Folder) -> list[Folder]:
        path = on_this_disk(place)
        return [*sorted(path.iterdir())] if path.is_dir() else []

    def files(self, place: Folder) -> dict[str, int]:
        path = on_this_disk(place)
        return {p.relative_to(path).as_posix(): p.stat().st_size
                for p in sorted(path.rglob("*")) if p.is_file()}

    def open(self, place: Folder, mode: str = "rb", block_size: int | None = None) -> IO[Any]:
        return on_this_disk(place).open(mode)

    def modified(self, place: Folder) -> datetime:
        return datetime.fromtimestamp(on_this_disk(place).stat().st_mtime, UTC)

    def write_atomically(self, place: Folder, data: str | bytes | memoryview,
                         durable: bool = False) -> None:
        # Written under this process's own name, then renamed: a writer killed mid-write
        # leaves a hidden temporary file that no manifest lists, never a part under the name.
        path = on_this_disk(place)
        # No folder is made: a worker still writing into an attempt's folder after the stage
        # was abandoned (and the folder removed) must fail, not bring the folder back.
        partial = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            with open(partial, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
                f.flush()
                if durable:
                    os.fsync(f.fileno())
                else:  # durable at the commit (make_durable), which then waits less
                    _start_write_back(f.fileno())
            os.replace(partial, path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            _raise_said(exc, partial)

    def make_durable(self, place: Folder, names: Iterable[str]) -> None:
        path = on_this_disk(place)
        files = [path / name for name in names]
        if len(files) > 1:
            with ThreadPoolExecutor(min(_SYNCS, len(files)),
                                    thread_name_prefix="seqline-fsync") as pool:
                list(pool.map(_fsync, files))
        elif files:
            _fsync(files[0])
        _fsync(path)  # the folder: the files' names in it

    def remove(self, place: Folder, names: Iterable[str] | None = None) -> None:
        path = on_this_disk(place)
        if names is not None:
            for name in names:
                (path / name).unlink(missing_ok=True)
        elif path.is_dir():
            # Again while it is there: a worker still running may add a file while the tree
            # is removed (the folder then is not empty); once it is gone, nobody makes it.
            for _ in range(_REMOVE_TRIES):
                shutil.rmtree(path, ignore_errors=True)
                if not path.exists():
                    break
        else:
            path.unlink(missing_ok=True)

    @contextmanager
    def local_copy(self, place: Folder) -> Iterator[Path]:
        yield on_this_disk(place)

    def on_disk(self, place: Folder) -> Path | None:
        return on_this_disk(place)

    def inside(self, root: Folder, *parts: str) -> Folder | None:
        base = on_this_disk(root).resolve()
        path = base.joinpath(*parts).resolve()  # follows symlinks: a link out of the root fails
        return path if path.is_relative_to(base) else None

    def attempt_name(self, name: str) -> str:
        return name  # an attempt's folder is its own until the rename

    def begin_stage(self, final: Folder) -> Folder:
        work = _attempt(on_this_disk(final))
        work.mkdir(parents=True)
        return work

    def local_work(self, work: Folder) -> Path:
        return on_this_disk(work)

    def upload(self, local: Path, work: Folder) -> dict[str, int] | None:
        return None

    def commit_stage(self, work: Folder, final: Folder) -> None:
        os.rename(on_this_disk(work), on_this_disk(final))  # atomic on one filesystem

    def committed_files(self, place: Folder, listed: Iterable[str],
                        uploaded: Collection[str]) -> dict[str, str | None]:
        path = on_this_disk(place)
        return {p.relative_to(path).as_posix(): None
                for p in sorted(path.rglob("*")) if p.is_file()}

    def copy_stage(self, source: Folder, target: Folder, names: list[str]) -> None:
        # Hard links (committed files are immutable, so runs may share them; copied across
        # filesystems) into a temporary folder renamed into place. The folder holds only
        # what its commit put there, so it is linked whole, empty folders included.
        work = _attempt(on_this_disk(target))
        shutil.copytree(on_this_disk(source), work, copy_function=_link_or_copy)
        self.commit_stage(work, target)


def _start_write_back(fd: int) -> None:
    """Have the kernel start writing the file's pages to disk now, without waiting for them
    (Linux's sync_file_range with SYNC_FILE_RANGE_WRITE; elsewhere nothing).

    A stage's shards are fsynced at its commit (decisions/0064). Left dirty until then, a
    stage that wrote 220 MB waited 85 ms for the disk at its commit; written back as they
    are written, the commit's fsyncs took 6-8 ms. Unlike an fsync, the writer neither waits
    for the pages nor commits the filesystem's journal (what stalled workers before). Advisory:
    its result is ignored; the commit's fsync is what vouches for the file.
    """
    call = _sync_file_range()
    if call is not None:
        call(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # (only here: no binding in `os`)

    found = getattr(ctypes.CDLL(None, use_errno=True), "sync_file_range", None)
    if found is not None:
        found.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
        found.restype = ctypes.c_int
    return found


def _fsync(path: Path) -> None:
    """`path` (a file or a folder) on disk."""
    fd = os.open(path, os.O_RDONLY)  # (its error names the path)
    try:
        os.fsync(fd)
    except OSError as exc:
        _raise_said(exc, path)
    finally:
        os.close(fd)


def _raise_said(exc: OSError, path: Path) -> NoReturn:
    """Raise `exc` as said: naming `path` where it names no file (write() and fsync() do not),
    and a full disk as DiskFull's one line (run.json on a full disk), not a traceback. The
    error that names the file is the one chained: what reports a full disk reads it there."""
    named = exc if exc.filename else OSError(exc.errno, exc.strerror, str(path))
    if named.errno in DISK_FULL:
        raise DiskFull(disk_full_message(named, path)) from named
    if named is exc:
        raise exc
    raise named from exc


def _attempt(final: Path) -> Path:
    """A new hidden folder beside `final` for one attempt at it (`.*.tmp-*`: resume removes
    those an interrupted run left)."""
    return final.parent / f".{final.name}.tmp-{uuid.uuid4().hex[:8]}"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)



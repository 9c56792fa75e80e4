"""Where artifacts live: one interface over a local folder and any fsspec URL (s3://, gs://, ...).

A place is a `Folder`: a `pathlib.Path` on this machine, or a `Location` (an fsspec filesystem
and a path on it) with the same small part of Path's surface: `/`, `name`, `parent`,
`exists`, `read_bytes`/`read_text`, `write_bytes`/`write_text`, `open`. Everything else that
artifact code does with a place goes through a `Storage`, chosen once from the place's URL
(as Beam's `FileSystems` chooses a `FileSystem` by scheme; a path or file:// is local, as
Kedro treats local files as the `file` protocol). This module is the only one that asks
which kind of place it has.

    root = open_root("s3://bucket/prefix")        # a Location ("runs" would give a Path)
    storage = storage_of(root)                     # ObjectStorage (LocalStorage for a Path)
    write_json(root / "runs" / run_id / "run.json", record)   # one PUT; locally a rename
    folder("s3://bucket/prefix/runs/x/ingest")    # back from a URL stored in the run store
    fspath(stage_dir)                             # what a worker gets: a path or a URL

A stage commits the same way on every storage (Beam's `io/filebasedsink.py`): its attempt
writes into `begin_stage(final)`, the manifest last, then `commit_stage` makes it the stage's
folder. Locally the attempt's folder is a hidden temporary one and the commit an atomic
rename; an object store has no rename (a copy of every byte), so there the attempt writes
into the final prefix under names of its own (`attempt_name`) and the manifest's one PUT is
the commit.

Credentials are never part of a Location: fsspec finds them where the SDKs do (environment,
config files, instance roles); a URL that carries `user:secret@` is refused, so that no secret
reaches a manifest, run.json, the run store, a log or a page.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol
from urllib.parse import urlsplit

from seqline.pipeline.errors import ConfigError, InternalError, SeqlineError

__all__ = ["DiskFull", "Folder", "Location", "Storage", "absolute", "folder", "fspath",
           "open_root", "shown",
           "scratch", "seqline_home", "slug", "storage_of", "write_atomically", "write_json"]


class DiskFull(SeqlineError):
    """A file of the run's own (run.json, a manifest, a shard) could not be written: its disk
    is full. Said in `disk_full_message`'s words (the path, how full, how to finish the run),
    the OSError chained; `seqline run` prints it as its one line, exit 1.

    Example: DiskFull("the disk is full: writing /r/runs/x/.run.json.tmp-7 failed (No space
    left on device; 0 MiB free of 64 MiB there). Free space … --resume --run-id ID` …").
    """


@dataclass(frozen=True)
class Location:
    """A folder or file on an fsspec filesystem: `fs` and its own path (no protocol)."""

    fs: Any  # fsspec.AbstractFileSystem (untyped)
    path: str

    def __truediv__(self, name: str) -> Location:
        return Location(self.fs, posixpath.join(self.path, str(name)))

    def __str__(self) -> str:
        return self.url

    @property
    def url(self) -> str:
        return str(self.fs.unstrip_protocol(self.path))

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    @property
    def parent(self) -> Location:
        return Location(self.fs, posixpath.dirname(self.path.rstrip("/")))

    def resolve(self) -> Location:
        return self

    def exists(self) -> bool:
        self.fs.invalidate_cache(self.path)  # listings are cached; workers write meanwhile
        return bool(self.fs.exists(self.path))

    def is_file(self) -> bool:
        return bool(self.fs.isfile(self.path))

    def is_dir(self) -> bool:
        return bool(self.fs.isdir(self.path))

    def open(self, mode: str = "r") -> IO[Any]:
        return self.fs.open(self.path, mode)  # type: ignore[no-any-return]

    def read_bytes(self) -> bytes:
        return bytes(self.fs.cat_file(self.path))

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def write_bytes(self, data: bytes) -> None:
        self.fs.pipe_file(self.path, data)  # one PUT: the object appears whole or not at all

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Object stores have no folders; a prefix exists once an object is under it."""


Folder = Path | Location


class Storage(Protocol):
    """What artifact code does with places, whatever holds them (Beam's `FileSystem`)."""

    def entries(self, place: Folder) -> list[Folder]:
        """What is directly under the folder `place`, by name (nothing if it does not exist)."""

    def files(self, place: Folder) -> dict[str, int]:
        """Every file under `place`, by posix path relative to it, with its size."""

    def open(self, place: Folder, mode: str = "rb", block_size: int | None = None) -> IO[Any]:
        """A file. On an object store, with no cached listing (other processes write there);
        read whole in one GET unless `block_size` asks for requests of that size (a page of a
        large file); written locally and PUT whole at close (no appends there)."""

    def modified(self, place: Folder) -> datetime:
        """When the file `place` was last written (now, where the store cannot say)."""

    def write_atomically(self, place: Folder, data: str | bytes | memoryview,
                         durable: bool = False) -> None:
        """Replace a file whole: readers see the old bytes or the new, never a part. A local
        file's folder must exist. `durable`: on disk before it has its name (a manifest will
        vouch for it).

        Raises:
            DiskFull: no space left (or over quota) on the file's disk.
        """

    def make_durable(self, place: Folder, names: Iterable[str]) -> None:
        """The files `names` under `place` on disk with their names, before a manifest
        vouches for them (nothing to do where a write that returned is durable)."""

    def remove(self, place: Folder, names: Iterable[str] | None = None) -> None:
        """The folder `place` and all under it, or only the files `names` (relative) in it."""

    def local_copy(self, place: Folder) -> AbstractContextManager[Path]:
        """A local path holding `place` (a file or folder), for libraries that read only
        local files: itself, or a download removed afterwards."""

    def on_disk(self, place: Folder) -> Path | None:
        """`place` as a path on this machine, or None: an object store holds no file that is
        appended line by line or opened as a database."""

    def inside(self, root: Folder, *parts: str) -> Folder | None:
        """`root/parts…`, or None when that leaves `root` (`..`, a symlink out, an empty
        key segment)."""

    def attempt_name(self, name: str) -> str:
        """The name a stage attempt writes `name` under: its own where attempts share the
        stage's folder (an object store), so that a retry never replaces another's file."""

    def begin_stage(self, final: Folder) -> Folder:
        """Where an attempt at the stage folder `final` writes, emptied of earlier attempts."""

    def local_work(self, work: Folder) -> Path:
        """A local folder for a driver stage's files (TensorFlow writes only local files):
        `work` itself, or a temporary folder that `upload` puts into it at commit."""

    def upload(self, local: Path, work: Folder) -> dict[str, int] | None:
        """`local_work`'s files into `work`: their paths and sizes, or None if they are in
        place already; the temporary folder is removed."""

    def commit_stage(self, work: Folder, final: Folder) -> None:
        """Make the attempt `work`, its manifest written last, the committed `final`."""

    def committed_files(self, place: Folder, listed: Iterable[str],
                        uploaded: Collection[str]) -> dict[str, str | None]:
        """The files of a committed stage folder that its commit vouches for, in checksum
        order, each with a tag the store computed for it (`uploaded` ones) or None (hash it).

        `listed`: what its manifest lists, the manifest included. An object store may hold
        an abandoned attempt's objects beside them; a local folder, renamed into place
        whole, holds nothing else, so all of its files count.
        """

    def copy_stage(self, source: Folder, target: Folder, names: list[str]) -> None:
        """The committed stage folder `source` as `target`, without passing its bytes through
        here: `names` are the files its manifest vouches for, the manifest last."""


def storage_of(place: Folder | str) -> Storage:
    """The storage that holds `place`: local for a path or a file:// URL, else fsspec's.

    Example: storage_of(Path("runs")) -> LocalStorage; storage_of("s3://b/root") ->
    ObjectStorage; storage_of("file:///tmp/root") -> LocalStorage.
    """
    # Late: the implementations import this module's places.
    from seqline.pipeline.local_storage import LocalStorage
    from seqline.pipeline.object_storage import ObjectStorage

    place = folder(place) if isinstance(place, str) else place
    return LocalStorage() if isinstance(place, Path) else ObjectStorage()  # stateless


def on_this_disk(place: Folder) -> Path:
    """`place` as the Path it is (for LocalStorage's own use: it was chosen for a Path)."""
    if not isinstance(place, Path):
        raise InternalError(f"{place} was handed to the local storage")
    return place


def on_object_store(place: Folder) -> Location:
    """`place` as the Location it is (for ObjectStorage's own use)."""
    if not isinstance(place, Location):
        raise InternalError(f"{place} was handed to an object store's storage")
    return place


def write_atomically(place: Folder, text: str) -> None:
    """Replace a small file whole: readers see the old text or the new, never a part
    (DiskFull: its disk is full)."""
    storage_of(place).write_atomically(place, text)


def write_json(place: Folder, value: Any, *, sort_keys: bool = True,
               durable: bool = False) -> None:
    """`value` as indented JSON, replacing the file whole (run.json, verify.json, manifests).

    Raises:
        DiskFull: its disk is full.
    """
    storage_of(place).write_atomically(
        place, json.dumps(value, indent=2, sort_keys=sort_keys), durable=durable)


def seqline_home() -> Path:
    """seqline's own folder on this machine: $SEQLINE_HOME, else ~/.seqline."""
    return Path(os.environ.get("SEQLINE_HOME") or Path.home() / ".seqline")


def scratch(run: Folder) -> Path:
    """A local folder for a run's working state that is never an artifact and that libraries
    write with local-file APIs (train's BackupAndRestore folder, as `.name` entries): the
    run's own folder on a local root, else $SEQLINE_HOME/scratch/<its URL as a name>, the
    same one for a resumed run on this machine."""
    return storage_of(run).on_disk(run) or seqline_home() / "scratch" / slug(fspath(run))


def folder(text: str | Path) -> Folder:
    """A folder from its text: a URL with a scheme is a Location, anything else a local Path."""
    if isinstance(text, Path) or not _scheme(text):
        return Path(text)
    # fsspec only for a URL: its import (40 ms, with asyncio) is not every local run's
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    fs, path = fsspec.core.url_to_fs(text)
    if isinstance(fs, LocalFileSystem):
        return Path(path)
    return Location(fs, str(path).rstrip("/"))


def open_root(text: str | Folder) -> Folder:
    """The artifact root `--root` names, checked before anything runs.

    Raises:
        ConfigError: a URL with credentials in it, a scheme fsspec does not know, one whose
            package is not installed, or a bucket that cannot be reached.
    """
    if not isinstance(text, str) or not _scheme(text):
        return Path(text) if isinstance(text, str) else text
    import fsspec

    parts = urlsplit(text)
    if "@" in parts.netloc:
        raise ConfigError(
            f"--root {parts.scheme}://…@{parts.netloc.rpartition('@')[2]}{parts.path}: the URL "
            "carries credentials. Remove them and pass them the usual way (environment, "
            "config file or instance role), so that they are never written anywhere.")
    try:
        fsspec.get_filesystem_class(parts.scheme)
    except ValueError:
        raise ConfigError(f"--root {text}: unknown scheme {parts.scheme!r}; use a local folder "
                          "or a URL fsspec knows (s3://, gs://, abfs://, ...).") from None
    except ImportError as exc:
        raise ConfigError(f"--root {text}: {parts.scheme}:// needs a package that is not "
                          f"installed ({str(exc).splitlines()[0]}). Install it (e.g. "
                          "`pip install gcsfs` for gs://).") from None
    root = folder(text)
    if isinstance(root, Location):
        _check_bucket(root, text)
    return root


def absolute(place: Folder) -> Folder:
    """`place` as every process of a run finds it: a local folder from `/` (Ray's workers on
    a cluster start in folders of their own, where `root/runs/...` is no run), a URL as is.

    Example: absolute(Path("root")) -> Path("/home/me/project/root").
    """
    return place.absolute() if isinstance(place, Path) else place


def shown(place: Folder) -> str:
    """`place` as a person reads it: a local folder below the current one from there (as
    the --root given), any other as a path from `/`, a URL as is.

    Example: shown(Path.cwd() / ".seqline/runs/r1") -> ".seqline/runs/r1".
    """
    if isinstance(place, Path) and place.is_relative_to(Path.cwd()):
        return str(place.relative_to(Path.cwd()))
    return fspath(place)


def _check_bucket(root: Location, text: str) -> None:
    scheme, bucket = urlsplit(text).scheme, root.path.split("/", 1)[0]
    try:
        if not root.fs.exists(bucket):
            # Why not: s3fs's exists() answers False for every failure (a profile that does
            # not exist, no credentials, no server), which read as a missing bucket.
            root.fs.info(bucket)
    except FileNotFoundError:
        raise ConfigError(f"--root {text}: bucket {scheme}://{bucket} does not exist. Create "
                          "it, or check the URL.") from None
    except PermissionError as exc:
        raise ConfigError(f"--root {text}: bucket {scheme}://{bucket} is not visible with "
                          f"these credentials ({str(exc).splitlines()[0]}). Check them, or "
                          "the URL.") from None
    except Exception as exc:  # noqa: BLE001 - any SDK error means the same to the user
        raise ConfigError(f"--root {text}: cannot reach {scheme}://{bucket}: "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0]}. Check the "
                          "URL, the network and the credentials.") from None


def _scheme(text: str) -> str:
    """A URL's scheme, "" for a local path (a Windows drive letter is not a scheme)."""
    scheme = urlsplit(str(text)).scheme
    return "" if len(scheme) <= 1 or "://" not in str(text) else scheme


def slug(url: str) -> str:
    """A URL as a file name: s3://bucket/team/root -> s3-bucket-team-root."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", url).strip("-")


def fspath(place: Folder) -> str:
    """The text a worker gets for a folder: a local path or a URL."""
    return place.url if isinstance(place, Location) else os.fspath(place)

"""Where artifacts live: a local folder, or any fsspec URL (s3://, gs://, abfs://, ...).

The artifact root is either a `pathlib.Path` (a local folder, the default: everything stays as
it was, plain files and an atomic folder rename for a commit) or a `Location`: an fsspec
filesystem and a path on it, with the small part of Path's surface the artifact code uses
(`/`, `name`, `parent`, `exists`, `read_text`, `write_text`, `open`, `iterdir`). Code that
reads or writes artifacts takes a `Folder` (either one) and never asks which, except where an
object store needs another protocol (artifacts.py: the manifest, written last, is the commit).

    root = open_root("s3://bucket/prefix")     # a Location ("runs" would give a Path)
    (root / "runs" / run_id / "run.json").write_text(...)   # one PUT
    folder("s3://bucket/prefix/runs/x/ingest") # back from a URL stored in the run store
    fspath(stage_dir)                          # what a worker gets: a path or a URL

A Location adds what an object store needs: `files()` (every object under it, with sizes),
`remove()`, `put_folder()` (a driver stage's local staging folder, uploaded at commit) and
`copy_to()` (server-side copies, for the cache); `local_copy()` downloads for libraries that
read only local files (Keras).

Credentials are never part of a Location: fsspec finds them where the SDKs do (environment,
config files, instance roles); a URL that carries `user:secret@` is refused, so that no secret
reaches a manifest, run.json, the run store, a log or a page.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import fsspec
from fsspec.implementations.local import LocalFileSystem

from seqline.pipeline.errors import ConfigError

__all__ = ["Folder", "Location", "folder", "fspath", "is_remote", "local_copy", "open_root",
           "remove", "staged_files", "write_atomically"]


@dataclass(frozen=True)
class Location:
    """A folder or file on an fsspec filesystem: `fs` and its own path (no protocol)."""

    fs: Any  # fsspec.AbstractFileSystem (untyped)
    path: str
    # A local folder for the hidden entries (".name") of this folder: working state of an
    # attempt that is never an artifact (train's BackupAndRestore folder) and that libraries
    # write with local-file APIs; see `with_scratch`.
    scratch: Path | None = None

    def __truediv__(self, name: str) -> Location:
        if self.scratch is not None and str(name).startswith("."):
            return self.scratch / name  # type: ignore[return-value]  # a local Path
        return Location(self.fs, posixpath.join(self.path, str(name)))

    def with_scratch(self) -> Location:
        """This folder, with its hidden entries in a local folder named after its URL, under
        $SEQLINE_HOME/scratch (~/.seqline): the same one for a resumed run on this machine."""
        home = Path(os.environ.get("SEQLINE_HOME") or Path.home() / ".seqline")
        return Location(self.fs, self.path, home / "scratch" / slug(self.url))

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

    def iterdir(self) -> Iterator[Location]:
        """What is directly under this folder (nothing if it does not exist)."""
        try:
            names = self.fs.ls(self.path, detail=False, refresh=True)
        except FileNotFoundError:
            return
        for name in sorted(names):
            yield Location(self.fs, str(name).rstrip("/"))

    def files(self) -> dict[str, int]:
        """Every object under this folder, by path relative to it, with its size."""
        self.fs.invalidate_cache(self.path)  # another process may have written meanwhile
        try:
            found = self.fs.find(self.path, detail=True)
        except FileNotFoundError:
            return {}
        base = self.path.rstrip("/") + "/"
        return {str(p)[len(base):]: int(info.get("size") or 0) for p, info in found.items()
                if str(p).startswith(base) and info.get("type") != "directory"}

    def remove(self) -> None:
        """This folder and everything under it (nothing if it does not exist)."""
        self.remove_files(list(self.files()))

    def remove_files(self, names: list[str]) -> None:
        """The objects `names` (paths relative to this folder), in one batch request."""
        if names:
            self.fs.rm([posixpath.join(self.path, name) for name in names])
        self.fs.invalidate_cache(self.path)

    def put_folder(self, local: Path) -> dict[str, int]:
        """Upload a local folder's files under this one; returns their paths and sizes."""
        sizes = staged_files(local)
        for name in sizes:
            self.fs.put_file(str(local / name), posixpath.join(self.path, name))
        return sizes

    def copy_to(self, target: Location, names: list[str]) -> None:
        """Server-side copies of `names` (relative paths) into `target`: no bytes via us."""
        for name in names:
            self.fs.copy(posixpath.join(self.path, name), posixpath.join(target.path, name))


Folder = Path | Location


@contextmanager
def local_copy(place: Folder) -> Iterator[Path]:
    """A local path holding `place` (a file or folder): itself if local, else a download
    into a temporary folder, removed afterwards (for libraries that read only local files)."""
    if isinstance(place, Path):
        yield place
        return
    with tempfile.TemporaryDirectory(prefix="seqline-") as tmp:
        target = Path(tmp) / place.name
        place.fs.get(place.path, str(target), recursive=place.is_dir())
        yield target


def staged_files(local: Path) -> dict[str, int]:
    """A local folder's files (relative posix paths) and their sizes, sorted."""
    return {p.relative_to(local).as_posix(): p.stat().st_size
            for p in sorted(local.rglob("*")) if p.is_file()}


def is_remote(place: Folder | str) -> bool:
    return isinstance(place, Location) or (isinstance(place, str) and _scheme(place) != "")


def folder(text: str | Path) -> Folder:
    """A folder from its text: a URL with a scheme is a Location, anything else a local Path."""
    if isinstance(text, Path) or not _scheme(text):
        return Path(text)
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
    if isinstance(text, Location):
        return text
    if isinstance(text, Path) or not _scheme(text):
        return Path(text)
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
        bucket = root.path.split("/", 1)[0]
        try:
            reachable = root.fs.exists(bucket)
        except Exception as exc:  # noqa: BLE001 - any SDK error means the same to the user
            raise ConfigError(f"--root {text}: cannot reach {parts.scheme}://{bucket}: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0]}. Check the "
                              "URL, the network and the credentials.") from None
        if not reachable:
            raise ConfigError(f"--root {text}: bucket {parts.scheme}://{bucket} does not "
                              "exist or is not visible with these credentials. Create it or "
                              "check the URL and the credentials.")
    return root


def _scheme(text: str) -> str:
    """A URL's scheme, "" for a local path (a Windows drive letter is not a scheme)."""
    scheme = urlsplit(str(text)).scheme
    return "" if len(scheme) <= 1 or "://" not in str(text) else scheme


def slug(url: str) -> str:
    """A URL as a file name: s3://bucket/team/root -> s3-bucket-team-root."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", url).strip("-")


def fspath(place: Folder) -> str:
    """The text a worker gets for a folder: a local path or a URL."""
    return os.fspath(place) if isinstance(place, Path) else place.url


def write_atomically(place: Folder, text: str) -> None:
    """Replace a small file whole: readers see the old text or the new, never a part.

    Locally through a temporary file renamed into place; on an object store one PUT
    replaces the object whole already.
    """
    if isinstance(place, Location):
        place.write_text(text)
        return
    tmp = place.with_name(place.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(place)


def remove(place: Folder) -> None:
    """A folder and everything under it (a local tree, or every object under a prefix)."""
    if isinstance(place, Location):
        place.remove()
    else:
        shutil.rmtree(place)

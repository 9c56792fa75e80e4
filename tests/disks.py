"""A small filesystem of a test's own (tmpfs), for what a full disk does to a run."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_filesystem(mount: Path, size: str) -> Iterator[Path]:
    """`mount` (made here) as a tmpfs of `size` (e.g. "3m") while in the block; the test is
    skipped where mounting needs root."""
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder: Path) -> Path:
    """Fill `folder`'s filesystem to its last byte (as the soak's disk_full fault leaves it);
    the filler file, whose removal frees the space again."""
    filler = folder / "filler"
    with contextlib.suppress(OSError), open(filler, "wb") as f:
        while True:
            f.write(b"\0" * 4096)
            f.flush()
    return filler


@contextmanager
def held_open(db: Path) -> Iterator[None]:
    """A SQLite store kept open by another process (a killed scheduler's files, a dashboard),
    its write-ahead log emptied: its -shm file is there, so it opens on a full disk, but its
    next write must grow the log, which the disk refuses ("database or disk is full")."""
    connection = sqlite3.connect(db)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        assert db.with_name(db.name + "-wal").stat().st_size == 0
        yield
    finally:
        connection.close()

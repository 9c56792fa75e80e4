"""What the run store refuses, by name (a conflict with what it holds, a name it lacks), and
the database's own words when it fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from seqline.pipeline.errors import ConfigError, RunNotFound, SeqlineError

__all__ = ["Conflict", "LeaseHeld", "RunIdTaken", "RunNotFound", "ScheduleExists",
           "ScheduleNotFound", "StoreFailed", "database_words", "refused_by_its_disk",
           "storing"]

# SQLite's primary result codes (the low byte of an extended one) for a file its disk
# refused: SQLITE_IOERR (10; e.g. SQLITE_IOERR_SHMSIZE, its -shm file could not grow) and
# SQLITE_FULL (13, "database or disk is full").
DISK_CODES = (10, 13)

# Callers catch these by name: "no such run" or "that id is taken" is an answer to act on,
# not a ConfigError caught as control flow. The CLI prints each as its one line, exit 2.


class Conflict(SeqlineError):
    """The store refused a write because of what it already holds (a key taken, a lease
    held): the request was well formed, the store's state stands in its way."""


class RunIdTaken(Conflict):
    """A run with this id is already in the store."""


class ScheduleExists(Conflict):
    """A schedule with this name is already in the store."""


class LeaseHeld(Conflict):
    """Another live scheduler holds this store's lease (one scheduler per store).

    Attributes:
        host: the holder's machine.
        pid: the holder's process id there.
    """

    def __init__(self, message: str, host: str, pid: int) -> None:
        super().__init__(message)
        self.host = host
        self.pid = pid


class StoreFailed(SeqlineError):
    """The store could not take a write (a full disk, a database gone): what was not
    recorded, in the database's own words, and how to go on (exit 1: nothing to fix in the
    command)."""


@contextmanager
def storing(url: str, what: str, then: str) -> Iterator[None]:
    """The database's errors in the block as StoreFailed, in one line.

    Example: with storing(url, "run r1's start", "run the same command again") -> "the run
    store at sqlite:///… could not record run r1's start (database or disk is full). Free
    space on its disk (or start its database), then run the same command again."
    """
    from sqlalchemy.exc import SQLAlchemyError  # here: the CLI's start-up imports this module

    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreFailed(f"the run store at {url} could not record {what} "
                          f"({database_words(exc)}). Free space on its disk (or start its "
                          f"database), then {then}.") from exc


class ScheduleNotFound(ConfigError):
    """No schedule of that name in the store (a name the user gave: fix it, as RunNotFound)."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name


def database_words(exc: BaseException) -> str:
    """The database's own words, on one line: SQLAlchemy's message adds the statement and its
    parameters, which are no help to a user and may hold a record's text.

    Example: OperationalError("(sqlite3.OperationalError) database or disk is full [SQL: …]")
    -> "database or disk is full".
    """
    words = " ".join(str(getattr(exc, "orig", None) or exc).split())[:300]
    if words == "database is locked":  # SQLite's: another writer held on past the timeout
        from seqline.orchestration.store.engine import BUSY_TIMEOUT_MS, lock_holders

        held = ", ".join(f"thread {name} for {seconds:.0f} s" for name, seconds in lock_holders())
        words += (f" (its write lock held in this process by {held})" if held else
                  f" (another process held its write lock for over {BUSY_TIMEOUT_MS // 1000} s)")
    return words


def refused_by_its_disk(exc: BaseException) -> bool:
    """Whether a SQLite store failed because of the disk under its file (full, or failing):
    freeing space, or waiting for it, is the fix, not another --store."""
    code = getattr(getattr(exc, "orig", None), "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in DISK_CODES

"""What the run store refuses, by name (a conflict with what it holds, a name it lacks), and
the database's own words when it fails."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from seqline.pipeline.errors import ConfigError, RunNotFound, SeqlineError

__all__ = ["Conflict", "LeaseHeld", "RunIdTaken", "RunNotFound", "ScheduleExists",
           "ScheduleNotFound", "StoreFailed", "database_words", "opening", "refused_by_its_disk",
           "shown_url", "storing"]

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


@contextmanager
def opening(url: str) -> Iterator[None]:
    """The database's errors as a store opens, in one line: one its disk refuses is
    StoreFailed (free space, run the same command again: exit 1); any other (a host that does
    not resolve, a server that is not up, a URL that is not one) a ConfigError naming the URL
    (fix --store or --root: exit 2), where `seqline run` printed SQLAlchemy's traceback.
    """
    from sqlalchemy.exc import ArgumentError, OperationalError

    try:
        yield
    except OperationalError as exc:
        if refused_by_its_disk(exc):
            raise StoreFailed(f"cannot open the run store at {shown_url(url)}: "
                              f"{database_words(exc)}: its disk is full or failing; free "
                              "space on it, then run the same command again.") from exc
        raise ConfigError(_not_opened(url, database_words(exc))) from exc
    except ArgumentError as exc:
        raise ConfigError(_not_opened(url, str(exc).splitlines()[0])) from exc


def _not_opened(url: str, why: str) -> str:
    return (f"cannot open the run store at {shown_url(url)}: {why}; check --store "
            "(postgresql+psycopg://user@host:port/db) or --root")


def shown_url(url: str) -> str:
    """A store URL fit for a terminal, a page or a log: its password, if any, as ***."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


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

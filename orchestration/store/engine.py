"""The store's database engine: SQLite settings per connection, and migrations to head."""

from __future__ import annotations

import gc
import logging
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text

from seqline.pipeline.errors import ConfigError, InternalError
from seqline.pipeline.storage import Folder, fspath, seqline_home, slug, storage_of

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = ["HEAD", "HEAD_REVISION", "alembic_config", "current_revision", "lock_holders",
           "make_engine", "store_beside", "store_url", "upgrade", "writing"]

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "head"
# The newest revision in migrations/versions (a test checks it): a store already there opens
# without importing Alembic, which costs more than the whole `runs list` query.
HEAD_REVISION = "0009"
# Another process may hold the write lock (a run committing a stage, a migration): wait this
# long before failing. 30 s outlasts any write the store makes, which are all short.
BUSY_TIMEOUT_MS = 30_000
# A write transaction held longer than this is said in the log, with its thread: every other
# writer waits on it, and one held past BUSY_TIMEOUT_MS fails theirs ("database is locked").
SLOW_WRITE_S = 5.0
# Any fixed number: two processes opening a fresh PostgreSQL store migrate one after the other.
MIGRATION_LOCK_ID = 0x5E9_11E
_BEGIN = "seqline_begin"  # execution option: how a SQLite transaction starts

log = logging.getLogger(__name__)
# This process's write transactions in progress, by thread: a "database is locked" names the
# one that held the lock (store.errors.database_words), or says it was another process.
_writers: dict[int, tuple[str, float]] = {}
_pausing = threading.Lock()  # guards the two below: _without_collection
_paused = 0  # write transactions in progress, which hold the garbage collector off
_collected = True  # whether it was on before the first of them


def make_engine(url: str, *, read_only: bool = False) -> Engine:
    """An engine for `url`; on SQLite, every connection gets WAL, a busy timeout and FKs.

    Args:
        url: a SQLAlchemy URL, `sqlite:///path` or `postgresql+psycopg://...`.
        read_only: every connection refuses writes at the database (the dashboard's: defence
            in depth behind a reader that only SELECTs).

    Returns:
        The engine (connections open lazily).
    """
    engine = create_engine(url)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _configure_sqlite)
        event.listen(engine, "begin", _begin_sqlite)
    if read_only:
        event.listen(engine, "connect", _refuse_writes)
    return engine


def _refuse_writes(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor.execute("PRAGMA query_only = ON")
    else:  # PostgreSQL. Committed: the driver ran the SET in a transaction of its own, and
        # the pool's rollback would undo it before the connection's first use
        cursor.execute("SET default_transaction_read_only = on")
        dbapi_connection.commit()
    cursor.close()


def _configure_sqlite(dbapi_connection: Any, _record: Any) -> None:
    # pysqlite's own BEGIN is deferred and comes late; we emit BEGIN ourselves (_begin_sqlite).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")  # first: WAL needs the lock
    _set_wal(cursor)  # readers (dashboard) never block a run
    cursor.execute("PRAGMA synchronous = NORMAL")  # durable in WAL mode but for power loss
    cursor.execute("PRAGMA foreign_keys = ON")  # SQLite leaves them off by default
    cursor.close()


def _set_wal(cursor: Any) -> None:
    """WAL mode, once per database file. Switching to it takes an exclusive lock that SQLite
    does not wait for (no busy handler): two processes opening a new store at once see
    "database is locked", so the loser retries until the winner has switched it."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # the winner's switch takes a few ms


def _begin_sqlite(conn: Connection) -> None:
    # A write transaction must take the write lock when it begins (IMMEDIATE): a deferred one
    # that reads, then writes, fails at once with SQLITE_BUSY in WAL mode instead of waiting.
    conn.exec_driver_sql(f"BEGIN {conn.get_execution_options().get(_BEGIN, 'DEFERRED')}")


@contextmanager
def writing(engine: Engine, *, foreign_keys: bool = True) -> Iterator[Connection]:
    """A short write transaction: committed on exit, rolled back on an exception.

    Args:
        engine: from `make_engine`.
        foreign_keys: False: SQLite enforces no foreign key in it (a migration that copies a
            table: dropping the old one would cascade to its children); on again after it.

    Returns:
        A context manager yielding the connection, its transaction begun.
    """
    with engine.connect() as conn, _keys(conn, foreign_keys):
        conn.execution_options(**{_BEGIN: "IMMEDIATE"})
        transaction = conn.begin()  # takes the write lock, waiting for it if need be
        with _without_collection(), transaction:
            began = time.monotonic()
            _writers[threading.get_ident()] = (threading.current_thread().name, began)
            try:
                yield conn
            finally:
                _writers.pop(threading.get_ident(), None)
        held = time.monotonic() - began
        if held > SLOW_WRITE_S:
            log.warning("the run store at %s: thread %s held its write lock for %.1f s; other "
                        "writers wait for it (at most %d s)", engine.url,
                        threading.current_thread().name, held, BUSY_TIMEOUT_MS // 1000)


@contextmanager
def _keys(conn: Connection, on: bool) -> Iterator[None]:
    """SQLite's foreign keys off while the block runs (set outside any transaction: inside
    one SQLite ignores the pragma), then on again; a no-op elsewhere or when `on`."""
    raw = conn.connection.driver_connection if not on and conn.dialect.name == "sqlite" \
        else None
    if raw is None:
        yield
        return
    raw.execute("PRAGMA foreign_keys = OFF")
    try:
        yield
    finally:
        raw.execute("PRAGMA foreign_keys = ON")


@contextmanager
def _without_collection() -> Iterator[None]:
    """No automatic garbage collection while a write lock is held. A collection runs the
    finalizers of whatever garbage the process holds, in the thread that happens to allocate,
    and one may block (a TensorFlow iterator's deleter waits for its generator's thread)
    while every other writer waits on the lock. Counted: several threads write at once."""
    global _paused, _collected
    with _pausing:
        if _paused == 0:
            _collected = gc.isenabled()
            gc.disable()
        _paused += 1
    try:
        yield
    finally:
        with _pausing:
            _paused -= 1
            if _paused == 0 and _collected:
                gc.enable()


def lock_holders() -> list[tuple[str, float]]:
    """This process's threads in a write transaction now, and for how many seconds; where
    each one is goes to the log (what holds a store's lock that long is a bug to find)."""
    now, frames = time.monotonic(), sys._current_frames()
    held = []
    for ident, (name, began) in list(_writers.items()):
        held.append((name, now - began))
        if ident in frames:
            log.warning("thread %s has held the run store's write lock for %.0f s, at:\n%s",
                        name, now - began,
                        "".join(traceback.format_stack(frames[ident], limit=12)).rstrip())
    return held


def alembic_config() -> Config:
    """The Alembic configuration, built in code: users need no alembic.ini.

    Returns:
        A Config whose script_location is this package's migrations folder.
    """
    from alembic.config import Config  # late: see HEAD_REVISION

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def current_revision(engine: Engine) -> str | None:
    """The database's revision (None for an empty database).

    Args:
        engine: from `make_engine`.

    Returns:
        The revision id Alembic recorded, or None.
    """
    with engine.connect() as conn:
        return _revision(conn)


def upgrade(engine: Engine, revision: str = HEAD) -> None:
    """Migrate the database to `revision`, one process at a time; a no-op when already there.

    An empty database asked for "head" is made at head in one step (`_made_at_head`); an
    explicit revision id always goes through the migrations.

    Args:
        engine: from `make_engine`.
        revision: an Alembic revision id, or "head".
    """
    if current_revision(engine) == (HEAD_REVISION if revision == HEAD else revision):
        return  # the common case: no lock taken, no write, no Alembic
    if revision == HEAD and _made_at_head(engine):
        return
    from alembic import command
    from alembic.util import CommandError

    config = alembic_config()
    # Foreign keys off on SQLite: a revision that copies a table (batch mode) drops the old
    # one, which would cascade to its children's rows; checked before the commit instead.
    with writing(engine, foreign_keys=False) as conn:
        sqlite = conn.dialect.name == "sqlite"
        if not sqlite:  # SQLite's IMMEDIATE already serialises this
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
        dangling = _dangling(conn) if sqlite else 0
        config.attributes["connection"] = conn
        try:
            command.upgrade(config, revision)
        except CommandError as exc:  # e.g. a store written by a newer seqline
            raise ConfigError(f"cannot migrate the run store at {engine.url!r} (at revision "
                              f"{current_revision(engine)}) to {revision}: {exc}. Upgrade "
                              "seqline, or point --store elsewhere.") from exc
        if sqlite and _dangling(conn) > dangling:  # (rolled back: the store stays as it was)
            raise InternalError(f"migrating the run store at {engine.url!r} to {revision} "
                                "left rows pointing at rows it removed")


def _made_at_head(engine: Engine) -> bool:
    """Make an empty database at head from tables.py, stamped as Alembic stamps it; whether
    the database is at head now (False: it holds an older schema, for the migrations).

    What the eight migrations make one by one, in one step (tests/unit/test_store.py compares
    the two on SQLite and PostgreSQL): every new root's first command imported Alembic and
    ran them, 0.2 CPU-seconds (a whole tiny run is 0.7 s), and the suite makes 360 roots.
    """
    from seqline.orchestration.store.tables import alembic_version, metadata

    with writing(engine) as conn:  # one process at a time, as a migration
        if conn.dialect.name != "sqlite":  # SQLite's IMMEDIATE already serialises this
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
        if inspect(conn).get_table_names():  # not empty: another process made it meanwhile
            return _revision(conn) == HEAD_REVISION  # (or it is older: for the migrations)
        metadata.create_all(conn)
        alembic_version.create(conn)
        conn.execute(alembic_version.insert().values(version_num=HEAD_REVISION))
    return True


def _revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _dangling(conn: Connection) -> int:
    """SQLite's rows whose foreign key points at no row (a store written with its keys off
    may have some: a migration must only not add any)."""
    return len(conn.exec_driver_sql("PRAGMA foreign_key_check").all())


def store_beside(root: Folder) -> bool:
    """Whether `root` keeps its run store beside its runs (a local folder does; an object store
    holds no database, see `store_url`)."""
    return storage_of(root).on_disk(root) is not None


def store_url(root: Folder, url: str | None, create: bool = True) -> tuple[Path, str | None]:
    """`RunStore.open`'s arguments: the store of a local root is beside its runs; an object
    store holds no database, so by default its store is a local SQLite file named after it.

    Example: s3://bucket/team/root -> ~/.seqline/stores/s3-bucket-team-root.db ($SEQLINE_HOME
    instead of ~/.seqline). Several machines sharing a root share a store through --store.
    """
    local = storage_of(root).on_disk(root)
    if url is not None or local is not None:
        return local or Path(), url
    home = seqline_home() / "stores"
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home, f"sqlite:///{(home / slug(fspath(root))).resolve()}.db"

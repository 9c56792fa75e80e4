"""The run store, opened: its reads and writes on one engine, and its schedules."""

from __future__ import annotations

from pathlib import Path

from seqline.orchestration.store.engine import make_engine, upgrade
from seqline.orchestration.store.errors import opening
from seqline.orchestration.store.reads import RunReader
from seqline.orchestration.store.schedules import ScheduleStore
from seqline.orchestration.store.writes import RunWriter
from seqline.pipeline.storage import Folder, open_root

__all__ = ["DB_FILE", "RunStore", "sqlite_url"]

DB_FILE = "seqline.db"  # a local root's store: <root>/seqline.db


def sqlite_url(folder: Path | str) -> str:
    """The URL of the SQLite store kept in `folder`: `sqlite:////abs/folder/seqline.db`."""
    return f"sqlite:///{Path(folder).resolve() / DB_FILE}"


class RunStore(RunReader, RunWriter):
    """Every run, stage run, artifact and metric, in SQLite or PostgreSQL: the reads
    (RunReader) and the writes (RunWriter) of one engine, and `schedules` (ScheduleStore).

    SQLite (the default, `<root>/seqline.db`, WAL mode so readers never wait on a run) or
    PostgreSQL (`postgresql+psycopg://…`, for teams). The schema is migrated to the newest
    revision when the store opens, so an upgrade of seqline keeps the history.
    """

    def __init__(self, url: str) -> None:
        """Open the store at `url` and migrate it to head.

        Args:
            url: a SQLAlchemy URL (`sqlite:///…` or `postgresql+psycopg://…`).
        """
        with opening(url):  # a database not there, or not reached: one line, not a traceback
            engine = make_engine(url)
            upgrade(engine)
        RunReader.__init__(self, engine)  # both halves keep the same engine and url
        RunWriter.__init__(self, engine)
        self.schedules = ScheduleStore(engine)

    @classmethod
    def open(cls, root: Path, url: str | None = None) -> RunStore:
        """The store of an artifact root: `url` if given, else SQLite at `<root>/seqline.db`.

        Args:
            root: the artifact root (created if missing, for the SQLite file).
            url: a database URL (`--store`), or None.

        Returns:
            The open store.
        """
        if url is None:
            Path(root).mkdir(parents=True, exist_ok=True)
            url = sqlite_url(root)
        return cls(url)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rebuild(self, root: Folder | str) -> int:
        """Index the runs under `<root>/runs/` that the store lacks (a lost store, recreated).

        Args:
            root: the artifact root: a folder, a `Location`, or its text (a path or a URL).

        Returns:
            How many runs were added.
        """
        from seqline.orchestration.store.rebuild import index_runs  # rarely used: load late

        return index_runs(self.engine, open_root(root))

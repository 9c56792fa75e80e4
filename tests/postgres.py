"""A throwaway PostgreSQL server for tests: Debian's postgresql 15, on a free port, in a temp dir.

The recipe of ORCHESTRATION.md §1 (verified; about 1 s to start). `make test` installs the
package when it is missing; the fixture skips, saying why, only when it still cannot start.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["postgres_server", "postgres_url"]

PG_BIN = Path(os.environ.get("SEQLINE_PG_BIN", "/usr/lib/postgresql/15/bin"))
USER = "seqline"
# pg_ctl -w waits for the server to accept connections; 30 s is far beyond its ~1 s start.
START_TIMEOUT_S = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(*command: str) -> list[str]:
    """initdb refuses to run as root: root runs the server as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else list(command)


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=START_TIMEOUT_S + 30)
    if done.returncode != 0:
        pytest.skip(f"PostgreSQL could not {what}: {(done.stderr or done.stdout).strip()[-300:]}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Start a server for the session.

    Returns:
        Its base URL, `postgresql+psycopg://seqline@127.0.0.1:PORT` (add `/dbname`).
    """
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL is not installed ({PG_BIN}/initdb is missing): run `make "
                    "test` (it installs Debian's postgresql) or `apt-get install postgresql`")
    folder = Path(tempfile.mkdtemp(prefix="seqline-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    port = _free_port()
    data = str(folder / "data")
    _run(_as_postgres(str(PG_BIN / "initdb"), "-D", data, "-A", "trust", "-U", USER,
                      "--no-sync"), "initialise a data folder")
    _run(_as_postgres(str(PG_BIN / "pg_ctl"), "-D", data, "-l", str(folder / "log"), "-w",
                      "-t", str(START_TIMEOUT_S), "start", "-o",
                      f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"),
         "start")
    try:
        yield f"postgresql+psycopg://{USER}@127.0.0.1:{port}"
    finally:
        subprocess.run(_as_postgres(str(PG_BIN / "pg_ctl"), "-D", data, "-m", "immediate",
                                    "stop"), capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database on the session's server, dropped after the test.

    Returns:
        `postgresql+psycopg://seqline@127.0.0.1:PORT/<fresh database>`.
    """
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = postgres_server.replace("postgresql+psycopg://", "postgresql://") + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"{postgres_server}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")  # FORCE: ends leftover sessions

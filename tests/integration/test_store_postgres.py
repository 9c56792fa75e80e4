"""The run store's contract on SQLite and on a real PostgreSQL server (tests/postgres.py)."""

from __future__ import annotations

import pytest

from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.unit.conftest import store  # noqa: F401  (fixture)
from tests.unit.test_store import TestStoreContract as _Contract
from tests.unit.test_store import real_run  # noqa: F401  (fixture)
from tests.unit.test_store_reads import TestReads as _Reads


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """Each contract test once per database: a fresh SQLite file, a fresh PostgreSQL db."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'seqline.db'}"


@pytest.mark.integration
class TestStoreContractOnBothDatabases(_Contract):
    """Every test of the contract, including the run-id race, on both databases."""


@pytest.mark.integration
class TestReadsOnBothDatabases(_Reads):
    """Every read the CLI and the dashboard make, the read-only engine included, on both."""

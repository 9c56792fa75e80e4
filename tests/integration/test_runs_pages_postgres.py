"""The runs list's pages on a real PostgreSQL server too (tests/postgres.py): its row-value
comparisons and index order are the database's own."""

from __future__ import annotations

import pytest

from tests.postgres import postgres_server, postgres_url  # noqa: F401  (fixtures)
from tests.unit.conftest import store  # noqa: F401  (fixture)
from tests.unit.test_runs_pages import TestRunsPages as _Pages


@pytest.fixture
def store_url(postgres_url: str) -> str:  # noqa: F811 - the fixture, by name
    return postgres_url


@pytest.mark.integration
class TestRunsPagesOnPostgres(_Pages):
    """Every test of the runs list's pages, on PostgreSQL."""

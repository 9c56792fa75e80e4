"""The unit tests' run store: a fresh SQLite file, opened.

The PostgreSQL module (tests/integration/test_store_postgres.py) runs the store's tests with
its own `store_url`, and takes `store` from here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from seqline.orchestration.store import RunStore


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'seqline.db'}"


@pytest.fixture
def store(store_url: str) -> Iterator[RunStore]:
    opened = RunStore(store_url)
    yield opened
    opened.close()

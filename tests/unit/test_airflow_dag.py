"""The DAG text `seqline schedule export --airflow` writes: where its runs keep their store."""

from datetime import UTC, datetime

import pytest

from seqline.orchestration.schedule.airflow import airflow_dag
from seqline.orchestration.store import Schedule
from seqline.pipeline.storage import folder

AT = datetime(2026, 11, 23, tzinfo=UTC)
NIGHTLY = Schedule(name="nightly", pipeline="/p.yaml", cron="30 2 * * *", tz="UTC",
                   runner="local", workers=2, overlap="skip", catchup="none", max_catchup=1,
                   start=None, end=None, paused=False, since=AT, created=AT)
NO_DATABASE = "An object-store root holds no database"


@pytest.mark.parametrize(("root", "store", "note", "words"), [
    ("local", None, False, []),
    ("s3://bucket/team/root", None, True, []),
    ("s3://bucket/team/root", "postgresql://db/runs", False, ["--store postgresql://db/runs"]),
    ("local", "postgresql://u:secret@db/runs", False, ['--store "$SEQLINE_STORE"']),
])
def test_the_dag_says_where_runs_keep_their_store(tmp_path, root, store, note, words):
    """A local root keeps its store beside its runs; an object-store root without --store gets
    a note (each worker would keep its own); a password never lands in the file."""
    text = airflow_dag(NIGHTLY, tmp_path if root == "local" else folder(root), store)
    assert (NO_DATABASE in text) is note
    assert all(word in text for word in words) and "secret" not in text
    compile(text, "dag.py", "exec")

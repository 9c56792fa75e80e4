"""The run store's tables, as they stand at the newest migration (head)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.schema import conv

from seqline.orchestration.store.statuses import (
    RunStatus,
    StageStatus,
    TickStatus,
    TickTrigger,
    Trigger,
)

__all__ = [
    "ARTIFACT_ROLES",
    "CATCHUP_POLICIES",
    "COUNTS",
    "OVERLAP_POLICIES",
    "RUN_STATUSES",
    "STAGE_STATUSES",
    "TICK_STATUSES",
    "TICK_TRIGGERS",
    "TRIGGERS",
    "UTCDateTime",
    "alembic_version",
    "artifacts",
    "epochs",
    "eval_metrics",
    "events",
    "lineage",
    "metadata",
    "pipelines",
    "runs",
    "samples",
    "scheduler_lease",
    "schedules",
    "stage_runs",
    "ticks",
]

# SQLAlchemy Core, not the ORM: every call is one short statement whose rows become plain JSON
# dicts (the CLI's and dashboard's contract); an identity map and sessions would only add cost.

# The values each CHECK constraint allows (statuses.py names them; migrations keep frozen
# copies of these as they were at each revision).
RUN_STATUSES = tuple(RunStatus)
STAGE_STATUSES = tuple(StageStatus)
TRIGGERS = tuple(Trigger)
ARTIFACT_ROLES = ("input", "output")
# A stage's account (the ordering contract's accounting): records_in = records_out + filtered
# + dead_lettered, explode counted apart. Columns of stage_runs, keys of `runs show --json`.
COUNTS = ("records_in", "records_out", "filtered", "exploded", "dead_lettered")

# Fixed names make constraints the same on SQLite and PostgreSQL, so migrations can name them.
metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})


class UTCDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on every backend (SQLite keeps no zone: it stores UTC, naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:  # a naive time is ambiguous: refuse it rather than guess
            raise ValueError(f"naive datetime {value!r}: pass an aware one (UTC)")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _one_of(table: str, column: str, values: tuple[str, ...]) -> CheckConstraint:
    listed = ", ".join(f"'{v}'" for v in values)
    return CheckConstraint(f"{column} IN ({listed})", name=_check(table, column))


def _check(table: str, name: str) -> conv:
    """A CHECK constraint's name as every store has it: revisions 1 and 3 wrote
    `ck_<table>_<name>`, and the naming convention prefixed that once more (r0008's note).
    Given whole, so that a store made from these tables (engine._made_at_head) has them too."""
    return conv(f"ck_{table}_ck_{table}_{name}")


pipelines = Table(
    "pipelines", metadata,
    Column("id", Integer, primary_key=True),
    Column("name", String(200), nullable=False),
    # '' for unknown, not NULL: NULLs never collide in a UNIQUE constraint, '' does.
    Column("file", String(1000), nullable=False, server_default=""),
    Column("fingerprint", String(128), nullable=False, server_default=""),
    Column("created", UTCDateTime, nullable=False),
    UniqueConstraint("name", "file", "fingerprint"),
)

runs = Table(
    "runs", metadata,
    Column("run_id", String(200), primary_key=True),  # the key: a taken id fails the INSERT
    Column("pipeline_id", ForeignKey("pipelines.id"), nullable=False),
    Column("pipeline", String(200), nullable=False),  # copied from pipelines: list filters on it
    Column("status", String(16), nullable=False),
    Column("runner", String(50), nullable=False),
    Column("options", JSON, nullable=False),
    Column("trigger", String(16), nullable=False),
    Column("started", UTCDateTime, nullable=False),
    Column("finished", UTCDateTime),
    Column("heartbeat", UTCDateTime),
    Column("error_stage", String(200)),
    Column("error_seq", BigInteger),
    Column("error_message", Text),  # one line, as the terminal printed it
    Column("error_traceback", Text),  # revision 5: where it happened, for the failing stage
    Column("host", String(255)),
    Column("pid", Integer),
    Column("seqline_version", String(50)),
    # Revision 9: a resumed run's seconds count its attempts, not the pause between them:
    # when it was last resumed, and the seconds its attempts before that ran.
    Column("resumed", UTCDateTime),
    Column("earlier_seconds", Float),
    _one_of("runs", "status", RUN_STATUSES),
    _one_of("runs", "trigger", TRIGGERS),
    # Revision 2: `runs list` filters by pipeline or status, newest first; the reaper scans
    # the running ones.
    Index(None, "started"),
    Index(None, "pipeline", "started"),
    Index(None, "status", "started"),
)

stage_runs = Table(
    "stage_runs", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("stage", String(200), nullable=False),
    Column("component", String(100), nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("started", UTCDateTime),
    Column("finished", UTCDateTime),
    Column("records_in", BigInteger),
    Column("records_out", BigInteger),
    Column("filtered", BigInteger),
    Column("exploded", BigInteger),
    Column("dead_lettered", BigInteger),
    Column("seconds", Float),
    Column("waited_input", Float),
    Column("waited_output", Float),
    Column("max_in_flight", Integer),  # blocks in flight at most (the runner's window in use)
    Column("cache_key", String(128), index=True),
    Column("cached_from", String(200)),  # a run_id; no foreign key: that run may be deleted
    Column("params", JSON, nullable=False),
    Column("error", Text),  # revision 2: why this attempt failed (retries keep each reason)
    Column("blessed", Boolean),  # revision 2: evaluate's verdict; NULL for other stages
    # Revision 4: blocks run again because their worker died (where the engine tells).
    Column("block_retries", Integer),
    # Revision 5: why the stage ran, was reused or did not run (the plan's reason, or
    # "upstream `x` failed"), and its cache key's parts, so the next plan can say what changed.
    Column("reason", Text),
    Column("key_parts", JSON),
    _one_of("stage_runs", "status", STAGE_STATUSES),  # revision 8 added `cancelled`
    UniqueConstraint("run_id", "stage", "attempt"),
)

artifacts = Table(
    "artifacts", metadata,
    Column("id", Integer, primary_key=True),
    Column("uri", String(2000), nullable=False, unique=True),  # a cache hit reuses the row
    Column("kind", String(50), nullable=False),
    Column("records", BigInteger),
    Column("bytes", BigInteger),
    Column("checksum", String(128)),
)

lineage = Table(
    "lineage", metadata,
    Column("stage_run_id", ForeignKey("stage_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("artifact_id", ForeignKey("artifacts.id", ondelete="CASCADE"), primary_key=True),
    Column("role", String(8), primary_key=True),
    _one_of("lineage", "role", ARTIFACT_ROLES),
    Index(None, "artifact_id"),  # "which stage runs read this artifact?"
)

samples = Table(
    "samples", metadata,
    Column("id", Integer, primary_key=True),
    Column("stage_run_id", ForeignKey("stage_runs.id", ondelete="CASCADE"), nullable=False),
    Column("t", Float, nullable=False),  # Unix seconds (UTC): 8 bytes a row, plots directly
    Column("records_done", BigInteger, nullable=False),
    Column("rows_per_s", Float),
    Column("waited_input", Float),
    Column("waited_output", Float),
    Column("in_flight", Integer),
    Column("reorder_held", Integer),
    # Revision 6: head of line, the reorder buffer's state as sampled (HeadOfLine): the seq
    # released in order, the highest finished, the results held (records, bytes) and the
    # block they wait for (index, first seq, attempt, worker, seconds it has run).
    Column("watermark", BigInteger),
    Column("seq_done", BigInteger),
    Column("held_records", BigInteger),
    Column("held_bytes", BigInteger),
    Column("blocker_block", Integer),
    Column("blocker_seq", BigInteger),
    Column("blocker_attempt", Integer),
    Column("blocker_worker", String(64)),
    Column("blocker_seconds", Float),
    Index(None, "stage_run_id", "t"),
)

# Revision 5: what happened in a run, as the executor and runners published it (events.py):
# every stage's start, reuse, commit, failure or skip, and its progress coalesced per
# sampling interval, so a finished run is drawn from the same facts as a live one.
events = Table(
    "events", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", ForeignKey("runs.run_id", ondelete="CASCADE"), nullable=False),
    Column("t", Float, nullable=False),  # Unix seconds (UTC)
    Column("stage", String(200)),  # NULL for the run's own events
    Column("kind", String(32), nullable=False),
    Column("body", JSON, nullable=False),
    Index(None, "run_id", "id"),
)

epochs = Table(
    "epochs", metadata,
    Column("stage_run_id", ForeignKey("stage_runs.id", ondelete="CASCADE"), primary_key=True),
    Column("epoch", Integer, primary_key=True),
    Column("metrics", JSON, nullable=False),
    Column("input_wait_seconds", Float),
    Column("seconds", Float),
)

eval_metrics = Table(
    "eval_metrics", metadata,
    Column("id", Integer, primary_key=True),
    Column("stage_run_id", ForeignKey("stage_runs.id", ondelete="CASCADE"), nullable=False),
    Column("slice_column", String(200)),  # NULL (with slice_value) for the overall metric
    Column("slice_value", String(500)),
    Column("metric", String(200), nullable=False),
    Column("value", Float, nullable=False),
    Index(None, "stage_run_id"),
)


# -- schedules (revision 3) -------------------------------------------------------------------

OVERLAP_POLICIES = ("skip", "queue", "allow")
CATCHUP_POLICIES = ("none", "latest", "all")
# (statuses.TickStatus says what each status means)
TICK_STATUSES = tuple(TickStatus)
TICK_TRIGGERS = tuple(TickTrigger)

schedules = Table(
    "schedules", metadata,
    Column("name", String(100), primary_key=True),  # a taken name fails the INSERT
    Column("pipeline", String(1000), nullable=False),  # the pipeline file, absolute
    Column("cron", String(200), nullable=False),
    Column("tz", String(64), nullable=False),  # an IANA zone name, e.g. Europe/Berlin
    Column("runner", String(50), nullable=False),
    Column("workers", Integer, nullable=False),
    Column("overlap", String(8), nullable=False),
    Column("catchup", String(8), nullable=False),
    Column("max_catchup", Integer, nullable=False),
    Column("start", UTCDateTime),  # no fire time before it (NULL: none)
    Column("end", UTCDateTime),  # none after it (NULL: none)
    Column("paused", Boolean, nullable=False),
    # Fire times count from here: when the schedule was added or last resumed. Time spent
    # paused is not caught up; time the scheduler was down is (the catch-up policy).
    Column("since", UTCDateTime, nullable=False),
    Column("created", UTCDateTime, nullable=False),
    _one_of("schedules", "overlap", OVERLAP_POLICIES),
    _one_of("schedules", "catchup", CATCHUP_POLICIES),
)

ticks = Table(
    "ticks", metadata,
    Column("id", Integer, primary_key=True),
    Column("schedule", ForeignKey("schedules.name", ondelete="CASCADE"), nullable=False),
    Column("fire_time", UTCDateTime, nullable=False),
    Column("trigger", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    # Set when the tick is recorded, before its run exists: no foreign key to runs.
    Column("run_id", String(200)),
    Column("reason", Text),
    Column("recorded", UTCDateTime, nullable=False),
    Column("launched", UTCDateTime),
    Column("host", String(255)),  # where the run's process was started, and its pid
    Column("pid", Integer),
    _one_of("ticks", "status", TICK_STATUSES),
    _one_of("ticks", "trigger", TICK_TRIGGERS),
    # The heart of "killed at any moment, restarted: no tick twice, none lost": a fire time is
    # recorded once per schedule and trigger (a backfill may run a fire time the schedule ran).
    UniqueConstraint("schedule", "fire_time", "trigger"),
    Index(None, "status"),  # the scheduler's each-second look for launching and queued ticks
    Index(None, "run_id"),  # revision 7: the tick of a run (its page's rerun line)
)

scheduler_lease = Table(
    "scheduler_lease", metadata,
    Column("id", Integer, primary_key=True),  # always 1: one scheduler per store
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("token", String(64), nullable=False),  # which scheduler process holds it
    Column("acquired", UTCDateTime, nullable=False),
    Column("expires", UTCDateTime, nullable=False),
    CheckConstraint("id = 1", name=_check("scheduler_lease", "one_row")),
)


# Alembic's own table, as `alembic stamp` makes it (alembic/runtime/migration.py): a database
# made at head in one step (engine._made_at_head) is one the migrations take up from there.
# Not in `metadata`: the tables above are seqline's.
alembic_version = Table(
    "alembic_version", MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)

"""A run store's schema as the database describes it, and Alembic run on a store: for the tests
that compare a store made at head in one step with one the migrations made."""

from __future__ import annotations

import sqlalchemy as sa

from seqline.orchestration.store import alembic_config

__all__ = ["alembic_command", "schema"]


def schema(engine: sa.Engine) -> dict[str, dict[str, list]]:
    """Every table as the database describes it: columns (name, type, nullable, default),
    primary key, foreign keys, indexes, unique and check constraints."""
    seen = sa.inspect(engine)
    described: dict[str, dict[str, list]] = {}
    for table in sorted(seen.get_table_names()):
        described[table] = {
            "columns": sorted((c["name"], str(c["type"]), c["nullable"], str(c["default"]))
                              for c in seen.get_columns(table)),
            "primary key": sorted(seen.get_pk_constraint(table)["constrained_columns"]),
            "foreign keys": sorted((f["name"], f["constrained_columns"], f["referred_table"],
                                    f["referred_columns"], sorted(f["options"].items()))
                                   for f in seen.get_foreign_keys(table)),
            "indexes": sorted((i["name"], i["column_names"], i["unique"])
                              for i in seen.get_indexes(table)),
            "unique": sorted((u["name"], u["column_names"])
                             for u in seen.get_unique_constraints(table)),
            "checks": sorted((c["name"], " ".join(c["sqltext"].split()))
                             for c in seen.get_check_constraints(table)),
        }
    return described


def alembic_command(engine: sa.Engine, verb: str, revision: str) -> None:
    """`alembic <verb> <revision>` on the store, as engine.upgrade runs Alembic."""
    from alembic import command

    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        getattr(command, verb)(config, revision)

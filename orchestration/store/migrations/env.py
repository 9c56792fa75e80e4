"""Alembic's environment: migrates the connection the store hands over, in its transaction."""

from __future__ import annotations

from alembic import context

from seqline.orchestration.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("the run store migrates itself when opened (RunStore.open); run "
                       "`seqline runs list` rather than the alembic command")
# Batch mode: SQLite alters most things only by copying a table, which batch mode does.
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

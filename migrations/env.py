"""Alembic environment: runs on a connection handed over by ``monitor.storage.engine``.

``monitor migrate`` and every command that touches the database call
``monitor.storage.engine.migrate``, which opens the connection (async engines included) and
passes it in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

from monitor.storage.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `monitor migrate` (monitor.storage.engine.migrate)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=True,
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()

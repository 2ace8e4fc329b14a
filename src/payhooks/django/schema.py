"""The core's table, created by Django's ``migrate``.

Each migration of this app runs ``apply_core`` for the database and declares the model's state
beside it (``SeparateDatabaseAndState``). ``apply_core`` is ``payhooks.migrate`` on the
migration's own connection and transaction: the core's SQL files that are not yet recorded in
``payhooks_migrations`` are applied and recorded there, under the core's advisory lock. So a
database where ``payhooks.migrate`` or the reference service already created the table is
adopted as it is, and ``payhooks.migrate`` run later finds nothing left to do.
"""

from __future__ import annotations

from typing import Any

from psycopg.pq import TransactionStatus

from payhooks.django.deliveries import raw_connection
from payhooks.plumbing.schema import migrate


def apply_core(apps: Any, schema_editor: Any) -> None:
    conn = raw_connection(schema_editor.connection.alias)
    if not conn.autocommit and conn.info.transaction_status is TransactionStatus.IDLE:
        conn.execute("SELECT 1")  # open Django's transaction, so the core's nests inside it
    migrate(conn)


def keep_core(apps: Any, schema_editor: Any) -> None:
    """Unapplying keeps the table and its records: they are what stops a delivery the
    gateway sends again from acting twice. Drop it by hand if that is really meant."""

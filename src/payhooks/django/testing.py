"""For a merchant's tests: payhooks' tables emptied between them (docs/django.md, "Testing
your shop").

Django's ``TransactionTestCase`` empties the tables of Django's models after each test.
payhooks keeps most of what it knows in tables no model reads (expectations, payments, refunds,
settlements, ...), and a payment recorded there makes the same delivery in the next test a
``duplicate``::

    from django.test import TransactionTestCase
    from payhooks.django.testing import empty_tables

    class CheckoutTests(TransactionTestCase):
        available_apps = ["django.contrib.auth", "django.contrib.contenttypes", "orders",
                          "payhooks.django"]

        def tearDown(self):
            empty_tables()
"""

from __future__ import annotations

from psycopg import sql

from payhooks.django import alias, connection
from payhooks.django.views import delivery_log

_TABLES = """
SELECT schemaname, tablename FROM pg_tables
WHERE schemaname = current_schema()
  AND (tablename = 'processed_webhooks' OR tablename LIKE 'payhooks\\_%')
  AND tablename <> 'payhooks_migrations'
ORDER BY tablename
"""


def empty_tables(using: str | None = None) -> None:
    """Every row payhooks keeps on the database ``using`` names (``PAYHOOKS["DATABASE"]``
    unless given) deleted: the core's tables, ``payhooks_migrations`` kept, truncated with
    whatever refers to them (``CASCADE``, as Django's flush of ``available_apps``). For
    tests only: the records are what stops a delivery sent again from acting twice.

    The log of the view's requests is written behind the answers, by a thread of its own: its
    lines of the test's requests are written first (``DeliveryLog.stop``), never into the
    next test's tables."""
    database = using or alias()
    delivery_log(database).stop()
    conn = connection(database)
    tables = [sql.Identifier(schema, table) for schema, table in conn.execute(_TABLES)]
    if tables:
        conn.execute(sql.SQL("TRUNCATE {} CASCADE").format(sql.SQL(", ").join(tables)))

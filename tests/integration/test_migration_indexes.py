"""The indexes later migrations add to busy tables can be built beforehand with CREATE INDEX
CONCURRENTLY (docs/operations.md, "Upgrading"): the migration then finds each and does nothing,
so webhook inserts never wait for a build inside the migration's transaction."""

from __future__ import annotations

import pytest

from payhooks.plumbing import db
from payhooks.service import database
from tests.integration.test_migrations import empty_db  # noqa: F401  (fixture)

# (track, version, index, the statement docs/operations.md gives for building it first)
BUILT_FIRST = [
    (
        "core",
        "0004_merchant_ref_lookup",
        "processed_webhooks_merchant_ref",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS processed_webhooks_merchant_ref"
        " ON processed_webhooks (provider, merchant_ref) WHERE merchant_ref IS NOT NULL",
    ),
    # The shop's 0010 built deliveries_answered, which its 0012 hands to the core's log.
    (
        "core",
        "0006_deliveries",
        "payhooks_deliveries_answered",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS payhooks_deliveries_answered"
        " ON payhooks_deliveries (provider, received_at) WHERE status < 300",
    ),
    (
        "core",
        "0008_due_checkouts",
        "payhooks_expectations_unenrolled",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS payhooks_expectations_unenrolled"
        " ON payhooks_expectations (provider, created_at, gateway_order_id) WHERE NOT enrolled",
    ),
    (
        "core",
        "0008_due_checkouts",
        "payhooks_reconcile_due",
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS payhooks_reconcile_due"
        " ON payhooks_reconcile (provider, captured, next_attempt_at, gateway_order_id)",
    ),
]


def oid_of(conn: db.Connection, index: str) -> int | None:
    row = conn.execute("SELECT to_regclass(%s)::oid", (index,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


@pytest.mark.parametrize(("track", "version", "index", "build"), BUILT_FIRST)
def test_an_index_built_concurrently_first_makes_its_migration_a_no_op(
    empty_db,  # noqa: F811
    track,
    version,
    index,
    build,
):
    database.migrate(empty_db)
    # A database one version behind, the index built beforehand as the upgrade notes say.
    empty_db.execute(f"DROP INDEX {index}".encode())
    empty_db.execute(
        "DELETE FROM payhooks_migrations WHERE track = %s AND version = %s", (track, version)
    )
    empty_db.execute(build.encode())
    built = oid_of(empty_db, index)
    assert database.migrate(empty_db) == [f"{track}/{version}"]
    assert oid_of(empty_db, index) == built  # found, not built again

"""`payhooks migrate` on a merchant's own database, set up as docs/fastapi.md says (its own
`orders` table beside payhooks'): `--core` applies payhooks' own tables alone, as
`payhooks.migrate(conn)` does, and the bare command (the reference service's tables too) says
so in one line rather than clashing with the merchant's tables, as `payhooks serve` does."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.acceptance.conftest import invoke

ORDERS = (
    "CREATE TABLE orders (gateway_order_id text PRIMARY KEY,"
    " amount_paise bigint NOT NULL, currency text NOT NULL)"
)


@pytest.fixture
def merchants(admin_url: str) -> Iterator[str]:
    """A new database holding nothing but the merchant's own `orders` table."""
    name = f"payhooks_shop_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    url = make_conninfo(admin_url, dbname=name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ORDERS)
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)'.encode())


def tables(url: str) -> set[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {row[0] for row in rows}


def test_migrate_core_applies_payhooks_own_tables_alone_beside_the_merchants(
    env: dict[str, str], merchants: str
) -> None:
    done = invoke(env, "migrate", "--core", "--database-url", merchants, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("applied: core/")
    found = tables(merchants)
    assert {"orders", "payhooks_migrations", "processed_webhooks", "payhooks_refunds"} <= found
    assert not {"carts", "checkouts", "payments", "refunds", "outbox"} & found
    again = invoke(env, "migrate", "--core", "--database-url", merchants, timeout=120)
    assert (again.returncode, again.stdout) == (0, "database is up to date\n"), again.stderr


def test_migrate_core_reads_database_url_as_the_other_merchant_commands_do(
    env: dict[str, str], merchants: str
) -> None:
    done = invoke({**env, "DATABASE_URL": merchants}, "migrate", "--core", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "carts" not in tables(merchants) and "payhooks_refunds" in tables(merchants)


@pytest.mark.parametrize("command", [["migrate"], ["serve", "--port", "9"]], ids=" ".join)
def test_migrate_without_core_on_a_merchants_database_points_at_core_in_one_line(
    env: dict[str, str], merchants: str, command: list[str]
) -> None:
    """`serve` migrates the same tables first, and said the clash without the pointer."""
    done = invoke({**env, "DATABASE_URL": merchants}, *command, timeout=120)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert 'relation "orders" already exists' in done.stderr
    assert "payhooks migrate --core" in done.stderr
    assert tables(merchants) == {"orders"}  # one transaction: nothing of it kept


def test_migrate_help_says_what_each_form_applies(env: dict[str, str]) -> None:
    done = invoke(env, "migrate", "--help")
    assert done.returncode == 0
    said = " ".join(done.stdout.split())
    assert "reference service" in said and "--core" in said and "payhooks.migrate" in said


def test_a_replay_on_a_database_payhooks_never_migrated_says_to_migrate(
    env: dict[str, str], merchants: str
) -> None:
    """Without `--hooks` on a database holding none of payhooks' own tables (a new
    `DATABASE_URL`, a deploy before its migration), the missing table is payhooks': the answer
    is the database's error and the hint to migrate, never the advice to name an app's hooks."""
    done = invoke({**env, "DATABASE_URL": merchants}, "replay", "evt_nowhere", timeout=120)
    assert done.returncode == 1
    assert "processed_webhooks" in done.stderr and "migrate" in done.stderr
    assert "--hooks module:attribute" not in done.stderr

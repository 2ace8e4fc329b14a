"""Databases made by earlier versions upgrade in place, their records intact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from payhooks import db


@pytest.fixture
def empty_db(admin_url: str) -> Iterator[db.Connection]:
    name = f"payhooks_m_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        with psycopg.connect(make_conninfo(admin_url, dbname=name), autocommit=True) as conn:
            yield conn
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def migrate_up_to(conn: db.Connection, last: str) -> None:
    """What an earlier release left: its migrations applied and recorded, no later ones."""
    conn.execute(
        "CREATE TABLE schema_migrations (version text PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for version, sql in db.migrations():
        if version > last:
            break
        conn.execute(sql.encode())
        conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))


V4_DATA = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256, body)
VALUES ('razorpay', 'evt_1', 'payment.captured', 'processed', 'same', '\\x01'),
       ('razorpay', 'evt_2', 'payment.captured', 'processed', 'same', '\\x01'),
       ('razorpay', 'evt_3', 'payment.failed', 'processed', 'other', '\\x02');
INSERT INTO product_info (sku, name, price_paise) VALUES ('SKU', 'Tea', 100);
INSERT INTO carts (id, customer_email, amount_paise, status) VALUES ('c1', 'a@example.com', 100,
    'paid'), ('c2', 'b@example.com', 100, 'open');
INSERT INTO payments (provider, payment_id, cart_id, status, amount_paise) VALUES
    ('razorpay', 'pay_captured', 'c1', 'captured', 100),
    ('razorpay', 'pay_refunded_after_order', 'c1', 'refunded', 100),
    ('razorpay', 'pay_refunded_first', 'c2', 'refunded', 100);
INSERT INTO orders (id, cart_id, provider, payment_id, amount_paise, status, event_id)
VALUES ('o1', 'c1', 'razorpay', 'pay_refunded_after_order', 100, 'confirmed', 'evt_1');
"""


def test_version_4_database_upgrades_with_its_records_intact(empty_db):
    migrate_up_to(empty_db, "0004_outbox_indexes")
    empty_db.execute(V4_DATA.encode())
    assert "0005_hardening" in db.migrate(empty_db)
    copies = dict(empty_db.execute("SELECT event_id, first_copy FROM processed_webhooks"))
    assert copies == {"evt_1": True, "evt_2": False, "evt_3": True}
    captured = dict(
        empty_db.execute("SELECT payment_id, captured_at IS NOT NULL FROM payments").fetchall()
    )
    assert captured == {
        "pay_captured": True,
        "pay_refunded_after_order": True,
        "pay_refunded_first": False,
    }


def test_upgraded_database_answers_a_new_copy_of_an_old_body_duplicate(empty_db):
    migrate_up_to(empty_db, "0004_outbox_indexes")
    empty_db.execute(V4_DATA.encode())
    db.migrate(empty_db)
    inserted = empty_db.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
        " payload_sha256, body) VALUES ('razorpay', 'evt_9', 'x', 'processed', 'same', '\\x01')"
        " ON CONFLICT DO NOTHING RETURNING 1"
    ).fetchone()
    assert inserted is None


def test_migrating_twice_applies_nothing_the_second_time(empty_db):
    assert db.migrate(empty_db)
    assert db.migrate(empty_db) == []

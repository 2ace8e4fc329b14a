"""Databases made by earlier versions upgrade in place, their records intact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from payhooks.events import Provider
from payhooks.plumbing import db
from payhooks.plumbing.schema import CORE
from payhooks.service import database, outbox
from payhooks.service.shop import orders
from payhooks.sim.deliveries import Disputed, bank_reference
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.conftest import DATA
from tests.factories import GATEWAY, deliver, purchase


def since(core: str, shop: str) -> list[str]:
    """What an upgrade applies, in order: every core migration from version ``core`` on, then
    every shop migration from ``shop`` on (the files shipped)."""
    return [
        *(f"core/{v}" for v, _ in CORE.files() if v >= core),
        *(f"shop/{v}" for v, _ in database.SHOP.files() if v >= shop),
    ]


# Every core migration, in order, written out (not read from the files): one missing, renamed or
# out of its place fails the tests that apply them to an empty database.
CORE_MIGRATIONS = [
    "core/0001_processed_webhooks",
    "core/0002_references_and_copies",
    "core/0003_bank_references",
    "core/0004_merchant_ref_lookup",
    "core/0005_expectations",
    "core/0006_deliveries",
    "core/0007_console",
    "core/0008_due_checkouts",
    "core/0009_delivery_repeats",
    "core/0010_confirmations",
    "core/0011_another_attempt",
    "core/0012_refunds",
    "core/0013_refund_checks",
    "core/0014_console_roles",
    "core/0015_alerts",
    "core/0016_one_open_mismatch",
    "core/0017_payment_identities",
    "core/0018_composed_keys",
    "core/0019_refund_cancels",
    "core/0020_reconcile_failures",
    "core/0021_outbox",
    "core/0022_relay",
    "core/0023_disputes",
    "core/0024_settlements",
    "core/0025_relay_refused",
    "core/0026_settlement_unreadable",
    "core/0027_disputed_at_birth",
    "core/0028_mismatches_kept",
    "core/0029_expected_kept",
    "core/0030_payments_by_order",
    "core/0031_settlement_reads",
    "core/0032_settlement_read_from",
    "core/0033_resolutions",
    "core/0034_credentials_unkept",
    "core/0035_settlement_line_types",
    "core/0036_references_kept",
    "core/0037_references_follow_expectations",
    "core/0038_settled_by_hand",
    "core/0039_expected_amounts_follow_expectations",
    "core/0040_refunds_know_the_losses_they_were_asked_after",
    "core/0041_refunds_name_their_order",
    "core/0042_attempt_reports",
    "core/0043_refunds_by_order",
]

CORE_TABLES = {
    "payhooks_alerts",
    "payhooks_relay_channels",
    "payhooks_refund_payments",
    "payhooks_outbox",
    "processed_webhooks",
    "payhooks_migrations",
    "payhooks_expectations",
    "payhooks_payments",
    "payhooks_amount_mismatches",
    "payhooks_reconcile",
    "payhooks_reconcile_totals",
    "payhooks_deliveries",
    "payhooks_operators",
    "payhooks_console_sessions",
    "payhooks_console_login_failures",
    "payhooks_console_keys",
    "payhooks_console_actions",
    "payhooks_confirmations",
    "payhooks_refunds",
    "payhooks_disputes",
    "payhooks_settlements",
    "payhooks_settlement_lines",
    "payhooks_unsettled",
    "payhooks_settlement_unreadable",
    "payhooks_settlement_reads",
    "payhooks_resolutions",
    "payhooks_attempt_reports",
}
"""What ``payhooks.migrate`` makes: every table of the core's but the first is named payhooks_."""


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


V4_SCHEMA = DATA / "schema_v4.sql"
V4_VERSIONS = ("0001_init", "0002_maintenance", "0003_stock_slots", "0004_outbox_indexes")


def migrate_to_v4(conn: db.Connection) -> None:
    """What payhooks 0.1.0 left: one series of migrations, recorded in schema_migrations."""
    conn.execute(V4_SCHEMA.read_bytes())
    conn.execute(
        "CREATE TABLE schema_migrations (version text PRIMARY KEY,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    )
    for version in V4_VERSIONS:
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
    migrate_to_v4(empty_db)
    empty_db.execute(V4_DATA.encode())
    assert database.migrate(empty_db) == since("0002", "0005")
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
    migrate_to_v4(empty_db)
    empty_db.execute(V4_DATA.encode())
    database.migrate(empty_db)
    inserted = empty_db.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
        " payload_sha256, body) VALUES ('razorpay', 'evt_9', 'x', 'processed', 'same', '\\x01')"
        " ON CONFLICT DO NOTHING RETURNING 1"
    ).fetchone()
    assert inserted is None


def test_migrating_twice_applies_nothing_the_second_time(empty_db):
    assert database.migrate(empty_db)
    assert database.migrate(empty_db) == []


SCHEMA = """
SELECT table_name, column_name, data_type, is_nullable, column_default
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT tablename, indexname, indexdef, '', '' FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), '', ''
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
ORDER BY 1, 2, 3
"""


def schema_of(conn: db.Connection) -> list[tuple[object, ...]]:
    skip = {"schema_migrations", "payhooks_migrations"}
    return [row for row in conn.execute(SCHEMA) if row[0] not in skip]


def test_an_upgraded_database_has_the_schema_of_a_new_one(empty_db, conn):
    migrate_to_v4(empty_db)
    database.migrate(empty_db)
    assert schema_of(empty_db) == schema_of(conn)


def test_a_library_user_creates_only_the_cores_table(empty_db):
    import payhooks

    assert payhooks.migrate(empty_db) == CORE_MIGRATIONS
    tables = {
        row[0]
        for row in empty_db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    }
    assert tables == CORE_TABLES


def library_then_service(conn: db.Connection) -> None:
    import payhooks

    payhooks.migrate(conn)
    database.migrate(conn)


def v4_then_service(conn: db.Connection) -> None:
    migrate_to_v4(conn)
    database.migrate(conn)


@pytest.mark.parametrize(
    "made",
    [database.migrate, library_then_service, v4_then_service],
    ids=["service", "library-then-service", "v4-upgraded"],
)
def test_every_delivery_log_says_how_many_requests_each_line_stands_for(empty_db, made):
    """The shop's 0012 hands its own log to the core: the column must be there whichever
    migration ran first."""
    made(empty_db)
    line = (
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " body_bytes, duration_ms, repeats) VALUES (now(), 'payu', 401, 'signature_mismatch',"
        " false, 0, 1, %s)"
    )
    empty_db.execute(line, (1_234,))
    with pytest.raises(psycopg.errors.CheckViolation):
        empty_db.execute(line, (0,))
    [(default,)] = empty_db.execute(
        "SELECT column_default FROM information_schema.columns"
        " WHERE table_name = 'payhooks_deliveries' AND column_name = 'repeats'"
    ).fetchall()
    assert default == "1"


def test_the_service_adds_its_tables_to_a_library_users_database(empty_db):
    import payhooks

    payhooks.migrate(empty_db)
    assert database.migrate(empty_db)[0] == "shop/0001_init"


def test_stored_deliveries_read_on_a_connection_that_loads_jsonb_as_text(conn):
    """Django's connection does not register psycopg's jsonb loader: headers arrive as text."""
    from psycopg.types.string import TextLoader

    from payhooks.intake import idempotency
    from tests.factories import GATEWAY, deliver

    orphan = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_text1", order_id="order_text", amount_paise=100
    )
    deliver(conn, orphan)
    conn.adapters.register_loader("jsonb", TextLoader)
    [parked] = idempotency.parked(conn)
    assert parked.headers["x-razorpay-signature"] == orphan.headers["x-razorpay-signature"]


@pytest.mark.parametrize(
    "legacy",
    [
        "CREATE TABLE schema_migrations (version text PRIMARY KEY)",  # a tool of the same name
        "CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean)",  # golang
    ],
)
def test_another_tools_schema_migrations_is_never_taken_for_ours(empty_db, legacy):
    import payhooks

    empty_db.execute(legacy.encode())
    if "bigint" in legacy:
        empty_db.execute("INSERT INTO schema_migrations VALUES (20240101000000, false)")
    else:
        empty_db.execute("INSERT INTO schema_migrations VALUES ('0001_init'), ('0005_hardening')")
    assert payhooks.migrate(empty_db) == CORE_MIGRATIONS


def test_a_schema_migrations_on_the_search_path_elsewhere_is_not_adopted(empty_db):
    import payhooks

    empty_db.execute("CREATE SCHEMA legacy")
    empty_db.execute("CREATE TABLE legacy.schema_migrations (version text)")
    empty_db.execute("INSERT INTO legacy.schema_migrations VALUES ('0005_hardening')")
    empty_db.execute("SET search_path = public, legacy")
    assert len(payhooks.migrate(empty_db)) == len(payhooks.plumbing.schema.CORE.files())
    columns = {
        r[0]
        for r in empty_db.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = 'processed_webhooks'"
        )
    }
    assert {"merchant_ref", "first_copy"} <= columns


def test_a_payment_record_written_without_its_lost_dispute_counts_it_after_the_upgrade(conn):
    """Core migration 0027 on a record a one-statement capture wrote without the dispute lost
    before it: the record counts what the dispute took back once the migration runs."""
    buy = purchase(conn)
    deliver(conn, buy.captured())
    told = Disputed(what="lost", dispute_id="disp_MIG", payment_id=buy.payment_id,
                    reference=buy.reference, amount_paise=buy.amount_paise,
                    respond_by=1_767_312_000, reported_at=1_767_225_600)  # fmt: skip
    deliver(conn, razorpay_sim.dispute_delivery(GATEWAY, told))
    conn.execute("UPDATE payhooks_payments SET disputed_paise = 0")
    (sql,) = [text for version, text in CORE.files() if version == "0027_disputed_at_birth"]
    conn.execute(sql.encode())
    disputed = "SELECT disputed_paise FROM payhooks_payments WHERE payment_id = %s"
    assert conn.execute(disputed, (buy.payment_id,)).fetchall() == [(buy.amount_paise,)]


def test_a_webhook_credential_kept_with_a_stored_delivery_goes_at_the_upgrade(conn):
    """Core migration 0034 on a PhonePe callback stored with its Authorization header (the
    digest of the webhook's username:password): the credential goes, the other headers stay."""
    buy = purchase(conn)
    deliver(conn, buy.captured())
    kept = {"authorization": "0" * 64, "x-razorpay-event-id": "evt_MIG"}
    conn.execute("UPDATE processed_webhooks SET headers = %s", (Jsonb(kept),))
    (sql,) = [text for version, text in CORE.files() if version == "0034_credentials_unkept"]
    conn.execute(sql.encode())
    found = conn.execute("SELECT DISTINCT headers FROM processed_webhooks").fetchall()
    assert found == [({"x-razorpay-event-id": "evt_MIG"},)]


def test_payment_records_are_backfilled_from_their_stored_deliveries(conn):
    """Core migration 0017 on records written before it: each payment's order, what its
    webhook says was paid, and PayU's mihpayid, read from its delivery while it is stored."""
    bought = {p: purchase(conn, p) for p in (Provider.RAZORPAY, Provider.CASHFREE, Provider.PAYU)}
    for buy in bought.values():
        deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET gateway_order_id = NULL, paid_paise = NULL,"
                 " currency = NULL, attempt_id = NULL")  # fmt: skip
    (sql,) = [text for version, text in CORE.files() if version == "0017_payment_identities"]
    conn.execute(sql.encode())
    records = "SELECT provider, gateway_order_id, paid_paise, currency, attempt_id"
    found = {Provider(row[0]): row[1:] for row in conn.execute(records + " FROM payhooks_payments")}
    for provider, buy in bought.items():
        attempt = buy.payment_id if provider is Provider.PAYU else None
        assert found[provider] == (buy.reference, buy.amount_paise, "INR", attempt)


def test_payment_records_keep_their_references_from_what_is_still_stored(conn):
    """Core migration 0036 on records written before it: the merchant's reference from the
    order's expectation, the order and the bank reference from the payment's delivery, while
    these are still stored; a record whose delivery and expectation are gone keeps none."""
    kept, purged = purchase(conn), purchase(conn)
    orders = [deliver(conn, buy.captured()).order_id for buy in (kept, purged)]
    conn.execute("UPDATE payhooks_payments SET reference = NULL, order_ref = NULL, bank_ref = NULL")
    conn.execute("DELETE FROM processed_webhooks WHERE payment_id = %s", (purged.payment_id,))
    conn.execute("DELETE FROM payhooks_expectations WHERE gateway_order_id = %s",
                 (purged.reference,))  # fmt: skip
    (sql,) = [text for version, text in CORE.files() if version == "0036_references_kept"]
    conn.execute(sql.encode())
    records = "SELECT payment_id, reference, order_ref, bank_ref FROM payhooks_payments"
    found = {row[0]: row[1:] for row in conn.execute(records)}
    assert found == {
        kept.payment_id: (kept.cart_id, orders[0], bank_reference(kept.payment_id)),
        purged.payment_id: (None, None, None),
    }


def test_payment_records_take_the_reference_their_orders_expectation_names_now(conn):
    """Core migration 0037 on records written before an expectation recorded or corrected
    after them (empty, or the reference replaced): each takes the one its order's expectation
    names; a record whose expectation is gone keeps its own."""
    late, corrected, gone = purchase(conn), purchase(conn), purchase(conn)
    for buy in (late, corrected, gone):
        deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET reference = NULL WHERE payment_id = %s",
                 (late.payment_id,))  # fmt: skip
    conn.execute("UPDATE payhooks_payments SET reference = 'replaced' WHERE payment_id = ANY(%s)",
                 ([corrected.payment_id, gone.payment_id],))  # fmt: skip
    conn.execute("DELETE FROM payhooks_expectations WHERE gateway_order_id = %s",
                 (gone.reference,))  # fmt: skip
    (sql,) = [t for v, t in CORE.files() if v == "0037_references_follow_expectations"]
    conn.execute(sql.encode())
    records = "SELECT payment_id, reference FROM payhooks_payments"
    assert dict(conn.execute(records).fetchall()) == {
        late.payment_id: late.cart_id,
        corrected.payment_id: corrected.cart_id,
        gone.payment_id: "replaced",
    }


def test_payment_records_take_the_amount_their_orders_expectation_names_now(conn):
    """Core migration 0039 on records written before an expectation recorded or corrected
    after them (no amount, or the amount replaced): each takes the one its order's expectation
    names; a record whose expectation is gone keeps its own."""
    late, corrected, gone = purchase(conn), purchase(conn), purchase(conn)
    for buy in (late, corrected, gone):
        deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET expected_paise = NULL, expected_currency = NULL"
                 " WHERE payment_id = %s", (late.payment_id,))  # fmt: skip
    conn.execute("UPDATE payhooks_payments SET expected_paise = 1 WHERE payment_id = ANY(%s)",
                 ([corrected.payment_id, gone.payment_id],))  # fmt: skip
    conn.execute("DELETE FROM payhooks_expectations WHERE gateway_order_id = %s",
                 (gone.reference,))  # fmt: skip
    (sql,) = [t for v, t in CORE.files() if v == "0039_expected_amounts_follow_expectations"]
    conn.execute(sql.encode())
    records = "SELECT payment_id, expected_paise, expected_currency FROM payhooks_payments"
    assert {row[0]: row[1:] for row in conn.execute(records)} == {
        late.payment_id: (late.amount_paise, "INR"),
        corrected.payment_id: (corrected.amount_paise, "INR"),
        gone.payment_id: (1, "INR"),
    }


def test_a_payment_parked_again_after_it_was_settled_by_hand_is_settled_as_its_copy(conn):
    """Core migration 0038 on mismatches written before it: one a person settled is marked
    settled by hand (one payhooks settled itself is not), and the second mismatch its payment
    got under another key since is settled as its copy, told to no one, its delivery
    ignored."""
    from payhooks.intake.expectations import resolve

    refunded, applied = purchase(conn), purchase(conn)
    first = deliver(conn, refunded.captured(amount_paise=100)).event.event_id
    resolve(conn, "razorpay", first, "refunded in the dashboard")
    conn.execute("UPDATE payhooks_amount_mismatches SET settled_by_hand = false")  # as before
    again = deliver(conn, refunded.captured(amount_paise=100, event="order.paid")).event.event_id
    other = deliver(conn, applied.captured(amount_paise=100)).event.event_id
    conn.execute(
        "UPDATE payhooks_amount_mismatches SET resolved_at = now(),"
        " resolution = 'applied: the payment reached a handler under x' WHERE event_id = %s",
        (other,),
    )
    (sql,) = [text for version, text in CORE.files() if version == "0038_settled_by_hand"]
    conn.execute(sql.encode())
    rows = conn.execute(
        "SELECT m.event_id, m.settled_by_hand, m.resolution, m.alerted_at IS NOT NULL, w.outcome"
        " FROM payhooks_amount_mismatches m JOIN processed_webhooks w USING (provider, event_id)"
    )
    assert {row[0]: row[1:] for row in rows} == {
        first: (True, "refunded in the dashboard", False, "ignored"),
        again: (False, f"a copy: the payment was settled by hand under {first}", True, "ignored"),
        other: (False, "applied: the payment reached a handler under x", False, "parked"),
    }


def migrate_before(conn: db.Connection, core: str, shop: str) -> None:
    """Each track's versions before ``core`` and ``shop``, recorded as ``migrate`` would."""
    conn.execute(
        "CREATE TABLE payhooks_migrations (track text NOT NULL, version text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (track, version))"
    )
    for track, first_left in ((CORE, core), (database.SHOP, shop)):
        for version, script in track.files():
            if version < first_left:
                conn.execute(script.encode())
                conn.execute(
                    "INSERT INTO payhooks_migrations (track, version) VALUES (%s, %s)",
                    (track.name, version),
                )


TWO_QUEUES = """
INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, payload, sent_at, failed_at)
VALUES ('email', 'order_confirmation:o1', 'a@example.com', 'Sent', 'b', '{"order_id": "o1"}',
        now(), NULL),
       ('email', 'order_confirmation:o2', 'b@example.com', 'Waiting', 'b', '{}', NULL, NULL),
       ('alert', 'mismatch:p3', NULL, 'Dead', 'b', '{}', NULL, now());
INSERT INTO payhooks_alerts (key, condition, subject, title, body, raised_at, notified_at)
VALUES ('failing:payu', 'failing', 'payu', 'payu: 5xx', 'b', now(), now());
INSERT INTO payhooks_alert_notices (alert_key, kind, channel, title, body, created_at,
                                    next_attempt_at, attempts, last_error)
VALUES ('failing:payu', 'raised', 'webhook', '[payhooks] ALERT: payu: 5xx', 'b', now(), now(),
        2, 'answered 503'),
       ('failing:payu', 'raised', 'email', '[payhooks] ALERT: payu: 5xx', 'b', now(), now(),
        0, NULL);
"""
QUEUED = """
SELECT id, dedupe_key, kind, channel, alert_key, subject, attempts, last_error,
       sent_at IS NOT NULL, failed_at IS NOT NULL
FROM payhooks_outbox ORDER BY id
"""


def test_an_upgrade_moves_both_queues_into_one_and_loses_nothing(empty_db):
    """Core 0021 and shop 0019: every row of the shop's outbox keeps its id (the console's log
    and `payhooks outbox --retry ID` name it), every alert notice its Message-ID, and what was
    waiting is still waiting."""
    migrate_before(empty_db, core="0021_outbox", shop="0019_one_outbox")
    empty_db.execute(TWO_QUEUES.encode())
    notices = [r[0] for r in empty_db.execute("SELECT id FROM payhooks_alert_notices ORDER BY id")]
    assert database.migrate(empty_db) == since("0021", "0019")
    assert empty_db.execute(QUEUED).fetchall() == [
        (1, "order_confirmation:o1", "email", "email", None, "Sent", 0, None, True, False),
        (2, "order_confirmation:o2", "email", "email", None, "Waiting", 0, None, False, False),
        (3, "mismatch:p3", "alert", "email", None, "Dead", 0, None, False, True),
        (4, f"alert-notice:{notices[0]}", "raised", "webhook", "failing:payu",
         "[payhooks] ALERT: payu: 5xx", 2, "answered 503", False, False),
        (5, f"alert-notice:{notices[1]}", "raised", "email", "failing:payu",
         "[payhooks] ALERT: payu: 5xx", 0, None, False, False),
    ]  # fmt: skip
    assert outbox.counts(empty_db) == {"pending": 1, "sent": 1, "failed": 1}
    assert outbox.enqueue(empty_db, orders.confirmation("o3", "c@example.com", 100, "confirmed"))
    [(made,)] = empty_db.execute(
        "SELECT id FROM outbox WHERE dedupe_key = 'order_confirmation:o3'"
    ).fetchall()
    assert made == 6


def test_an_upgrade_takes_no_day_before_the_last_one_read_whole_as_read(empty_db):
    """Core 0032: a gateway's row kept by 0031 knew its last day read whole only, not where
    reading began; its first day read is that day, so no capture of a day before it is
    flagged on the word of days perhaps never read."""
    from datetime import date

    migrate_before(empty_db, core="0032", shop="9999")
    empty_db.execute(
        "INSERT INTO payhooks_settlement_reads (provider, read_through) VALUES ('razorpay', %s)",
        (date(2026, 1, 5),),
    )
    assert database.migrate(empty_db) == [
        "core/0032_settlement_read_from",
        "core/0033_resolutions",
        "core/0034_credentials_unkept",
        "core/0035_settlement_line_types",
        "core/0036_references_kept",
        "core/0037_references_follow_expectations",
        "core/0038_settled_by_hand",
        "core/0039_expected_amounts_follow_expectations",
        "core/0040_refunds_know_the_losses_they_were_asked_after",
        "core/0041_refunds_name_their_order",
        "core/0042_attempt_reports",
        "core/0043_refunds_by_order",
    ]
    rows = empty_db.execute(
        "SELECT provider, read_from, read_through FROM payhooks_settlement_reads"
    )
    assert rows.fetchall() == [("razorpay", date(2026, 1, 5), date(2026, 1, 5))]


def test_an_upgrade_names_the_order_of_the_refunds_asked_naming_none(empty_db):
    """Core 0041: an intent asked by its payment alone before took no order (only Cashfree's
    and PayU's did), and its processed refund reached the app's handler with none; the upgrade
    takes it from the payment's record, and leaves alone an intent naming one, or one whose
    payment payhooks keeps no record of."""
    migrate_before(empty_db, core="0041", shop="9999")
    empty_db.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,"
        " reconciled) VALUES ('razorpay', 'pay_1', 'payment_captured', 'order_1', 'e1', false)"
    )
    for key, payment, order in (("k1", "pay_1", None), ("k2", "pay_1", "order_mine"),
                                ("k3", "pay_unknown", None)):  # fmt: skip
        empty_db.execute(
            "INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id,"
            " gateway_order_id, amount_paise, currency, captured_paise, reason, requested_by)"
            " VALUES ('razorpay', %s, %s, %s, 100, 'INR', 100, 'r', 'asha')",
            (key, payment, order),
        )
    assert database.migrate(empty_db)[0] == "core/0041_refunds_name_their_order"
    named = empty_db.execute(
        "SELECT idempotency_key, gateway_order_id FROM payhooks_refunds ORDER BY 1"
    ).fetchall()
    assert named == [("k1", "order_1"), ("k2", "order_mine"), ("k3", None)]

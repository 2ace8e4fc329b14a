"""The core's purge on a merchant's database (only ``payhooks.migrate``'s tables): through
``payhooks.retention.purge`` and ``payhooks purge --database-url`` in a subprocess. Old
records go; recent and parked ones stay, with the expectation and payment claim a parked
delivery's replay will meet; one purge at a time."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

import payhooks
from payhooks import Applied, EventKind, Hooks, Outcome, ingest, ingest_in_transaction
from payhooks.intake.expectations import expect_async, resolve
from payhooks.intake.ingest import Receipt
from payhooks.operations import retention
from payhooks.plumbing.errors import RetentionTooShort
from payhooks.sim.gateway import Delivery, bank_reference
from tests.acceptance.conftest import invoke
from tests.conftest import cloned_from_new
from tests.factories import ADAPTERS, GATEWAY
from tests.reconcile.conftest import API_KEYS

DELIVERY = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256, body,
                                merchant_ref, payment_id, processed_at)
VALUES ('razorpay', %s, 'payment.captured', %s, md5(%s), '\\x00', %s, %s,
        now() - make_interval(days => %s))
"""
PAYMENT = """
INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,
                               reconciled, applied_at)
VALUES ('razorpay', %s, 'payment_captured', %s, %s, false, now() - make_interval(days => %s))
"""
MISMATCH = """
INSERT INTO payhooks_amount_mismatches (provider, event_id, gateway_order_id, payment_id,
    expected_paise, expected_currency, paid_paise, paid_currency)
VALUES ('razorpay', %s, %s, %s, 49900, 'INR', 100, 'INR')
"""
RECONCILE = "INSERT INTO payhooks_reconcile (provider, gateway_order_id) VALUES ('razorpay', %s)"


@pytest.fixture(scope="module")
def core_databases(admin_url):
    """Databases holding the core's tables and nothing of the reference service, each emptied
    after its test and handed to the next (``Databases``)."""

    def migrated(url: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            payhooks.migrate(conn)

    with cloned_from_new(admin_url, "payhooks_core_tpl", migrated) as made:
        yield made


@pytest.fixture
def merchant_url(admin_url, core_databases):
    """A merchant's own database: the core's tables and nothing of the reference service."""
    name = core_databases.take()
    yield make_conninfo(admin_url, dbname=name)
    core_databases.give_back(name)


@pytest.fixture
def merchant(merchant_url):
    with psycopg.connect(merchant_url, autocommit=True) as conn:
        yield conn


def delivered(conn, key: str, days_old: int, *, outcome: str = "processed", order: str = "",
              payment: str | None = None) -> None:  # fmt: skip
    conn.execute(DELIVERY, (key, outcome, key, order or None, payment, days_old))


def expected(conn, order: str, days_old: int) -> None:
    payhooks.expect(conn, "razorpay", order, 49_900, "INR", "ref-" + order)
    conn.execute(RECONCILE, (order,))
    conn.execute(
        "UPDATE payhooks_expectations SET created_at = now() - make_interval(days => %s)"
        " WHERE gateway_order_id = %s",
        (days_old, order),
    )


def keys(conn, table: str, column: str) -> list[str]:
    rows = conn.execute(f"SELECT {column} FROM {table} ORDER BY 1".encode()).fetchall()
    return [row[0] for row in rows]


def test_old_delivery_records_go_and_recent_and_parked_ones_stay(merchant):
    for n in range(7):
        delivered(merchant, f"old-{n}", 100)
    delivered(merchant, "recent", 89)
    delivered(merchant, "parked", 200, outcome="parked")
    done = retention.purge(merchant, 90, batch_rows=3)
    assert done is not None and (done.expired, done.deleted) == (7, 7)
    assert keys(merchant, "processed_webhooks", "event_id") == ["parked", "recent"]


def test_the_claims_of_failed_attempts_go_with_their_deliveries(merchant):
    """Core 0042: a failed or pending attempt's claim (``payhooks_attempt_reports``) answers for
    its deliveries, and goes with them: the table must not grow with every failed attempt."""
    for key, days_old in (("pay_old", 100), ("pay_new", 10)):
        merchant.execute(
            "INSERT INTO payhooks_attempt_reports (provider, payment_id, kind, event_id,"
            " reconciled, reported_at) VALUES ('razorpay', %s, 'payment_failed', %s, false,"
            " now() - make_interval(days => %s))",
            (key, "evt_" + key, days_old),
        )
    delivered(merchant, "parked", 200, outcome="parked", payment="pay_parked")
    merchant.execute(
        "INSERT INTO payhooks_attempt_reports (provider, payment_id, kind, event_id,"
        " reconciled, reported_at) VALUES ('razorpay', 'pay_parked', 'payment_failed',"
        " 'reconcile:pay_parked:failed', true, now() - interval '200 days')"
    )
    retention.purge(merchant, 90)
    # kept while a parked delivery of the payment may be replayed: it would apply again
    assert keys(merchant, "payhooks_attempt_reports", "payment_id") == ["pay_new", "pay_parked"]


def test_a_refund_reconciliation_applied_is_kept_as_long_as_a_captures_record(merchant):
    """Juspay's order status lists every refund again, under the same ``reconcile:`` key."""
    kept, old = "reconcile:rf_kept:refund.SUCCESS", "reconcile:rf_old:refund.SUCCESS"
    for key, days_old in ((kept, 100), (old, retention.REFUNDABLE_DAYS + 1)):
        delivered(merchant, key, days_old)
        merchant.execute("UPDATE processed_webhooks SET event_type = 'reconcile.refund.SUCCESS'"
                         " WHERE event_id = %s", (key,))  # fmt: skip
    delivered(merchant, "reconcile:pay_old:captured", 100)  # a capture: its payment record says
    done = retention.purge(merchant, 90)
    assert done is not None and (done.expired, done.deleted) == (2, 2)
    assert keys(merchant, "processed_webhooks", "event_id") == [kept]


def test_old_expectations_go_with_their_reconciliation_rows(merchant):
    expected(merchant, "order_old", 100)
    expected(merchant, "order_recent", 10)
    retention.purge(merchant, 90)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == ["order_recent"]
    assert keys(merchant, "payhooks_reconcile", "gateway_order_id") == ["order_recent"]


def test_an_old_amount_mismatch_stays_parked_with_its_expectation(merchant):
    """Replayed after its expectation was gone, the underpaid capture would skip the check."""
    expected(merchant, "order_short", 100)
    delivered(merchant, "evt_short", 100, outcome="parked", order="order_short", payment="pay_s")
    merchant.execute(MISMATCH, ("evt_short", "order_short", "pay_s"))
    retention.purge(merchant, 90)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == ["order_short"]
    assert keys(merchant, "payhooks_amount_mismatches", "event_id") == ["evt_short"]


def underpaid_and_written_off(conn, days_old: int = 100) -> str:
    """A capture of 1.00 for an order expected at 499.00, parked for its amount, refunded by
    hand in the gateway's dashboard and resolved so, ``days_old`` days ago: it never reached a
    handler, so its amount mismatch is all the core has of that payment. Its delivery key."""
    payhooks.expect(conn, "razorpay", "order_short", 49_900, "INR", "ref-short")
    capture = GATEWAY.razorpay("payment.captured", payment_id="pay_short", order_id="order_short",
                               amount_paise=100, event_id="evt_short")  # fmt: skip
    assert deliver_to(conn, capture).outcome is Outcome.PARKED
    resolve(conn, "razorpay", "evt_short", "refunded in the dashboard")
    ago = "now() - make_interval(days => %s)"
    conn.execute(f"UPDATE processed_webhooks SET processed_at = {ago}".encode(), (days_old,))
    conn.execute(f"UPDATE payhooks_expectations SET created_at = {ago}".encode(), (days_old,))
    conn.execute(
        f"UPDATE payhooks_amount_mismatches SET found_at = {ago}, resolved_at = {ago}".encode(),
        (days_old, days_old),
    )
    return "evt_short"


def test_a_resolved_amount_mismatch_outlives_the_purge_of_its_delivery(merchant):
    """Money the core recorded nowhere else: the payment, its order, both amounts and how it
    was settled stay after its delivery record and its expectation are purged."""
    key = underpaid_and_written_off(merchant)
    retention.purge(merchant, 90)
    assert keys(merchant, "processed_webhooks", "event_id") == []
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == []
    kept = merchant.execute(
        "SELECT provider, event_id, gateway_order_id, payment_id, expected_paise,"
        " expected_currency, paid_paise, paid_currency, resolution"
        " FROM payhooks_amount_mismatches"
    ).fetchall()
    assert kept == [("razorpay", key, "order_short", "pay_short", 49_900, "INR", 100, "INR",
                     "refunded in the dashboard")]  # fmt: skip


def test_the_payments_list_shows_a_settled_mismatch_after_its_delivery_is_purged(merchant):
    from datetime import UTC, datetime

    from payhooks.console import lists

    underpaid_and_written_off(merchant)
    retention.purge(merchant, 90)
    window = lists.Window(start=None, end=datetime.now(UTC), end_given=False)
    (payment,) = lists.core_payments(merchant, lists.PaymentFilter(window=window))
    assert (payment.provider, payment.payment_id, payment.gateway_order_id) == (
        "razorpay", "pay_short", "order_short")  # fmt: skip
    assert (payment.status, payment.expected_paise, payment.paid_paise) == ("settled", 49_900, 100)
    assert payment.resolution == "refunded in the dashboard"


def test_the_timeline_finds_and_tells_a_settled_mismatch_after_its_delivery_is_purged(merchant):
    from payhooks.operations import timeline

    key = underpaid_and_written_off(merchant)
    retention.purge(merchant, 90)
    for typed in ("order_short", "pay_short"):
        assert [(f.provider, f.gateway_order_id) for f in timeline.find(merchant, typed)] == [
            ("razorpay", "order_short")
        ]
    told = timeline.story(merchant, "razorpay", "order_short")
    assert told is not None and told.records == []
    (kept,) = told.mismatched
    assert (kept.event_id, kept.payment_id) == (key, "pay_short")
    assert (kept.expected_paise, kept.paid_paise, kept.resolution) == (
        49_900, 100, "refunded in the dashboard")  # fmt: skip


def captured_and_ordered(conn, name: str) -> None:
    """A capture ``pay_<name>`` of ``order_<name>`` that the merchant's handler answered with
    its order ``ORD-<name>``."""
    capture = GATEWAY.razorpay("payment.captured", payment_id=f"pay_{name}",
                               order_id=f"order_{name}", amount_paise=49_900,
                               event_id=f"evt_{name}")  # fmt: skip
    ordering = Hooks()
    ordering.on(EventKind.PAYMENT_CAPTURED)(
        lambda conn, event: Applied(outcome=Outcome.PROCESSED, order_id=f"ORD-{name}")
    )
    receipt = ingest(conn, ADAPTERS[capture.provider], capture.body, capture.headers, ordering)
    assert receipt.outcome is Outcome.PROCESSED


def purged_100_days_on(conn) -> None:
    """Every delivery, expectation and payment's record made 100 days old, then purged."""
    for table, column in (("processed_webhooks", "processed_at"),
                          ("payhooks_expectations", "created_at"),
                          ("payhooks_payments", "applied_at")):  # fmt: skip
        conn.execute(f"UPDATE {table} SET {column} = now() - interval '100 days'".encode())
    retention.purge(conn, 90)


def ordered_and_purged(conn) -> None:
    """A capture of ``order_kept`` (the merchant's reference ``ref-order_kept``) that the
    merchant's handler answered with its order ``ORD-kept``, then 100 days on, purged: its
    delivery and its expectation gone, its capture's record kept a refund's year."""
    payhooks.expect(conn, "razorpay", "order_kept", 49_900, "INR", "ref-order_kept")
    captured_and_ordered(conn, "kept")
    purged_100_days_on(conn)
    assert keys(conn, "processed_webhooks", "event_id") == []
    assert keys(conn, "payhooks_expectations", "gateway_order_id") == []
    assert keys(conn, "payhooks_payments", "payment_id") == ["pay_kept"]


@pytest.mark.parametrize(
    ("typed", "matched"),
    [
        ("ref-order_kept", "merchant reference"),
        ("ORD-kept", "merchant reference"),
        (bank_reference("pay_kept"), "bank reference (UTR/RRN)"),
    ],
)
def test_the_timeline_finds_a_kept_payment_by_its_references_after_the_purge(
    merchant, typed, matched
):
    """What an operator mostly holds (the merchant's reference given to ``expect``, the order
    the handler answered, the customer's UTR) finds the payment as long as its record is kept,
    as its gateway order and payment id do."""
    from payhooks.operations import timeline

    ordered_and_purged(merchant)
    found = timeline.find(merchant, typed)
    assert [(f.provider, f.gateway_order_id, str(f.matched)) for f in found] == [
        ("razorpay", "order_kept", matched)
    ]


def test_the_order_told_after_the_purge_names_its_payments_references(merchant):
    """The order's story (the console's order page, Django's admin timeline, the JSON routes)
    tells, from the payment's record, what an operator was asked about: the reference, the
    order, the UTR."""
    from payhooks.operations import timeline

    ordered_and_purged(merchant)
    told = timeline.story(merchant, "razorpay", "order_kept")
    assert told is not None and told.expected is None
    [payment] = told.payments
    assert (payment.reference, payment.order_ref, payment.bank_ref) == (
        "ref-order_kept", "ORD-kept", bank_reference("pay_kept"))  # fmt: skip
    assert told.expected_kept is payment
    [answered] = timeline.answer(merchant, "ORD-kept")["orders"]
    assert answered["payments"][0]["bank_ref"] == bank_reference("pay_kept")


async def expected_async(url: str, order: str, reference: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as aconn:
        await expect_async(aconn, "razorpay", order, 49_900, "INR", reference)


@pytest.mark.parametrize("path", ["sync", "async"])
@pytest.mark.parametrize("before", [None, "ref-first"], ids=["recorded after", "corrected after"])
def test_an_expectation_recorded_or_corrected_after_the_payment_is_what_its_record_keeps(
    merchant, merchant_url, path, before
):
    """The reference the record keeps (what the search finds the payment by once the purge has
    taken its delivery and expectation) was copied when the record was written: an
    expectation recorded after the payment left it empty, one corrected after it left the
    first reference."""
    from payhooks.operations import timeline

    if before is not None:
        payhooks.expect(merchant, "razorpay", "order_late", 49_900, "INR", before)
    captured_and_ordered(merchant, "late")
    if path == "sync":
        payhooks.expect(merchant, "razorpay", "order_late", 49_900, "INR", "ref-late")
    else:
        asyncio.run(expected_async(merchant_url, "order_late", "ref-late"))
    kept = "SELECT reference FROM payhooks_payments WHERE payment_id = 'pay_late'"
    assert merchant.execute(kept).fetchone() == ("ref-late",)
    purged_100_days_on(merchant)
    found = [(f.gateway_order_id, str(f.matched)) for f in timeline.find(merchant, "ref-late")]
    assert found == [("order_late", "merchant reference")]
    assert before is None or timeline.find(merchant, before) == []


@pytest.mark.parametrize("before", [None, 49_900], ids=["recorded after", "corrected after"])
def test_the_amount_expected_of_a_payment_reads_the_same_before_and_after_the_purge(
    merchant, before
):
    """The payments list and the order's page show the amount the order's expectation names
    last, while it is kept and from the payment's record once the purge has taken it: an
    expectation recorded or corrected after the payment is written on its record too."""
    from datetime import UTC, datetime

    from payhooks.console import lists
    from payhooks.operations import timeline

    def shown() -> tuple[int | None, int | None]:
        window = lists.Window(start=lists.EARLIEST, end=datetime.now(UTC), end_given=False)
        (payment,) = lists.core_payments(merchant, lists.PaymentFilter(window=window))
        story = timeline.story(merchant, "razorpay", "order_late")
        assert story is not None
        if story.expected is not None:
            return payment.expected_paise, story.expected.amount_paise
        assert story.expected_kept is not None
        return payment.expected_paise, story.expected_kept.expected_paise

    if before is not None:
        payhooks.expect(merchant, "razorpay", "order_late", before, "INR", "ref")
    captured_and_ordered(merchant, "late")  # 49,900 paise
    payhooks.expect(merchant, "razorpay", "order_late", 45_000 if before else 49_900, "INR", "ref")
    expected_now = shown()
    assert expected_now == ((45_000, 45_000) if before else (49_900, 49_900))
    purged_100_days_on(merchant)
    assert shown() == expected_now


def test_old_payment_claims_go_unless_a_parked_delivery_of_the_payment_waits(merchant):
    merchant.execute(PAYMENT, ("pay_old", "order_a", "evt_a", 400))
    merchant.execute(PAYMENT, ("pay_recent", "order_b", "evt_b", 5))
    merchant.execute(PAYMENT, ("pay_twin", "order_c", "evt_c", 400))
    delivered(merchant, "evt_c_copy", 400, outcome="parked", order="order_c", payment="pay_twin")
    retention.purge(merchant, 90, batch_rows=1)
    assert keys(merchant, "payhooks_payments", "payment_id") == ["pay_recent", "pay_twin"]


def test_a_payment_record_keeps_its_expected_amount_after_its_expectation_is_purged(merchant):
    """The payments list shows what the order was expected to be paid for as long as the
    payment's record is kept (a capture's year), past the window that takes the expectation."""
    from datetime import UTC, datetime

    from payhooks.console import lists

    expected(merchant, "order_kept", 200)
    merchant.execute(PAYMENT, ("pay_kept", "order_kept", "evt_kept", 200))
    retention.purge(merchant, 90)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == []
    window = lists.Window(start=lists.EARLIEST, end=datetime.now(UTC), end_given=False)
    (payment,) = lists.core_payments(merchant, lists.PaymentFilter(window=window))
    assert (payment.payment_id, payment.expected_paise, payment.expected_currency) == (
        "pay_kept", 49_900, "INR")  # fmt: skip


REFUND = """
INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id, amount_paise, currency,
    captured_paise, reason, requested_by, state)
VALUES ('razorpay', %s, %s, 100, 'INR', 49900, 'returned', 'asha', %s)
"""


def test_a_captures_record_stays_while_a_refund_of_it_is_possible(merchant):
    """Past the window, within a refund's year; and past that, while a refund is unsettled."""
    merchant.execute(PAYMENT, ("pay_refundable", "order_a", "evt_a", 100))
    merchant.execute(PAYMENT, ("pay_refunding", "order_b", "evt_b", 400))
    merchant.execute(PAYMENT, ("pay_refunded", "order_c", "evt_c", 400))
    merchant.execute(REFUND, ("ph_1", "pay_refunding", "sent"))
    merchant.execute(REFUND, ("ph_2", "pay_refunded", "processed"))
    retention.purge(merchant, 90, batch_rows=1)
    kept = keys(merchant, "payhooks_payments", "payment_id")
    assert kept == ["pay_refundable", "pay_refunding"]


def test_an_order_told_past_a_refunds_year_names_its_refunds_and_says_its_records_are_purged(
    merchant,
):
    """Past a refund's year the payment's record goes with the deliveries and the expectation:
    the order's page said "No expectation: the app did not call payhooks.expect" and "None
    yet: no payment of this order has reached the app's handlers", both false, and its refunds
    (kept) were not told, their payment no longer named by anything else."""
    from payhooks.operations import timeline

    merchant.execute(PAYMENT, ("pay_refunded", "order_c", "evt_c", 400))
    delivered(merchant, "evt_c", 400, order="order_c", payment="pay_refunded")
    merchant.execute(REFUND, ("ph_2", "pay_refunded", "processed"))
    merchant.execute("UPDATE payhooks_refunds SET gateway_order_id = 'order_c'")
    retention.purge(merchant, 90, batch_rows=1)
    assert keys(merchant, "payhooks_payments", "payment_id") == []
    told = timeline.story(merchant, "razorpay", "order_c")
    assert told is not None and told.purged
    assert told.payment_ids == ["pay_refunded"]
    assert not timeline.story(merchant, "razorpay", "pay_refunded")  # no order of that name


def test_a_refund_asked_under_another_order_never_brings_its_payment_into_that_order(merchant):
    """A refund's order is what its asker named: one naming order Y for a payment whose
    record says order X pulled X's payment, deliveries and refunds into Y's story."""
    from payhooks.operations import timeline

    merchant.execute(PAYMENT, ("pay_of_x", "order_x", "evt_x", 1))
    merchant.execute(PAYMENT, ("pay_of_y", "order_y", "evt_y", 1))
    merchant.execute(REFUND, ("ph_3", "pay_of_x", "processed"))
    merchant.execute("UPDATE payhooks_refunds SET gateway_order_id = 'order_y'")
    told = timeline.story(merchant, "razorpay", "order_y")
    assert told is not None and told.payment_ids == ["pay_of_y"]
    # A payment whose record names no order is its refund's order's (the review found it
    # dropped: no order is not another order).
    merchant.execute(PAYMENT, ("pay_no_order", None, "evt_z", 1))
    merchant.execute(REFUND, ("ph_4", "pay_no_order", "processed"))
    merchant.execute("UPDATE payhooks_refunds SET gateway_order_id = 'order_z'"
                     " WHERE idempotency_key = 'ph_4'")  # fmt: skip
    told = timeline.story(merchant, "razorpay", "order_z")
    assert told is not None and told.payment_ids == ["pay_no_order"]


def test_settlements_outlive_the_purge_and_the_payments_they_name(merchant):
    """Money data: a payout, its lines and a flag stay, however old, after every record the
    purge takes, the payment's own included."""
    merchant.execute(PAYMENT, ("pay_settled", "order_a", "evt_a", 800))
    delivered(merchant, "evt_a", 800)
    merchant.execute(
        "INSERT INTO payhooks_settlements (provider, settlement_id, state, status, amount_paise,"
        " settled_at, recorded_at) VALUES ('razorpay', 'setl_old', 'settled', 'processed', 98,"
        " now() - interval '790 days', now() - interval '790 days')"
    )
    merchant.execute(
        "INSERT INTO payhooks_settlement_lines (provider, settlement_id, entry_id, kind,"
        " entry_type, payment_id, amount_paise, fee_paise, tax_paise, net_paise, matched,"
        " recorded_at) VALUES ('razorpay', 'setl_old', 'pay_settled', 'payment', 'payment',"
        " 'pay_settled', 100, 2, 0, 98, true, now() - interval '790 days')"
    )
    merchant.execute(
        "INSERT INTO payhooks_unsettled (provider, payment_id, captured_at, due_at, flagged_at)"
        " VALUES ('razorpay', 'pay_gone', now() - interval '800 days',"
        " now() - interval '794 days', now() - interval '794 days')"
    )
    retention.purge(merchant, 90, batch_rows=1)
    assert keys(merchant, "payhooks_payments", "payment_id") == []  # past a refund's year
    assert keys(merchant, "payhooks_settlements", "settlement_id") == ["setl_old"]
    assert keys(merchant, "payhooks_settlement_lines", "entry_id") == ["pay_settled"]
    assert keys(merchant, "payhooks_unsettled", "payment_id") == ["pay_gone"]
    matched = merchant.execute("SELECT matched FROM payhooks_settlement_lines").fetchone()[0]
    assert matched is True  # as recorded: the payment's record gone changes nothing


def test_a_window_shorter_than_the_gateways_replays_is_refused_unless_forced(merchant):
    delivered(merchant, "eight-days", 8)
    with pytest.raises(RetentionTooShort):
        retention.purge(merchant, 7)
    done = retention.purge(merchant, 7, force=True)
    assert done is not None and done.deleted == 1


def test_a_second_purge_while_one_runs_is_refused(merchant, merchant_url):
    for n in range(4):
        delivered(merchant, f"old-{n}", 100)
    meanwhile: list[retention.Purge | None] = []

    def second(_: int) -> None:
        with psycopg.connect(merchant_url, autocommit=True) as other:
            meanwhile.append(retention.purge(other, 90))

    first = retention.purge(merchant, 90, batch_rows=2, on_batch=second)
    assert first is not None and first.deleted == 4
    assert meanwhile == [None, None, None]
    again = retention.purge(merchant, 90)  # the lock went with the first purge
    assert again is not None and again.deleted == 0


def test_a_connection_out_of_autocommit_is_purged_in_short_transactions(merchant, merchant_url):
    delivered(merchant, "old", 100)
    with psycopg.connect(merchant_url) as conn:
        done = retention.purge(conn, 90)
        assert conn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE
    assert done is not None and done.deleted == 1
    assert keys(merchant, "processed_webhooks", "event_id") == []


# --- payhooks purge --database-url -------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    environ.pop("DATABASE_URL", None)
    return invoke(environ, "purge", *args, timeout=120)


def test_the_command_purges_a_merchant_database(merchant, merchant_url):
    delivered(merchant, "old", 100)
    delivered(merchant, "parked", 100, outcome="parked")
    expected(merchant, "order_old", 100)
    dry = cli("--database-url", merchant_url, "--dry-run")
    assert dry.returncode == 0 and dry.stdout.startswith(
        "would delete 1 record(s) and 0 delivery-log line(s) older than 90"
    )
    result = cli("--database-url", merchant_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        "deleted 1 record(s) and 0 delivery-log line(s) older than 90 days (before "
    )
    assert keys(merchant, "processed_webhooks", "event_id") == ["parked"]
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == []


@pytest.mark.parametrize("deferred", [False, True], ids=["foreign key", "deferred foreign key"])
def test_a_record_the_database_will_not_delete_is_kept_alone_and_the_rest_purged(
    merchant, merchant_url, deferred
):
    """A merchant's table naming one old delivery by a foreign key: the first batch's one
    statement failed, the purge exited 1 deleting nothing, and every run after failed on the
    same oldest batch, keeping every other customer's body past the window. The record the
    database refuses is kept and logged, the rest deleted, and the command exits 1 saying so;
    a deferred key too (checked as each statement ends, not at the batch's commit)."""
    for key, days in (("oldest", 120), ("held", 110), ("old", 100)):
        delivered(merchant, key, days)
    merchant.execute(
        "CREATE TABLE shop_orders (id bigint PRIMARY KEY, provider text, event_id text,"
        " FOREIGN KEY (provider, event_id) REFERENCES processed_webhooks (provider, event_id)"
        f"{' DEFERRABLE INITIALLY DEFERRED' if deferred else ''})"
    )
    merchant.execute("INSERT INTO shop_orders VALUES (1, 'razorpay', 'held')")
    result = cli("--database-url", merchant_url, "--batch-rows", "2")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout.startswith(
        "deleted 2 record(s) and 0 delivery-log line(s) older than 90 days (before "
    ) and result.stdout.rstrip().endswith("; kept 1 the database refused to delete"), result.stdout
    assert "kept, the database refused to delete them (razorpay held: " in result.stderr
    assert "foreign key" in result.stderr, result.stderr
    assert keys(merchant, "processed_webhooks", "event_id") == ["held"]
    # Its log line names it (a JSON line with its key and why), never a bare event name.
    [logged] = [json.loads(line) for line in result.stderr.splitlines()
                if "purge_record_refused" in line]  # fmt: skip
    assert (logged["event_id"], logged["provider"]) == ("held", "razorpay"), logged
    again = cli("--database-url", merchant_url)  # the same one kept again, nothing else
    assert again.returncode == 1 and "deleted 0 record(s)" in again.stdout, again.stdout


LOG_LINE = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                                 duration_ms, event_id)
VALUES (now() - make_interval(days => %s), 'razorpay', 200, 'processed', true, 2, 1, %s)
"""
# Each table the purge deletes from after the delivery records, one old row of it held by a
# merchant's foreign key: the table, and the columns the app's key names.
HELD = {
    "an expectation": ("payhooks_expectations", "provider, gateway_order_id"),
    "a payment's record": ("payhooks_payments", "provider, payment_id, kind"),
    "a delivery-log line": ("payhooks_deliveries", "id"),
}


def held_by_the_app(conn, held: str) -> None:
    """Three old rows of each table the purge deletes after the records, and a table of the
    app's naming one row of ``held``'s table by a foreign key."""
    for n, name in enumerate("abc"):
        expected(conn, f"order_{name}", 200 + n)
        conn.execute(PAYMENT, (f"pay_{name}", f"order_{name}", f"evt_{name}", 400 + n))
        conn.execute(LOG_LINE, (200 + n, f"evt_{name}"))
    table, columns = HELD[held]
    name_of = {"gateway_order_id": "order_b", "payment_id": "pay_b", "kind": "payment_captured"}
    typed = ", ".join(f"{c} {'bigint' if c == 'id' else 'text'}" for c in columns.split(", "))
    conn.execute(
        f"CREATE TABLE shop_links (n int PRIMARY KEY, {typed},"
        f" FOREIGN KEY ({columns}) REFERENCES {table} ({columns}))".encode()
    )
    if table == "payhooks_deliveries":
        conn.execute("INSERT INTO shop_links SELECT 1, id FROM payhooks_deliveries"
                     " WHERE event_id = 'evt_b'")  # fmt: skip
    else:
        values = ["razorpay" if c == "provider" else name_of[c] for c in columns.split(", ")]
        conn.execute(
            f"INSERT INTO shop_links VALUES (1, {', '.join(['%s'] * len(values))})".encode(),
            values,
        )


@pytest.mark.parametrize("held", list(HELD))
def test_a_row_of_any_purged_table_the_database_will_not_delete_is_kept_alone(
    merchant, merchant_url, held
):
    """A merchant's foreign key naming one old expectation stopped every purge at it: the
    expectations past it, the delivery log, the relayed events and the console's rows were
    never purged again, and the command said only the database's error. Only the delivery
    records were kept alone past a refusal. Any row the purge deletes is now: the rest go, and
    the command names what it kept and why."""
    held_by_the_app(merchant, held)
    result = cli("--database-url", merchant_url, "--batch-rows", "2")
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout.rstrip().endswith("; kept 1 the database refused to delete"), (
        result.stdout, result.stderr)  # fmt: skip
    table, _ = HELD[held]
    assert f"{table} " in result.stderr and "foreign key" in result.stderr, result.stderr
    left = {
        "payhooks_expectations": keys(merchant, "payhooks_expectations", "gateway_order_id"),
        "payhooks_payments": keys(merchant, "payhooks_payments", "payment_id"),
        "payhooks_deliveries": keys(merchant, "payhooks_deliveries", "event_id"),
    }
    kept = {"payhooks_expectations": ["order_b"], "payhooks_payments": ["pay_b"],
            "payhooks_deliveries": ["evt_b"]}  # fmt: skip
    assert left == {t: (kept[t] if t == table else []) for t in left}
    [logged] = [json.loads(line) for line in result.stderr.splitlines()
                if "purge_row_refused" in line]  # fmt: skip
    assert logged["table"] == table, logged
    again = cli("--database-url", merchant_url)  # the same one kept again, nothing else
    assert again.returncode == 1 and "kept 1 the database refused" in again.stdout, again.stdout


def test_rows_an_apps_trigger_skips_are_kept_and_the_purge_ends(merchant, merchant_url):
    """A ``BEFORE DELETE`` trigger of the app's returning NULL skips rows without an error: the
    rows a batch locked and did not delete were neither counted nor left out, every batch was
    full again, and the purge never ended (the worker's loop with it: review). They are kept
    and named, the rest purged past them."""
    for n in (3, 4):
        merchant.execute(LOG_LINE, (200 + n, f"evt_{n}"))
    merchant.execute(
        "CREATE FUNCTION keep_two() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF OLD.event_id IN ('evt_3', 'evt_4') THEN RETURN NULL; END IF; RETURN OLD; END $$;"
        " CREATE TRIGGER keep_two BEFORE DELETE ON payhooks_deliveries FOR EACH ROW"
        " EXECUTE FUNCTION keep_two()"
    )
    for batch_rows in (1, 2, 5000):
        for n in range(3):  # evt_3 and evt_4 stay from the last run
            merchant.execute(LOG_LINE, (200 + n, f"evt_{n}"))
        done = retention.purge(merchant, 90, batch_rows=batch_rows)
        assert done is not None and done.log_lines_deleted == 3
        assert keys(merchant, "payhooks_deliveries", "event_id") == ["evt_3", "evt_4"]
        assert sorted(h.row.split()[-1] for h in done.held) == ["evt_3", "evt_4"], done.held
        assert all("did not delete" in h.error for h in done.held), done.held


def test_rows_an_apps_trigger_rewrites_instead_stop_that_tables_purge_and_say_so(merchant):
    """A soft delete (``UPDATE`` the row, ``RETURN NULL``) moves the row to a new row id: it was
    not found left, not kept, and locked again by every batch, for ever (review). Past a batch
    that changed rows instead of deleting them the table's purge stops and says so; the other
    tables are purged."""
    merchant.execute("ALTER TABLE payhooks_deliveries ADD COLUMN archived boolean DEFAULT false")
    merchant.execute(
        "CREATE FUNCTION archive() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " UPDATE payhooks_deliveries SET archived = true WHERE id = OLD.id; RETURN NULL; END $$;"
        " CREATE TRIGGER archive BEFORE DELETE ON payhooks_deliveries FOR EACH ROW"
        " EXECUTE FUNCTION archive()"
    )
    for n in range(3):
        merchant.execute(LOG_LINE, (200 + n, f"evt_{n}"))
        expected(merchant, f"order_{n}", 200 + n)
    asked = []
    done = retention.purge(merchant, 90, batch_rows=2, stop=lambda: len(asked) > 50 or
                           bool(asked.append(1)))  # fmt: skip
    assert len(asked) <= 50, "the purge did not end"
    assert done is not None and keys(merchant, "payhooks_expectations", "gateway_order_id") == []
    assert len(keys(merchant, "payhooks_deliveries", "event_id")) == 3
    [said] = [h for h in done.held if h.table == "payhooks_deliveries"]
    assert "changed them instead of deleting them" in said.error, said


def test_a_delivery_record_an_apps_trigger_skips_is_kept_and_the_rest_purged(merchant):
    """One old record an app's trigger skips (``RETURN NULL``) made every batch fall one
    short: the purge stopped there each run, said nothing, and fell further behind (review)."""
    for n in range(21):
        delivered(merchant, f"old-{n:02d}", 200 - n)
    merchant.execute(
        "CREATE FUNCTION keep_one() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF OLD.event_id = 'old-00' THEN RETURN NULL; END IF; RETURN OLD; END $$;"
        " CREATE TRIGGER keep_one BEFORE DELETE ON processed_webhooks FOR EACH ROW"
        " EXECUTE FUNCTION keep_one()"
    )
    done = retention.purge(merchant, 90, batch_rows=5)
    assert done is not None and done.deleted == 20
    assert keys(merchant, "processed_webhooks", "event_id") == ["old-00"]
    assert [(k.event_id, "did not delete" in k.error) for k in done.kept] == [("old-00", True)]


def test_an_error_not_of_a_record_is_the_purges_not_a_record_kept(merchant, merchant_url):
    """Behind a transaction pooler a statement prepared on another server session fails
    (``42P05``); such an error, or any that is not a record's own constraint or trigger
    refusing it, was taken for a refusal of the record, kept, and the operator told to let go
    of what holds it. It is the purge's error, as before."""
    for key, days in (("first", 120), ("second", 110)):
        delivered(merchant, key, days)
    merchant.execute(
        "CREATE FUNCTION not_a_refusal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " RAISE EXCEPTION 'prepared statement \"_pg3_0\" already exists'"
        " USING ERRCODE = '42P05'; END $$;"
        " CREATE TRIGGER not_a_refusal BEFORE DELETE ON processed_webhooks FOR EACH ROW"
        " WHEN (OLD.event_id = 'second') EXECUTE FUNCTION not_a_refusal()"
    )
    result = cli("--database-url", merchant_url)
    assert result.returncode == 1
    assert "42P05" in result.stderr and "refused to delete" not in result.stderr + result.stdout


def test_a_reference_service_database_of_before_the_tracks_is_not_taken_for_an_apps(
    database_url, conn
):
    """The service's database as a release before the migration tracks left it (its versions
    in ``schema_migrations``, no ``payhooks_migrations`` yet, which ``payhooks migrate``
    adopts): known by its migrations' record alone, it was refused as a merchant app's."""
    conn.execute("DROP TABLE payhooks_migrations")
    conn.execute("CREATE TABLE schema_migrations (version text PRIMARY KEY)")
    conn.execute("INSERT INTO schema_migrations VALUES ('0001_init'), ('0005_hardening')")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    environ["DATABASE_URL"] = database_url
    result = invoke(environ, "purge", "--dry-run", timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("would delete 0 record(s)"), result.stdout


SHOPS_OWN_TABLES = """
CREATE TABLE carts (id text PRIMARY KEY, status text NOT NULL DEFAULT 'open');
CREATE TABLE checkouts (id bigserial PRIMARY KEY, cart_id text REFERENCES carts (id));
CREATE TABLE orders (order_id text PRIMARY KEY, cart_id text REFERENCES carts (id));
"""
"""A merchant's shop keeps carts, checkouts and orders of its own, under the names the reference
service's shop uses: no proof the database is the service's."""


@pytest.mark.parametrize("own_tables", [False, True], ids=["core only", "the shop's own carts"])
def test_the_commands_without_their_database_url_name_the_door_for_a_merchant_database(
    merchant, merchant_url, own_tables
):
    """DATABASE_URL naming a merchant app's database and no ``--database-url``: the command
    acts as the reference service, whose tables are not there. Its count and its purge both
    say so first, naming the door, and delete nothing; so do reconcile, worker, trace and
    replay. A merchant's own tables named as the service's (``carts``, ``orders``) do not make
    the database the service's: its migrations' record does."""
    if own_tables:
        merchant.execute(SHOPS_OWN_TABLES)
        merchant.execute("INSERT INTO carts (id, status) VALUES ('cart_1', 'checked_out')")
    delivered(merchant, "old", 100)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    environ["DATABASE_URL"] = merchant_url
    said = (
        "payhooks: this database holds payhooks' core tables but not the reference service's:"
        " a merchant app's records are purged with `payhooks purge --database-url URL`\n"
    )
    for args in (("--dry-run",), ()):
        result = invoke(environ, "purge", *args, timeout=120)
        assert (result.returncode, result.stderr) == (1, said), result.stdout
    assert keys(merchant, "processed_webhooks", "event_id") == ["old"]
    environ.update(API_KEYS.env("http://127.0.0.1:9"))  # refused before any call
    result = invoke(environ, "reconcile", timeout=120)
    assert (result.returncode, result.stderr) == (1, said.replace(
        "records are purged with `payhooks purge --database-url URL`",
        "checkouts are reconciled with `payhooks reconcile --hooks module:attribute`",
    )), result.stdout  # fmt: skip
    result = invoke(environ, "worker", "--once", timeout=120)
    assert result.returncode == 1, result.stdout
    assert result.stderr.startswith(said.split(" a merchant app's")[0]), result.stderr
    assert "payhooks.operations.outbox" in result.stderr and "--hooks" in result.stderr
    result = invoke(environ, "trace", "order_old", timeout=120)
    assert result.returncode == 1 and "`payhooks console`" in result.stderr, result.stderr
    assert result.stderr.startswith(said.split(" a merchant app's")[0]), result.stderr
    result = invoke(environ, "replay", "old", timeout=120)
    assert (result.returncode, result.stderr) == (1, said.replace(
        "records are purged with `payhooks purge --database-url URL`",
        "deliveries are replayed with `payhooks replay KEY --hooks module:attribute`",
    )), result.stdout  # fmt: skip
    assert keys(merchant, "processed_webhooks", "event_id") == ["old"]


def test_reconcile_without_hooks_works_on_the_database_url_it_is_given(
    merchant, merchant_url, tmp_path
):
    """`payhooks reconcile --database-url URL` without --hooks ignored the URL: it started an
    embedded PostgreSQL in the current folder, failed there on a table missing, and told the
    operator to migrate a database that was migrated. It reads URL, as every command does."""
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_") and k != "DATABASE_URL"
    }
    environ["PAYHOOKS_HOME"] = str(tmp_path / "home")
    environ.update(API_KEYS.env("http://127.0.0.1:9"))  # refused before any call
    result = invoke(environ, "reconcile", "--database-url", merchant_url, timeout=120)
    assert result.returncode == 1, result.stdout
    assert result.stderr.startswith(
        "payhooks: this database holds payhooks' core tables but not the reference service's"
    ), result.stderr
    assert not (tmp_path / "home").exists()  # no embedded server was started


def test_the_command_refuses_while_another_purge_runs(merchant, merchant_url):
    delivered(merchant, "old", 100)
    with (
        psycopg.connect(merchant_url, autocommit=True) as holder,
        retention.exclusively(holder) as mine,
    ):
        assert mine
        result = cli("--database-url", merchant_url)
    assert result.returncode == 1
    assert result.stderr == "payhooks: another purge is running (on that database); try later\n"
    assert keys(merchant, "processed_webhooks", "event_id") == ["old"]


def test_the_command_refuses_a_short_window_unless_forced(merchant, merchant_url):
    result = cli("--database-url", merchant_url, "--older-than-days", "3")
    assert result.returncode == 1 and "pass --force" in result.stderr
    assert cli("--database-url", merchant_url, "--older-than-days", "3", "--force").returncode == 0


@pytest.mark.parametrize(
    ("option", "value"),
    [("--batch-rows", "0"), ("--batch-rows", "-1"), ("--older-than-days", "-3")],
)
def test_a_window_or_batch_below_one_is_refused_by_name(merchant, merchant_url, option, value):
    """A batch of no rows purged for ever, holding the purge's lock; a negative window took
    tomorrow's records as old."""
    delivered(merchant, "old", 100)
    result = cli("--database-url", merchant_url, option, value, "--force", "--dry-run")
    assert result.returncode == 2 and option in result.stderr, result.stderr
    assert keys(merchant, "processed_webhooks", "event_id") == ["old"]


def test_old_delivery_log_lines_go_too_refused_ones_included(merchant):
    """The log holds every request a door answered, a forged-request flood too: it must not
    outlive the window."""
    merchant.execute(
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " body_bytes, duration_ms)"
        " SELECT now() - make_interval(days => d), 'razorpay', 401, 'signature_mismatch',"
        " false, 100, 1 FROM unnest(ARRAY[400, 400, 91, 10]) d"
    )
    retention.purge(merchant, 90, batch_rows=1)
    left = merchant.execute(
        "SELECT extract(day FROM now() - received_at)::int FROM payhooks_deliveries ORDER BY 1"
    ).fetchall()
    assert left == [(10,)]


LOG_LINES = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                                 duration_ms)
SELECT now() - make_interval(days => %s), 'razorpay', 200, 'processed', true, 100, 1
FROM generate_series(1, %s)
"""


def test_the_command_counts_the_delivery_log_lines_it_would_delete_and_deletes(
    merchant, merchant_url
):
    """A thousand lines past the window were deleted while the command said 0 went."""
    delivered(merchant, "old", 100)
    merchant.execute(LOG_LINES, (100, 1000))
    merchant.execute(LOG_LINES, (10, 3))
    planned = retention.plan(merchant, 90)
    dry = cli("--database-url", merchant_url, "--dry-run")
    assert dry.stdout.startswith(
        "would delete 1 record(s) and 1000 delivery-log line(s) older than 90 days (before "
    ), dry.stdout + dry.stderr
    result = cli("--database-url", merchant_url)
    assert result.stdout.startswith(
        "deleted 1 record(s) and 1000 delivery-log line(s) older than 90 days (before "
    ), result.stdout + result.stderr
    assert (planned.expired, planned.log_lines_expired) == (1, 1000)
    assert merchant.execute("SELECT count(*) FROM payhooks_deliveries").fetchone() == (3,)


def test_the_library_purge_says_how_many_delivery_log_lines_it_deleted(merchant):
    merchant.execute(LOG_LINES, (100, 7))
    done = retention.purge(merchant, 90, batch_rows=2)
    assert done is not None and (done.log_lines_expired, done.log_lines_deleted) == (7, 7)


def test_ended_console_sessions_and_day_old_failed_logins_go(merchant):
    """A stranger's failed login writes a row: in a merchant's database, where no reference
    service purges, the core's purge must not let them grow."""
    from payhooks.console import auth
    from payhooks.operations import operators

    operators.add_operator(merchant, "asha", "correct horse battery")
    auth.open_session(merchant, "asha")
    auth.open_session(merchant, "asha")
    merchant.execute(
        "UPDATE payhooks_console_sessions SET expires_at = now() - interval '1 minute'"
        " WHERE ctid = (SELECT min(ctid) FROM payhooks_console_sessions)"
    )
    merchant.execute(
        "INSERT INTO payhooks_console_login_failures (name, client, failed_at)"
        " SELECT 'asha', 'client-' || n, now() - make_interval(hours => h)"
        " FROM unnest(ARRAY[1, 2, 3], ARRAY[48, 25, 1]) AS t (n, h)"
    )
    retention.purge(merchant, 90, batch_rows=1)
    sessions = merchant.execute(
        "SELECT count(*) FROM payhooks_console_sessions WHERE expires_at > now()"
    ).fetchone()
    assert sessions == (1,)
    assert merchant.execute("SELECT count(*) FROM payhooks_console_sessions").fetchone() == (1,)
    failures = merchant.execute("SELECT client FROM payhooks_console_login_failures").fetchall()
    assert failures == [("client-3",)]


def test_a_callback_still_waiting_for_its_gateways_word_is_never_purged(merchant):
    """Its record is the only trace of a callback not yet applied: kept, as a parked one."""
    merchant.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, body,"
        " headers, payload_sha256, processed_at)"
        " VALUES ('phonepe', 'cb-waiting', 'checkout.order.completed', 'confirming', '{}',"
        " '{}', 'x', now() - interval '400 days')"
    )
    retention.purge(merchant, 90, batch_rows=1)
    kept = merchant.execute("SELECT outcome FROM processed_webhooks WHERE event_id = 'cb-waiting'")
    assert kept.fetchall() == [("confirming",)]


# --- a purge racing a capture parked for its amount --------------------------------------------


def underpaid(order: str = "order_race") -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured", payment_id="pay_race0000001", order_id=order, amount_paise=100
    )


def expected_days_ago(conn, order: str, days_old: int) -> None:
    payhooks.expect(conn, "razorpay", order, 49_900, "INR", "ref-" + order)
    conn.execute(
        "UPDATE payhooks_expectations SET created_at = now() - make_interval(days => %s)"
        " WHERE gateway_order_id = %s",
        (days_old, order),
    )


def parked_without_their_expectation(conn) -> list[str]:
    rows = conn.execute(
        "SELECT w.event_id FROM processed_webhooks w WHERE w.outcome = 'parked'"
        " AND NOT EXISTS (SELECT 1 FROM payhooks_expectations e"
        "                 WHERE e.provider = w.provider AND e.gateway_order_id = w.merchant_ref)"
    ).fetchall()
    return [row[0] for row in rows]


def test_an_expectation_whose_capture_is_being_parked_survives_a_purge_meanwhile(
    merchant, merchant_url
):
    """The parking transaction is open (not committed) on one connection while the purge runs
    on another: the purge cannot see the parked delivery yet, and must not take its
    expectation from under it."""
    expected_days_ago(merchant, "order_race", 20)
    delivery = underpaid()
    with psycopg.connect(merchant_url) as parking, parking.transaction():
        pending = ingest_in_transaction(
            parking, ADAPTERS[delivery.provider], delivery.body, delivery.headers, paying()
        )
        assert pending.outcome.outcome is Outcome.PARKED
        retention.purge(merchant, 15)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == ["order_race"]
    assert parked_without_their_expectation(merchant) == []
    retention.purge(merchant, 15)  # and once the parked delivery is committed, it keeps it
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == ["order_race"]


def test_a_capture_meeting_an_expectation_being_purged_is_never_parked_against_it(
    merchant, merchant_url
):
    """The purge has deleted the expectation, not yet committed, when an underpaid capture of
    it arrives on another connection: the capture waits for the purge, then finds no
    expectation, and is applied as an order nobody expected; it is never left parked for an
    amount that a replay could no longer check."""
    expected_days_ago(merchant, "order_race", 20)
    delivery = underpaid()
    answers: list[Outcome] = []

    def capture() -> None:
        with psycopg.connect(merchant_url, autocommit=True) as conn:
            answers.append(deliver_to(conn, delivery).outcome)

    with psycopg.connect(merchant_url) as purging, purging.transaction():
        retention.delete_expired(purging, retention.plan(purging, 15))
        thread = threading.Thread(target=capture)
        thread.start()
        waiting_or_done(merchant, thread)
    thread.join(timeout=30)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == []
    assert parked_without_their_expectation(merchant) == []
    assert answers == [Outcome.PROCESSED]


def test_an_expectation_with_an_unresolved_amount_mismatch_stays(merchant):
    expected(merchant, "order_held", 100)
    delivered(merchant, "evt_held", 10, order="order_held", payment="pay_h")
    merchant.execute(MISMATCH, ("evt_held", "order_held", "pay_h"))
    retention.purge(merchant, 90)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == ["order_held"]
    merchant.execute("UPDATE payhooks_amount_mismatches SET resolved_at = now()")
    retention.purge(merchant, 90)
    assert keys(merchant, "payhooks_expectations", "gateway_order_id") == []


def paying() -> Hooks:
    """A merchant's hooks that take every capture they are handed."""
    found = Hooks()
    found.on(EventKind.PAYMENT_CAPTURED)(lambda conn, event: None)
    return found


def deliver_to(conn, delivery: Delivery) -> Receipt:
    return ingest(conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, paying())


def waiting_or_done(conn, thread: threading.Thread) -> None:
    """Until ``thread``'s connection waits on a row lock, or the thread has finished."""
    waiting = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    while thread.is_alive() and conn.execute(waiting).fetchone()[0] == 0:
        thread.join(timeout=0.05)


def test_a_callback_waiting_for_its_gateways_word_keeps_its_orders_amount_check(merchant_url):
    """A PhonePe callback waits while the status API gives no usable answer (its credentials
    not set yet, the API down): a purge meanwhile must not take its order's expectation, or
    the payment the API reports at last reaches the handler whatever it paid."""
    from payhooks.events import Provider
    from payhooks.intake.ingest import ingest_received
    from payhooks.reconcile.confirming import confirm
    from payhooks.reconcile.passes import Tally
    from payhooks.reconcile.running import connecting, delivering
    from tests.reconcile.test_confirmations import ORDER, Api, callback, hooks_noting, reported

    paid: list[object] = []
    with psycopg.connect(merchant_url, autocommit=True) as conn:
        payhooks.expect(conn, "phonepe", ORDER, 100, "INR", "order-1")  # the API says 49,900
        ingest_received(conn, callback(), hooks_noting(paid))
        assert keys(conn, "processed_webhooks", "outcome") == ["confirming"]
        conn.execute("UPDATE payhooks_expectations SET created_at = now() - interval '100 days'")
        conn.execute("UPDATE processed_webhooks SET processed_at = now() - interval '100 days'")
        retention.purge(conn, 90)
        assert keys(conn, "payhooks_expectations", "gateway_order_id") == [ORDER]
        connect = connecting(merchant_url)
        confirm(connect, {Provider.PHONEPE: Api(says=reported())},
                delivering(connect, hooks_noting(paid)), Tally())  # fmt: skip
        mismatched = conn.execute("SELECT paid_paise FROM payhooks_amount_mismatches")
        assert (paid, mismatched.fetchall()) == ([], [(49_900,)])


def test_a_payments_claim_stays_while_a_callback_of_its_order_waits_for_the_gateways_word(
    merchant,
):
    """The claim of an authorisation (kept only for the window) is what makes the waiting
    callback's payment, once the API reports it, a duplicate rather than applied again."""
    merchant.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,"
        " reconciled, applied_at) VALUES ('phonepe', 'OM1', 'payment_authorized', 'M-1', 'e1',"
        " false, now() - interval '100 days'), ('phonepe', 'OM2', 'payment_authorized', 'M-2',"
        " 'e2', false, now() - interval '100 days')"
    )
    merchant.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, body,"
        " headers, payload_sha256, processed_at) VALUES ('phonepe', 'cb-2', 'x', 'confirming',"
        " '{}', '{}', 'x', now() - interval '100 days')"
    )
    merchant.execute(
        "INSERT INTO payhooks_confirmations (provider, event_id, gateway_order_id, kind)"
        " VALUES ('phonepe', 'cb-2', 'M-2', 'payment_captured')"
    )
    retention.purge(merchant, 90)
    assert keys(merchant, "payhooks_payments", "payment_id") == ["OM2"]

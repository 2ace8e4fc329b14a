"""The one-statement first capture (``shop_first_capture``) leaves exactly what the general
path leaves, for every outcome: the same deliveries are played through each path on two
databases set up alike, and the answers and every row of the shop are compared."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from payhooks.events import EventKind, Provider, Received
from payhooks.gateways import _reports
from payhooks.intake.ingest import Outcome, Receipt, ingest_received, receive
from payhooks.plumbing import db
from payhooks.service import database
from payhooks.service.config import PoolMode, Settings
from payhooks.service.shop import captures
from payhooks.service.shop.payments import apply_event
from payhooks.sim.deliveries import Disputed
from payhooks.sim.gateway import Delivery, bank_reference
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.conftest import Databases
from tests.factories import ADAPTERS, GATEWAY

PRICE = 49_900
SETUP = [
    "INSERT INTO product_info (sku, name, price_paise) VALUES ('TEA', 'Tea', 49900)",
    """INSERT INTO product_stock (sku, slot, stock)
       SELECT 'TEA', s, %(per_slot)s FROM generate_series(0, %(slots)s - 1) s""",
    """INSERT INTO carts (id, customer_email, amount_paise)
       SELECT 'cart_' || g, 'buyer' || g || '@example.com', 49900 * %(quantity)s
       FROM generate_series(1, 3) g""",
    """INSERT INTO cart_items (cart_id, sku, quantity, price_paise)
       SELECT 'cart_' || g, 'TEA', %(quantity)s, 49900 FROM generate_series(1, 3) g""",
    """INSERT INTO checkouts (provider, gateway_order_id, cart_id)
       SELECT 'razorpay', 'order_' || g, 'cart_' || g FROM generate_series(1, 3) g""",
]
# What the shop tells the core at checkout (payhooks.expect); %(expected)s: the amount.
EXPECTED = """INSERT INTO payhooks_expectations
    (provider, gateway_order_id, amount_paise, currency, reference)
    SELECT 'razorpay', 'order_' || g, %(expected)s, 'INR', 'cart_' || g
    FROM generate_series(1, 3) g"""
# Every row the shop and the claim keep, without the clock's columns and generated ids.
STATE = {
    "processed_webhooks": """SELECT provider, event_id, event_type, outcome, payment_id,
        merchant_ref, bank_ref, payload_sha256, body, headers, order_ref, mismatches,
        first_copy FROM processed_webhooks""",
    "payments": """SELECT provider, payment_id, cart_id, status, amount_paise,
        payment_amount_paise, currency, refunded_paise, needs_refund, flags,
        captured_at IS NOT NULL FROM payments""",
    "refunds": "SELECT provider, refund_id, payment_id, amount_paise FROM refunds",
    "carts": "SELECT id, status, paid_at IS NOT NULL FROM carts",
    "orders": "SELECT id, cart_id, provider, payment_id, amount_paise, status, event_id"
    " FROM orders",
    "stock": "SELECT sku, slot, stock FROM product_stock",
    "ledger": "SELECT sku, delta, reason, order_id FROM inventory_movements",
    "outbox": "SELECT kind, dedupe_key, recipient, subject, body, payload FROM outbox",
    # The core's business key (insert-first, as the claim) and what it parked for its amount.
    "payhooks_payments": """SELECT provider, payment_id, kind, gateway_order_id, event_id,
        reconciled, attempt_id, paid_paise, currency, reference, order_ref, bank_ref,
        disputed_paise FROM payhooks_payments""",
    "mismatches": """SELECT provider, event_id, gateway_order_id, payment_id, expected_paise,
        paid_paise, resolved_at IS NULL, resolution FROM payhooks_amount_mismatches""",
    "resolutions": "SELECT provider, event_id, resolution FROM payhooks_resolutions",
    # Payment events queued for the relay (payhooks.intake.relaying), per channel.
    "relayed": """SELECT kind, channel, dedupe_key, subject, body, payload, sent_at IS NULL
        FROM payhooks_outbox WHERE kind = 'event'""",
}
RELAYS = "INSERT INTO payhooks_relay_channels (channel) VALUES ('nats'), ('rabbitmq')"
"""A relay set up for both brokers, played as a statement before the deliveries."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Played:
    answers: list[tuple[str, str, str | None, bool]]
    state: dict[str, list[str]]
    fast: int
    """How many deliveries the one statement answered."""


Item = Delivery | Received | str | Callable[[db.Connection], object]
"""A gateway's delivery, or one reconciliation composes itself (its key no webhook takes), or a
statement the merchant runs between deliveries (an expectation corrected), or what a person
does between them (a payment settled by hand)."""
Path = Callable[[db.Connection, Item], tuple[Receipt, bool]]


def received_of(item: Item) -> Received:
    if isinstance(item, Received):
        return item
    return receive(ADAPTERS[item.provider], item.body, item.headers)


def general(conn: db.Connection, delivery: Item) -> tuple[Receipt, bool]:
    return ingest_received(conn, received_of(delivery), apply_event, pipeline=True), False


def first(conn: db.Connection, delivery: Item) -> tuple[Receipt, bool]:
    """The service's order: the one statement, else the general path."""
    received = received_of(delivery)
    answered = captures.first_capture(conn, received)
    if answered is not None:
        return answered, True
    return general(conn, delivery)[0], False


def first_async(conn: db.Connection, delivery: Item) -> tuple[Receipt, bool]:
    """The service's order on an async connection, as its event loop runs it."""
    received = received_of(delivery)

    async def answer() -> Receipt | None:
        async with await psycopg.AsyncConnection.connect(conn.info.dsn, autocommit=True) as on:
            return await captures.first_capture_async(on, received)

    answered = asyncio.run(answer())
    if answered is not None:
        return answered, True
    return general(conn, delivery)[0], False


@contextmanager
def fresh_database(admin_url: str, databases: Databases) -> Iterator[str]:
    """A database as a fresh clone of the template is (emptied after its turn)."""
    name = databases.take()
    try:
        yield make_conninfo(admin_url, dbname=name)
    finally:
        databases.give_back(name)


def play(
    url: str,
    deliveries: list[Item],
    path: Path,
    *,
    stock: int,
    slots: int,
    quantity: int,
    expected: int | None,
) -> Played:
    with psycopg.connect(url, autocommit=True) as conn:
        values = {"per_slot": stock // slots, "slots": slots, "quantity": quantity,
                  "expected": expected}  # fmt: skip
        for sql in SETUP if expected is None else [*SETUP, EXPECTED]:
            conn.execute(sql.encode(), values)
        played = []
        for delivery in deliveries:
            if isinstance(delivery, str):
                conn.execute(delivery.encode())
            elif callable(delivery):
                delivery(conn)
            else:
                played.append(path(conn, delivery))
        orders = dict(conn.execute("SELECT id, 'order of ' || cart_id FROM orders").fetchall())
        state = {name: _rows(conn, sql, orders) for name, sql in STATE.items()}
    answers = [
        (r.outcome.value, r.event.event_id, orders.get(r.order_id or "", r.order_id), r.mismatch)
        for r, _ in played
    ]
    return Played(answers=answers, state=state, fast=sum(fast for _, fast in played))


def _rows(conn: db.Connection, sql: str, orders: dict[str, str]) -> list[str]:
    """Rows as text, the generated order ids named by their carts, in a stable order."""
    rows = []
    for row in conn.execute(sql.encode()).fetchall():
        text = json.dumps([_plain(value) for value in row], sort_keys=True)
        for order_id, name in orders.items():
            text = text.replace(order_id, name)
        rows.append(text)
    return sorted(rows)


def _plain(value: object) -> object:
    return bytes(value).hex() if isinstance(value, bytes | memoryview) else value


@pytest.fixture(params=[first, first_async], ids=["sync", "async"])
def both(
    request: pytest.FixtureRequest, admin_url: str, databases: Databases
) -> Callable[..., tuple[Played, Played]]:
    path: Path = request.param

    def run(
        deliveries: list[Item],
        *,
        stock: int = 10,
        slots: int = 1,
        quantity: int = 1,
        expected: int | None = None,
    ) -> tuple[Played, Played]:
        shape = {"stock": stock, "slots": slots, "quantity": quantity, "expected": expected}
        with fresh_database(admin_url, databases) as url:
            slow = play(url, deliveries, general, **shape)
        with fresh_database(admin_url, databases) as url:
            fast = play(url, deliveries, path, **shape)
        assert fast.answers == slow.answers
        assert fast.state == slow.state
        return slow, fast

    return run


def capture(n: int = 1, *, payment: str = "", amount: int = PRICE, **more: object) -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id=payment or f"pay_first{n:08d}",
        order_id=f"order_{n}",
        amount_paise=amount,
        **more,  # type: ignore[arg-type]
    )


def reconciled(n: int = 1, *, payment: str = "", amount: int = PRICE, order: str = "") -> Received:
    """The delivery reconciliation composes for a captured payment the status API reports."""
    payment_id = payment or f"pay_first{n:08d}"
    order = order or f"order_{n}"
    entity = {"id": payment_id, "order_id": order, "amount": amount, "status": "captured"}
    return _reports.received(
        Provider.RAZORPAY,
        entity,
        kind=EventKind.PAYMENT_CAPTURED,
        status="captured",
        payment_id=payment_id,
        merchant_ref=order,
        amount_paise=amount,
        currency="INR",
    )


def outcomes(played: Played) -> list[str]:
    return [outcome for outcome, *_ in played.answers]


def test_a_first_capture_is_processed_in_one_statement_with_the_same_rows(both):
    slow, fast = both([capture(1), capture(2)])
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 2
    assert len(fast.state["orders"]) == 2 and len(fast.state["outbox"]) == 2


def test_a_copy_is_a_duplicate_with_the_order(both):
    delivery = capture(1)
    slow, fast = both([delivery, delivery])
    assert outcomes(slow) == ["processed", "duplicate"] and fast.fast == 2
    assert slow.answers[1][2] == "order of cart_1"


def test_a_capture_of_an_unknown_checkout_is_parked_by_the_general_path(both):
    slow, fast = both([capture(9)])
    assert outcomes(slow) == ["parked"] and fast.fast == 0


def test_a_parked_copy_is_applied_by_the_general_path(both):
    orphan = capture(9)
    slow, fast = both([orphan, orphan])
    assert outcomes(slow) == ["parked", "parked"] and fast.fast == 0


def test_an_event_no_one_handles_is_ignored(both):
    other = GATEWAY.razorpay(
        "payment.downtime.started",
        payment_id="pay_first00000001",
        order_id="order_1",
        amount_paise=PRICE,
    )
    slow, fast = both([other])
    assert outcomes(slow) == ["ignored"] and fast.fast == 0


def test_the_same_key_with_another_body_is_a_duplicate_marked_as_a_mismatch(both):
    original = capture(1)
    altered = capture(1, amount=PRICE + 1, event_id=original.headers["x-razorpay-event-id"])
    slow, fast = both([original, altered])
    assert outcomes(slow) == ["processed", "duplicate"] and slow.answers[1][3]
    assert fast.fast == 1


def test_the_same_bytes_under_another_key_are_a_duplicate(both):
    original = capture(1)
    rekeyed = Delivery(
        provider=original.provider,
        body=original.body,
        headers={**original.headers, "x-razorpay-event-id": "evt_rekeyed0001"},
        label="rekeyed",
    )
    slow, fast = both([original, rekeyed])
    assert outcomes(slow) == ["processed", "duplicate"] and fast.fast == 1


def test_a_refund_before_its_capture_leaves_the_capture_to_the_general_path(both):
    refund = GATEWAY.razorpay(
        "refund.processed",
        payment_id="pay_first00000001",
        order_id="order_1",
        amount_paise=PRICE,
        refund_id="rfnd_first0001",
    )
    slow, fast = both([refund, capture(1)])
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 0
    assert "captured_after_full_refund" in slow.state["payments"][0]


def test_a_capture_with_no_stock_left_is_backordered(both):
    slow, fast = both([capture(1), capture(2)], stock=1)
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 1
    assert any('"backordered"' in row for row in slow.state["orders"])


def test_the_last_units_spread_over_slots_are_taken_by_the_general_path(both):
    slow, fast = both([capture(1)], stock=4, slots=4, quantity=3)
    assert outcomes(slow) == ["processed"] and fast.fast == 0
    assert all('"confirmed"' in row for row in slow.state["orders"])


def test_a_capture_for_another_amount_is_flagged(both):
    slow, fast = both([capture(1, amount=PRICE - 100)])
    assert outcomes(slow) == ["processed"] and fast.fast == 0
    assert "amount_mismatch" in slow.state["payments"][0]


def test_a_second_payment_for_a_paid_cart_is_flagged(both):
    slow, fast = both([capture(1), capture(1, payment="pay_second0000001")])
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 1
    assert any("duplicate_payment" in row for row in slow.state["payments"])


def test_an_authorised_payment_captured_later_takes_the_general_path(both):
    authorised = GATEWAY.razorpay(
        "payment.authorized",
        payment_id="pay_first00000001",
        order_id="order_1",
        amount_paise=PRICE,
    )
    slow, fast = both([authorised, capture(1)])
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 0
    assert len(slow.state["orders"]) == 1


def test_behind_a_transaction_pooler_the_statement_runs_in_a_transaction_of_its_own(
    database_url,
):
    settings = Settings(database_pool_mode=PoolMode.TRANSACTION)
    with database.connect(database_url, settings, {"lock_timeout": "1234"}) as conn:
        values = {"per_slot": 10, "slots": 1, "quantity": 1}
        for sql in SETUP:
            conn.execute(sql.encode(), values)
        answered, fast = first(conn, capture(1))
        declined, slow = first(conn, capture(1, payment="pay_second0000001"))
        assert (answered.outcome, fast) == (Outcome.PROCESSED, True)
        assert (declined.outcome, slow) == (Outcome.PROCESSED, False)
        flags = conn.execute("SELECT flags FROM payments ORDER BY created_at").fetchall()
        assert flags == [([],), (["duplicate_payment"],)]


def test_a_capture_then_reconciliations_delivery_of_it_is_a_duplicate_with_the_order(both):
    """The capture claims the payment's own key on either path; reconciliation's delivery of
    the same payment then answers duplicate, with the capture's order (docs/reconcile.md)."""
    slow, fast = both([capture(1), reconciled(1)])
    assert outcomes(slow) == ["processed", "duplicate"] and fast.fast == 1
    assert slow.answers[1][2] == "order of cart_1"
    assert len(fast.state["payhooks_payments"]) == 1


def test_reconciliations_delivery_then_the_webhook_is_a_duplicate(both):
    slow, fast = both([reconciled(1), capture(1)])
    assert outcomes(slow) == ["processed", "duplicate"] and fast.fast == 1
    assert slow.answers[1][2] == "order of cart_1"


def test_a_capture_at_the_expected_amount_claims_the_payments_key(both):
    slow, fast = both([capture(1), capture(2)], expected=PRICE)
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 2
    assert len(fast.state["payhooks_payments"]) == 2


def test_a_capture_the_expectation_does_not_meet_is_parked_on_both_paths(both):
    """The cart's price and the expectation differ (the merchant corrected it): the amount
    check parks the capture, whichever path sees it first."""
    slow, fast = both([capture(1)], expected=PRICE + 100)
    assert outcomes(slow) == ["parked"] and fast.fast == 0
    assert len(slow.state["mismatches"]) == 1


def test_another_delivery_of_a_payment_parked_for_its_amount_waits_for_its_replay(both):
    """The expectation corrected, another delivery of the parked payment meets it: on either
    path it is the parked one's duplicate (the payment's key is held), and the replay of the
    parked delivery, not this one, applies the payment and settles its mismatch."""
    corrected = "UPDATE payhooks_expectations SET amount_paise = 49900"
    first_post = capture(1, payment="pay_parked0000001")
    again = capture(1, payment="pay_parked0000001")
    slow, fast = both([first_post, corrected, again], expected=PRICE + 100)
    assert outcomes(slow) == ["parked", "duplicate"] and fast.fast == 0
    (mismatch,) = fast.state["mismatches"]
    assert '"pay_parked0000001", 50000, 49900, true, null]' in mismatch


def test_the_webhook_of_a_payment_settled_by_hand_is_its_copy_on_both_paths(both):
    """Reconciliation parked the payment for its amount and a person refunded and resolved it
    before its webhook came: the one statement declines the webhook (not the expected amount)
    and the general path records it ignored, the settlement named; no second mismatch."""
    from payhooks.intake.expectations import resolve

    found = reconciled(1)

    def refunded(conn: db.Connection) -> None:
        resolve(conn, "razorpay", found.event.event_id, "refunded in the dashboard")

    slow, fast = both([found, refunded, capture(1)], expected=PRICE + 100)
    assert outcomes(slow) == ["parked", "duplicate"] and fast.fast == 0
    assert len(fast.state["mismatches"]) == 1 and len(fast.state["resolutions"]) == 1
    assert "refunded in the dashboard" in fast.state["resolutions"][0]


def test_with_no_relay_set_up_neither_path_queues_an_event(both):
    slow, fast = both([capture(1), capture(2)])
    assert fast.fast == 2 and slow.state["relayed"] == [] and fast.state["relayed"] == []


def test_a_first_capture_queues_its_event_for_each_relay_channel_as_the_general_path(both):
    slow, fast = both([RELAYS, capture(1), capture(2)])
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 2
    relayed = [json.loads(row) for row in fast.state["relayed"]]
    assert sorted((row[1], row[2]) for row in relayed) == [
        ("nats", "relay:nats:razorpay:pay_first00000001:payment_captured"),
        ("nats", "relay:nats:razorpay:pay_first00000002:payment_captured"),
        ("rabbitmq", "relay:rabbitmq:razorpay:pay_first00000001:payment_captured"),
        ("rabbitmq", "relay:rabbitmq:razorpay:pay_first00000002:payment_captured"),
    ]
    message = json.loads(relayed[0][4])
    assert message["order_id"].startswith("order of cart_") and message["amount_paise"] == PRICE


def test_a_copy_and_reconciliations_report_of_a_capture_queue_no_second_event(both):
    """One logical event, one message per channel: the copy is a duplicate, and
    reconciliation's delivery of the same payment another delivery of the same event."""
    delivery = capture(1)
    slow, fast = both([RELAYS, delivery, delivery, reconciled(1)])
    assert outcomes(slow) == ["processed", "duplicate", "duplicate"] and fast.fast == 2
    assert len(fast.state["relayed"]) == 2


def test_events_the_general_path_applies_are_queued_with_the_first_captures(both):
    """A refund before its capture, then the capture: two events of one payment, each queued
    once per channel, on whichever path applied it."""
    refund = GATEWAY.razorpay(
        "refund.processed",
        payment_id="pay_first00000001",
        order_id="order_1",
        amount_paise=PRICE,
        refund_id="rfnd_first0001",
    )
    slow, fast = both([RELAYS, refund, capture(1), capture(2)])
    assert outcomes(slow) == ["processed", "processed", "processed"] and fast.fast == 1
    keys = sorted(json.loads(row)[2] for row in fast.state["relayed"] if '"nats"' in row)
    assert keys == [
        "relay:nats:razorpay:pay_first00000001:payment_captured",
        "relay:nats:razorpay:pay_first00000002:payment_captured",
        "relay:nats:razorpay:refund:rfnd_first0001",
    ]


def lost(n: int = 1, *, amount: int) -> Delivery:
    """Razorpay's report that the payment of ``capture(n)`` lost a dispute of ``amount``."""
    told = Disputed(what="lost", dispute_id=f"disp_first{n:04d}", payment_id=f"pay_first{n:08d}",
                    reference=f"order_{n}", amount_paise=amount, respond_by=1_767_312_000,
                    reported_at=1_767_225_600)  # fmt: skip
    return razorpay_sim.dispute_delivery(GATEWAY, told)


def test_a_dispute_lost_before_the_first_capture_is_on_the_payments_record(both):
    """The report of a lost dispute delivered before the capture (reordered, or the capture
    parked): on either path the payment's record counts what the dispute took back, so no
    refund takes it again."""
    slow, fast = both([lost(1, amount=10_000), capture(1)])
    assert outcomes(slow) == ["processed", "processed"] and fast.fast == 1
    [payment] = [json.loads(row) for row in fast.state["payhooks_payments"]]
    assert payment[-1] == 10_000


def test_a_first_captures_record_keeps_what_it_is_searched_by_on_both_paths(both):
    """The cart the shop gave ``expect``, the order the capture made and the payment's bank
    reference, on the payment's record (core 0036): the timeline's search finds it by them
    once the purge has taken its delivery and its expectation."""
    _, fast = both([capture(1)], expected=PRICE)
    assert fast.fast == 1
    [payment] = [json.loads(row) for row in fast.state["payhooks_payments"]]
    assert payment[9:12] == ["cart_1", "order of cart_1", bank_reference("pay_first00000001")]


def test_a_parked_capture_queues_nothing_until_it_is_applied(both):
    slow, fast = both([RELAYS, capture(9)])
    assert outcomes(slow) == ["parked"] and fast.state["relayed"] == []


CART_UPDATES = """SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
    WHERE relid = 'carts'::regclass"""


def cart_updates(conn: db.Connection) -> tuple[int, int]:
    """Updates of ``carts`` this far, and how many of them were HOT (the statistics this
    connection's own last transactions left, flushed first)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens at this statement's start
    [(updated, hot)] = conn.execute(CART_UPDATES.encode()).fetchall()
    return int(updated), int(hot)


@pytest.mark.parametrize("path", [first, general], ids=["one statement", "general"])
def test_marking_the_cart_paid_writes_no_index_entry(conn, path):
    """A HOT update (shop migration 0020): no column in any index of ``carts``, its
    predicates included, changes when a capture marks the cart paid."""
    for sql in SETUP:
        conn.execute(sql.encode(), {"per_slot": 10, "slots": 1, "quantity": 1})
    before = cart_updates(conn)
    receipt, _ = path(conn, capture(1))
    assert receipt.outcome is Outcome.PROCESSED
    updated, hot = cart_updates(conn)
    assert (updated - before[0], hot - before[1]) == (1, 1)

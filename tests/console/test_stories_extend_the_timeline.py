"""A cart's timeline is the core's timeline (``payhooks.timeline``) of its checkouts' gateway
orders plus what only the shop knows, added through the timeline's ``Extension``; the shop's
search finds through the core's ``find`` with the shop's ``LOOKUPS`` beside its own."""

from __future__ import annotations

from datetime import timedelta

from payhooks.events import Provider
from payhooks.operations import timeline
from payhooks.service.console import search, shop, stories
from tests.factories import ADAPTERS, deliver, purchase

LOGGED = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, event_id,
    event_type, payment_id, merchant_ref, body_bytes, duration_ms)
SELECT processed_at + %s, provider, %s, %s, true, event_id, event_type, payment_id,
       merchant_ref, 300, 1
FROM processed_webhooks WHERE event_id = %s
"""


def paid_and_retried(conn):
    """A captured cart whose capture the gateway sent twice (the log's two lines)."""
    buy = purchase(conn, Provider.RAZORPAY)
    event_id = deliver(conn, buy.captured()).event.event_id
    conn.execute(LOGGED, (timedelta(0), 200, "processed", event_id))
    conn.execute(LOGGED, (timedelta(seconds=1), 200, "duplicate", event_id))
    return buy


def test_a_carts_deliveries_are_its_gateway_orders_core_timeline(conn):
    buy = paid_and_retried(conn)
    core = timeline.story(conn, "razorpay", buy.reference)
    assert core is not None and len(core.lines) == 2
    told = stories.of_cart(conn, buy.cart_id, ADAPTERS)
    deliveries = [e for e in told.entries if e.kind == "delivery"]
    assert [(a.at, a.answer) for e in deliveries for a in e.attempts] == [
        (line.received_at, f"HTTP {line.status} {line.outcome}") for line in core.lines
    ]
    assert [e.delivery for e in deliveries] == [("razorpay", r.event_id) for r in core.records]


def test_the_shop_adds_its_checkout_payment_states_order_and_stock(conn):
    buy = paid_and_retried(conn)
    told = stories.of_cart(conn, buy.cart_id, ADAPTERS)
    kinds = [e.kind for e in told.entries]
    assert {"checkout", "payment", "order", "stock"} <= set(kinds)
    assert kinds.index("checkout") < kinds.index("delivery") < kinds.index("order")
    assert [p["payment_id"] for p in told.payments] == [buy.payment_id]


def test_a_checkout_the_core_has_no_expectation_of_is_found_by_the_shops_lookup(conn):
    buy = purchase(conn, Provider.RAZORPAY)
    conn.execute("DELETE FROM payhooks_expectations")
    assert timeline.find(conn, buy.reference) == []
    [found] = timeline.find(conn, buy.reference, search.LOOKUPS)
    assert (found.provider, found.gateway_order_id, found.matched) == (
        "razorpay",
        buy.reference,
        timeline.Matched.GATEWAY_ORDER,
    )
    assert [r.cart_id for r in search.search(conn, buy.reference)] == [buy.cart_id]


def test_a_payment_the_shop_keeps_finds_its_cart_when_its_records_are_purged(conn):
    buy = purchase(conn, Provider.RAZORPAY)
    deliver(conn, buy.captured())
    conn.execute("DELETE FROM processed_webhooks")
    conn.execute("DELETE FROM payhooks_payments")
    assert timeline.find(conn, buy.payment_id) == []
    assert [(r.cart_id, r.matched) for r in search.search(conn, buy.payment_id)] == [
        (buy.cart_id, timeline.Matched.PAYMENT)
    ]


def test_a_gateway_order_only_an_expectation_names_is_no_result(conn):
    """A checkout the cart dropped leaves the core's expectation (its reference is the cart
    id): searching the cart id or that gateway order finds the cart alone, never a reference
    page that has nothing to tell."""
    buy = purchase(conn, Provider.RAZORPAY)
    conn.execute("DELETE FROM checkouts WHERE cart_id = %s", (buy.cart_id,))
    assert [f.gateway_order_id for f in timeline.find(conn, buy.cart_id)] == [buy.reference]
    assert [(r.cart_id, r.reference) for r in search.search(conn, buy.cart_id)] == [
        (buy.cart_id, None)
    ]
    assert search.search(conn, buy.reference) == []


def test_a_delivery_that_leads_to_no_order_is_a_result_of_its_own(conn):
    """A delivery naming no order whose payment payhooks does not know (a refund of a payment
    from before payhooks, say) has no timeline: its delivery key still finds it, as its own
    page, never nothing."""
    buy = purchase(conn, Provider.RAZORPAY)
    event_id = deliver(conn, buy.captured()).event.event_id
    conn.execute("UPDATE processed_webhooks SET merchant_ref = NULL")
    conn.execute("DELETE FROM payhooks_payments")
    conn.execute("DELETE FROM payments")
    assert timeline.find(conn, event_id) == []
    [result] = search.search(conn, event_id)
    assert (result.matched, result.provider, result.event_id, result.cart_id) == (
        timeline.Matched.DELIVERY_KEY,
        "razorpay",
        event_id,
        None,
    )
    assert shop.address(result) == f"/deliveries/razorpay/{event_id}"


def test_a_delivery_settled_by_hand_says_so_with_the_note_on_the_shops_timeline(conn):
    """A capture for no checkout of the shop, parked, then settled from the console: its entry
    on the reference's timeline says it was settled by hand, when, and the person's words."""
    from payhooks.intake.expectations import resolve
    from tests.factories import GATEWAY

    reference = "order_" + "S" * 14
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_settled001", order_id=reference, amount_paise=49_900
    )
    receipt = deliver(conn, delivery)
    assert receipt.outcome == "parked"
    resolve(conn, "razorpay", receipt.event.event_id, "not ours: refunded at Razorpay")
    told = stories.of_reference(conn, "razorpay", reference, ADAPTERS)
    assert told is not None
    [entry] = [e for e in told.entries if e.kind == "delivery"]
    facts = dict(entry.facts)
    (settled_at,) = conn.execute("SELECT resolved_at FROM payhooks_resolutions").fetchone()
    # a moment, which the page writes in the console's zone as every time it shows (it was
    # written in UTC, the one time of the page that was)
    assert facts["settled by hand"] == settled_at, facts
    assert facts["their words"] == "not ours: refunded at Razorpay"
    assert entry.parked is None


def test_a_payment_whose_capture_was_purged_is_told_captured_before_its_refund(conn):
    """The cart's payment states are replayed from the stored deliveries: once the capture's
    was purged (its refund's, newer, kept), the cart's page said "Payment …: new → refunded"
    and nothing of its capture. The payment's record, kept a refund's year, tells it."""
    from tests.factories import GATEWAY

    buy = purchase(conn, Provider.RAZORPAY)
    captured = deliver(conn, buy.captured()).event.event_id
    refund = GATEWAY.razorpay("refund.processed", payment_id=buy.payment_id,
                              order_id=buy.reference, amount_paise=buy.amount_paise,
                              refund_id="rfnd_purged000001",
                              refund_amount_paise=buy.amount_paise)  # fmt: skip
    assert deliver(conn, refund).outcome.value == "processed"
    conn.execute("DELETE FROM processed_webhooks WHERE event_id = %s", (captured,))
    told = stories.of_cart(conn, buy.cart_id, ADAPTERS)
    states = [e.title for e in told.entries if e.kind == "payment"]
    assert states == [
        f"Payment {buy.payment_id}: new → captured",
        f"Payment {buy.payment_id}: captured → refunded",
    ]
    [first] = [e for e in told.entries if e.title.endswith("new → captured")]
    assert ("by", "its delivery, purged (the payment's record keeps it)") in first.facts

"""A payment found through a status API is a record like a webhook's: it carries the bank
reference the console searches by, reads again under its own key (a replay answers duplicate,
never fails), and tells its states on the console's timeline."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import psycopg
import pytest

import payhooks
from payhooks.console.health import alarms
from payhooks.events import EventKind, Provider, Received
from payhooks.gateways._reports import received as composing
from payhooks.intake import idempotency
from payhooks.intake.ingest import Outcome, ingest_received
from payhooks.intake.stored import received_again
from payhooks.service.console import stories
from payhooks.service.console.stories import Tone
from payhooks.service.shop.payments import apply_event
from payhooks.sim.gateway import bank_reference
from tests.factories import ADAPTERS, deliver, purchase
from tests.reconcile.conftest import paid_at_gateway


def reconciled_record(conn, rig, provider: Provider):
    buy = purchase(conn, provider)
    paid_at_gateway(rig.api, buy)
    rig.run()
    [(event_id,)] = conn.execute("SELECT event_id FROM processed_webhooks").fetchall()
    [record] = idempotency.stored(conn, event_id)
    return buy, record


@pytest.mark.parametrize("provider", list(Provider))
def test_a_reconciled_payment_carries_the_bank_reference_of_its_payment(conn, rig, provider):
    buy, record = reconciled_record(conn, rig, provider)
    [(bank_ref,)] = conn.execute("SELECT bank_ref FROM processed_webhooks").fetchall()
    assert record.event_id.startswith("reconcile:")
    assert bank_ref == bank_reference(buy.payment_id)


@pytest.mark.parametrize("provider", list(Provider))
def test_a_reconciled_record_reads_again_as_the_same_event_and_replays_as_a_duplicate(
    conn, rig, provider
):
    _, record = reconciled_record(conn, rig, provider)
    again = received_again(
        ADAPTERS,
        provider=record.provider,
        event_id=record.event_id,
        body=record.body,
        headers=record.headers,
    )
    assert again.event.event_id == record.event_id
    assert again.event.kind is EventKind.PAYMENT_CAPTURED
    assert again.body == record.body
    receipt = ingest_received(conn, again, apply_event)
    assert receipt.outcome is Outcome.DUPLICATE and receipt.order_id


def test_the_timeline_shows_the_payment_found_by_reconciliation(conn, rig):
    buy, record = reconciled_record(conn, rig, Provider.RAZORPAY)
    story = stories.of_cart(conn, buy.cart_id, ADAPTERS)
    titles = [entry.title for entry in story.entries]
    assert f"Razorpay status API: {record.event_type}" in titles
    assert f"Payment {buy.payment_id}: new → captured" in titles
    assert any(title.startswith("Order ") for title in titles)


def test_the_shops_timeline_says_what_the_api_said_of_a_forged_callback(conn, rig):
    """A PhonePe capture callback the API contradicts (the payment failed there): the story
    shows it refuted, in the bad tone, with why."""
    buy = purchase(conn, Provider.PHONEPE)
    deliver(conn, buy.captured())
    waiting = [e for e in stories.of_cart(conn, buy.cart_id, ADAPTERS).entries
               if ("status API", "not confirmed yet (asked 0 times)") in e.facts]  # fmt: skip
    assert len(waiting) == 1
    paid_at_gateway(rig.api, buy, "FAILED")
    rig.run()
    entries = stories.of_cart(conn, buy.cart_id, ADAPTERS).entries
    (refuted,) = [e for e in entries if any(f[0] == "status API" for f in e.facts)]
    said = dict(refuted.facts)["status API"]
    assert said.startswith("refuted: the status API reports another state")
    assert refuted.tone is Tone.BAD
    banners = [a.text for a in alarms(conn, datetime.now(UTC)) if a.provider == "phonepe"]
    assert len(banners) == 1 and "1 callback in the last day" in banners[0]


# --- a delivery payhooks composes is one by its key ---------------------------------------------


def _composed(payment_id: str, body: bytes) -> Received:
    return composing(Provider.RAZORPAY, json.loads(body), kind=EventKind.PAYMENT_CAPTURED,
                      status="captured", payment_id=payment_id, merchant_ref="order_same",
                      amount_paise=100, currency="INR")  # fmt: skip


def test_a_composed_delivery_is_never_a_copy_of_another_payments_record(database_url):
    """Two payments whose composed bodies are the same bytes (an API answer that names neither
    id in its entity): each is its own delivery under its own key, each reaches the handler;
    the same key again is the copy."""
    body = b'{"amount":100,"currency":"INR","status":"captured"}'
    seen: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        first, second = _composed("pay_A", body), _composed("pay_B", body)
        handler = payhooks.Hooks()

        @handler.on(EventKind.PAYMENT_CAPTURED)
        def paid(conn, event):
            seen.append(event.payment_id)

        assert ingest_received(conn, first, handler).outcome is Outcome.PROCESSED
        assert ingest_received(conn, second, handler).outcome is Outcome.PROCESSED
        assert ingest_received(conn, second, handler).outcome is Outcome.DUPLICATE
    assert seen == ["pay_A", "pay_B"]

"""Cashfree's pre-authorisation: with it enabled, a card or UPI payment is held on the
customer's account, reported ``payment_status`` SUCCESS all the same, and captured or voided
by the merchant later (released on its own after seven days). Such a hold is an authorisation,
never a capture: it places no order and takes no stock, and its capture, when it is reported,
places the order once (docs/providers.md, "Cashfree's pre-authorisation")."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import cashfree
from payhooks.intake.ingest import Outcome
from payhooks.sim.gateway import Delivery
from tests.factories import ADAPTERS, KEYS, deliver, purchase

ORDERS = "SELECT count(*) FROM orders WHERE cart_id = %s"
STATUS = "SELECT status FROM payments WHERE provider = 'cashfree' AND payment_id = %s"
STOCK = "SELECT stock FROM products WHERE sku = %s"
TIMESTAMP = "1746427759733"

HOLD: dict[str, Any] = {
    "is_captured": False, "payment_message": "PRE_AUTH|Transaction Success", "authorization": None,
}  # fmt: skip
"""A payment held, not captured, as Cashfree's documented sample of one reads (its Apple Pay
authorise call's answer): ``is_captured`` false, the ``PRE_AUTH|`` mark, no authorisation
object yet."""
CAPTURED: dict[str, Any] = {
    "is_captured": True,
    "payment_message": "PRE_AUTH|Transaction Success",
    "authorization": {
        "action": "CAPTURE", "status": "SUCCESS", "captured_amount": 1,
        "start_time": "2025-07-15T16:40:24+05:30", "end_time": "2025-07-18T16:40:24+05:30",
        "approve_by": None, "action_reference": "7525782703466058805917",
        "action_time": "2025-07-15T16:47:50.285775",
    },
}  # fmt: skip
"""The same payment once captured, as the Preauthorisation API's documented answer shows it."""
CAPTURE_PENDING: dict[str, Any] = {
    "is_captured": True,
    "payment_message": "Transaction successful",
    "authorization": {
        "action": "CAPTURE", "status": "PENDING", "captured_amount": 100,
        "start_time": "2022-02-09T18:04:34+05:30", "end_time": "2022-02-19T18:04:34+05:30",
        "approve_by": "2022-02-09T18:04:34+05:30", "action_reference": "6595231908096894505959",
        "action_time": "2022-08-03T16:09:51",
    },
}  # fmt: skip
"""The payment entity's documented sample (Get Payment by ID, Get Payments for an Order, the
``cashfree-pg`` SDK's docs): an ordinary UPI payment, ``is_captured`` true, beside an
authorisation object whose capture reads pending. Captured: the flag says so."""
VOIDED: dict[str, Any] = {
    "payment_message": "PRE_AUTH|Transaction Success",
    "authorization": {**CAPTURED["authorization"], "action": "VOID", "captured_amount": None},
}
"""A hold voided: its money released, never taken."""


def webhook(
    buy, fields: dict[str, Any], *, status: str = "SUCCESS", version: str = "2023-08-01"
) -> Delivery:
    """A signed PAYMENT_SUCCESS_WEBHOOK whose ``data.payment`` carries ``fields`` besides the
    usual ones; 2023-08-01 sends no ``x-idempotency-key``, so its key is derived."""
    payment = {
        "cf_payment_id": buy.payment_id, "payment_status": status, "payment_amount": "@A@",
        "payment_currency": "INR", "payment_time": "2025-07-15T16:40:24+05:30",
        "bank_reference": "519611740779", "auth_id": "16381",
        "payment_method": {"card": {"channel": "link", "card_number": "XXXXXXXXXXXX4738"}},
        "payment_group": "debit_card", **fields,
    }  # fmt: skip
    data = {
        "order": {"order_id": buy.reference, "order_amount": "@A@", "order_currency": "INR"},
        "payment": payment,
    }
    text = json.dumps({"data": data, "event_time": "2025-07-15T16:40:51+05:30",
                       "type": "PAYMENT_SUCCESS_WEBHOOK"})  # fmt: skip
    body = text.replace('"@A@"', f"{Decimal(buy.amount_paise) / 100:.2f}").encode()
    headers = {
        "x-webhook-timestamp": TIMESTAMP,
        "x-webhook-signature": cashfree.sign(body, TIMESTAMP, KEYS.cashfree),
        "x-webhook-version": version,
    }
    return Delivery(provider=Provider.CASHFREE, body=body, headers=headers, label="cf preauth")


def kind_of(delivery: Delivery) -> EventKind:
    return ADAPTERS[Provider.CASHFREE].parse(delivery.body, delivery.headers).kind


def test_a_held_payment_places_no_order_and_takes_no_stock(conn):
    buy = purchase(conn, Provider.CASHFREE, stock=5)
    receipt = deliver(conn, webhook(buy, HOLD))
    assert receipt.event.kind is EventKind.PAYMENT_AUTHORIZED
    assert receipt.outcome is Outcome.PROCESSED
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (0,)
    assert conn.execute(STATUS, (buy.payment_id,)).fetchone() == ("authorized",)
    assert conn.execute(STOCK, (buy.sku,)).fetchone() == (5,)


def test_the_capture_of_a_held_payment_places_the_order_once(conn):
    """Keyed apart from the hold (no idempotency header in 2023-08-01): the capture is never
    answered as the hold's duplicate, and its copy is."""
    buy = purchase(conn, Provider.CASHFREE, stock=5)
    held = deliver(conn, webhook(buy, HOLD))
    captured = deliver(conn, webhook(buy, CAPTURED))
    assert (held.outcome, captured.outcome) == (Outcome.PROCESSED, Outcome.PROCESSED)
    assert captured.event.kind is EventKind.PAYMENT_CAPTURED
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)
    assert conn.execute(STATUS, (buy.payment_id,)).fetchone() == ("captured",)
    assert deliver(conn, webhook(buy, CAPTURED)).outcome is Outcome.DUPLICATE
    assert conn.execute(STOCK, (buy.sku,)).fetchone() == (4,)


def test_a_hold_reported_after_its_capture_changes_nothing(conn):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, webhook(buy, CAPTURED))
    deliver(conn, webhook(buy, HOLD))
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)
    assert conn.execute(STATUS, (buy.payment_id,)).fetchone() == ("captured",)


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"is_captured": False}, EventKind.PAYMENT_AUTHORIZED),
        (HOLD, EventKind.PAYMENT_AUTHORIZED),
        ({"payment_message": "PRE_AUTH|Transaction Success"}, EventKind.PAYMENT_AUTHORIZED),
        (CAPTURE_PENDING, EventKind.PAYMENT_CAPTURED),
        ({**CAPTURE_PENDING, "is_captured": None}, EventKind.PAYMENT_AUTHORIZED),
        ({**CAPTURE_PENDING, "is_captured": False}, EventKind.PAYMENT_AUTHORIZED),
        (VOIDED, EventKind.PAYMENT_AUTHORIZED),
        (CAPTURED, EventKind.PAYMENT_CAPTURED),
        ({**CAPTURED, "is_captured": None}, EventKind.PAYMENT_CAPTURED),
        ({"is_captured": True}, EventKind.PAYMENT_CAPTURED),
        ({"is_captured": True, "authorization": None}, EventKind.PAYMENT_CAPTURED),
        ({"payment_message": "00::Transaction success"}, EventKind.PAYMENT_CAPTURED),
        ({}, EventKind.PAYMENT_CAPTURED),
    ],
    ids=[
        "not captured",
        "not captured, marked PRE_AUTH",
        "marked PRE_AUTH, captured unsaid",
        "captured, its authorisation object reading pending (the documented sample)",
        "its capture pending, captured unsaid",
        "its capture pending, not captured",
        "voided",
        "captured after its hold",
        "its capture succeeded, captured unsaid",
        "captured",
        "captured, no authorisation",
        "an ordinary payment",
        "nothing said of a capture",
    ],
)
def test_what_a_success_webhook_says_of_its_capture_decides_its_kind(conn, fields, kind):
    buy = purchase(conn, Provider.CASHFREE)
    assert kind_of(webhook(buy, fields)) is kind


def test_a_pending_payment_stays_pending_whatever_it_says_of_a_capture(conn):
    buy = purchase(conn, Provider.CASHFREE)
    assert kind_of(webhook(buy, HOLD, status="PENDING")) is EventKind.PAYMENT_PENDING


def test_a_hold_and_its_capture_are_two_deliveries_of_one_payment(conn):
    buy = purchase(conn, Provider.CASHFREE)
    parse = ADAPTERS[Provider.CASHFREE].parse
    held, captured = (webhook(buy, f) for f in (HOLD, CAPTURED))
    held_key = parse(held.body, held.headers).event_id
    captured_key = parse(captured.body, captured.headers).event_id
    assert captured_key == f"PAYMENT_SUCCESS_WEBHOOK:{buy.payment_id}"
    assert held_key == f"PAYMENT_SUCCESS_WEBHOOK:{buy.payment_id}:AUTHORIZED"

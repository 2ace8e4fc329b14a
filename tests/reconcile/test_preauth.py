"""Cashfree's pre-authorisation, as its status API reports it over a socket: a payment held
(``payment_status`` SUCCESS, ``is_captured`` false) is recorded authorised, with no order and
no stock taken; its capture, found by a later pass, places the order once
(docs/providers.md, "Cashfree's pre-authorisation")."""

from __future__ import annotations

from typing import Any

from payhooks.events import Provider
from payhooks.sim.gateway_api import GatewayApi
from payhooks.sim.gateways import cashfree
from payhooks.sim.gateways.base import Booked
from tests.factories import Purchase, purchase
from tests.reconcile.conftest import count, orders_of, sim

DUE_NOW = "UPDATE payhooks_reconcile SET next_attempt_at = now()"
STATUS = "SELECT status FROM payments WHERE provider = 'cashfree' AND payment_id = %s"
SALES = "SELECT coalesce(sum(-delta), 0) FROM inventory_movements WHERE reason = 'sale'"
EVENTS = "SELECT event_id FROM processed_webhooks WHERE payment_id = %s ORDER BY processed_at"


def booked(api: GatewayApi, buy: Purchase, **fields: Any) -> None:
    """The payment as Cashfree's books hold it: its entity as the double writes a successful
    one, with ``fields`` over it."""
    order = api.open_order(sim(buy))
    entity = cashfree.entity(
        Booked(order=order, payment_id=buy.payment_id, status=None, paid_paise=None, now=api.now)
    )
    order.payments = [{**entity, "payment_group": "debit_card", **fields}]


HOLD = {"is_captured": False, "payment_message": "PRE_AUTH|Transaction Success",
        "authorization": None}  # fmt: skip
"""Cashfree's documented sample of a payment held (docs/providers.md, [CP6])."""
CAPTURED = {
    "is_captured": True,
    "payment_message": "PRE_AUTH|Transaction Success",
    "authorization": {"action": "CAPTURE", "status": "SUCCESS", "captured_amount": 1,
                      "action_reference": "7525782703466058805917",
                      "action_time": "2025-07-15T16:47:50.285775"},
}  # fmt: skip


def test_a_held_payment_is_recorded_authorised_and_its_capture_ordered_once(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    booked(rig.api, buy, **HOLD)
    rig.run()
    assert orders_of(conn, buy.cart_id) == []
    assert conn.execute(STATUS, (buy.payment_id,)).fetchone() == ("authorized",)
    assert count(conn, SALES) == 0
    booked(rig.api, buy, **CAPTURED)  # the merchant captured it in Cashfree's dashboard
    conn.execute(DUE_NOW)
    rig.run()
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert conn.execute(STATUS, (buy.payment_id,)).fetchone() == ("captured",)
    assert count(conn, SALES) == 1
    keys = [row[0] for row in conn.execute(EVENTS, (buy.payment_id,))]
    assert keys == [f"reconcile:{buy.payment_id}:AUTHORIZED", f"reconcile:{buy.payment_id}:SUCCESS"]


def test_a_hold_still_held_is_asked_about_again_and_never_ordered(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    booked(rig.api, buy, **HOLD)
    rig.run()
    conn.execute(DUE_NOW)
    tally = rig.run()
    assert tally.examined[Provider.CASHFREE] == 1
    assert orders_of(conn, buy.cart_id) == []

"""The reference service never applies a callback that rests on a static credential as it
came, on any path: the one-statement first capture included. Over a real socket: PhonePe's and
Juspay's capture callbacks for a checked-out cart, at its price, are answered ``confirming``
and make no order; the order comes once the status API reports the payment."""

from __future__ import annotations

import pytest

from payhooks.events import Provider
from payhooks.intake.ingest import receive
from payhooks.service.shop import captures
from payhooks.sim.gateway import Delivery
from tests.factories import ADAPTERS, purchase
from tests.reconcile.conftest import orders_of

CONFIRMED_BY_API = (Provider.PHONEPE, Provider.JUSPAY)


@pytest.mark.parametrize("provider", CONFIRMED_BY_API)
def test_a_capture_callback_is_answered_confirming_and_orders_nothing(service, conn, provider):
    buy = purchase(conn, provider)
    delivery: Delivery = buy.captured()
    with service.client() as client:
        answer = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert (answer.status_code, answer.json()["status"]) == (200, "confirming")
    assert orders_of(conn, buy.cart_id) == []
    waiting = conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone()
    assert waiting == (1,)


@pytest.mark.parametrize("provider", CONFIRMED_BY_API)
def test_the_one_statement_path_declines_an_unconfirmed_capture(conn, provider):
    buy = purchase(conn, provider)
    delivery = buy.captured()
    adapter = ADAPTERS[provider]
    received = receive(adapter, delivery.body, delivery.headers)
    assert received.event.unconfirmed
    assert captures.first_capture(conn, received) is None
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (0,)

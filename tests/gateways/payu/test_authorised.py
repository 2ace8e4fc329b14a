"""PayU's ``auth`` state: a payment the bank authorised and debited, but PayU has not captured,
is reported ``status`` success with ``unmappedstatus`` auth (PayU's payment state
explanations). It is an authorisation, never a capture: it places no order and takes no stock,
and its capture, posted or reported later, places the order once (docs/providers.md, "PayU's
payment states"). Posts in the shape of PayU's, ``verify_payment`` answers in the shape of its
sample, on real PostgreSQL and the status API double over a loopback socket."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import payu
from payhooks.gateways._reports import one_of
from payhooks.gateways.payu import status
from payhooks.intake.ingest import Outcome
from payhooks.sim.gateway import Delivery
from tests.factories import ADAPTERS, KEYS, Purchase, deliver, purchase
from tests.reconcile.conftest import count, orders_of, sim

DATA = Path(__file__).resolve().parents[2] / "data" / "payu"
ORDERS = "SELECT count(*) FROM orders WHERE cart_id = %s"
STATUS = "SELECT status FROM payments WHERE provider = 'payu' AND payment_id = %s"
STOCK = "SELECT stock FROM products WHERE sku = %s"
SALES = "SELECT coalesce(sum(-delta), 0) FROM inventory_movements WHERE reason = 'sale'"
EVENTS = "SELECT event_id FROM processed_webhooks WHERE payment_id = %s ORDER BY processed_at"
DUE_NOW = "UPDATE payhooks_reconcile SET next_attempt_at = now()"


def post(buy: Purchase, unmapped: str | None, *, state: str = "success") -> Delivery:
    """A signed PayU post in the shape of its sample (the form's fields, in its order), its
    ``unmappedstatus`` ``unmapped`` (left out when None): a field outside the hash."""
    amount = f"{Decimal(buy.amount_paise) / 100:.2f}"
    fields = {
        "mihpayid": buy.payment_id, "mode": "CC", "status": state, "unmappedstatus": unmapped,
        "key": KEYS.payu_key, "txnid": buy.reference, "amount": amount,
        "addedon": "2026-02-11 10:24:37", "productinfo": "Assam tea, 250 g",
        "firstname": "Asha", "email": "buyer@example.com", "phone": "9999999999",
        **{f"udf{n}": "" for n in range(1, 11)},
        "error": "E000", "error_Message": "No Error", "net_amount_debit": amount,
        "bank_ref_num": "618204937215",
    }  # fmt: skip
    signed = {name: value for name, value in fields.items() if value is not None}
    signed["hash"] = payu.reverse_hash(signed, KEYS.payu_salt)
    return Delivery(
        provider=Provider.PAYU,
        body=payu.encode(signed),
        headers={"content-type": "application/x-www-form-urlencoded"},
        label=f"payu {state} {unmapped}",
    )


def parsed(delivery: Delivery):
    return ADAPTERS[Provider.PAYU].parse(delivery.body, delivery.headers)


# --- the post ----------------------------------------------------------------------------------


def test_a_payment_payu_only_authorised_places_no_order_and_takes_no_stock(conn):
    buy = purchase(conn, Provider.PAYU, stock=5)
    receipt = deliver(conn, post(buy, "auth"))
    assert receipt.event.kind is EventKind.PAYMENT_AUTHORIZED
    assert receipt.outcome is Outcome.PROCESSED
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (0,)
    assert conn.execute(STATUS, (buy.reference,)).fetchone() == ("authorized",)
    assert conn.execute(STOCK, (buy.sku,)).fetchone() == (5,)


def test_the_capture_posted_after_the_authorisation_places_the_order_once(conn):
    buy = purchase(conn, Provider.PAYU, stock=5)
    held = deliver(conn, post(buy, "auth"))
    captured = deliver(conn, post(buy, "captured"))
    assert (held.outcome, captured.outcome) == (Outcome.PROCESSED, Outcome.PROCESSED)
    assert captured.event.kind is EventKind.PAYMENT_CAPTURED
    assert conn.execute(ORDERS, (buy.cart_id,)).fetchone() == (1,)
    assert conn.execute(STATUS, (buy.reference,)).fetchone() == ("captured",)
    assert deliver(conn, post(buy, "captured")).outcome is Outcome.DUPLICATE
    assert conn.execute(STOCK, (buy.sku,)).fetchone() == (4,)


def test_an_authorisation_and_its_capture_are_two_deliveries_of_one_payment(conn):
    buy = purchase(conn, Provider.PAYU)
    assert parsed(post(buy, "auth")).event_id == f"{buy.reference}:AUTHORIZED"
    assert parsed(post(buy, "captured")).event_id == f"{buy.reference}:success"


@pytest.mark.parametrize(
    ("state", "unmapped", "kind"),
    [
        ("success", "auth", EventKind.PAYMENT_AUTHORIZED),
        ("success", "AUTH", EventKind.PAYMENT_AUTHORIZED),
        ("success", "captured", EventKind.PAYMENT_CAPTURED),
        ("success", None, EventKind.PAYMENT_CAPTURED),
        ("failure", "userCancelled", EventKind.PAYMENT_FAILED),
        ("failure", "bounced", EventKind.PAYMENT_FAILED),
        ("failure", "dropped", EventKind.PAYMENT_FAILED),
        ("failure", "failed", EventKind.PAYMENT_FAILED),
        ("failure", "autoRefund", EventKind.PAYMENT_FAILED),
        ("pending", "initiated", EventKind.PAYMENT_PENDING),
        ("pending", "in progress", EventKind.PAYMENT_PENDING),
        ("pending", "pending", EventKind.PAYMENT_PENDING),
        ("pending", "auth", EventKind.PAYMENT_PENDING),
    ],
)
def test_payus_state_table_decides_the_kind(conn, state, unmapped, kind):
    """``status`` is the state PayU says to map the order on; ``auth`` alone, under success,
    says the money is not captured."""
    buy = purchase(conn, Provider.PAYU)
    assert parsed(post(buy, unmapped, state=state)).kind is kind


# --- the status API ----------------------------------------------------------------------------


def test_verify_payment_reporting_auth_is_an_authorisation_keyed_apart_from_the_capture():
    body = (DATA / "verify_payment_auth.json").read_bytes()
    (found,) = status.payments("ph_auth000000001", body).received
    event = found.event
    assert (event.kind, event.payment_id, event.amount_paise) == (
        EventKind.PAYMENT_AUTHORIZED, "ph_auth000000001", 49_900,
    )  # fmt: skip
    assert event.event_id == "reconcile:ph_auth000000001:AUTHORIZED"
    assert event.attempt_id == "403993715531207764"
    again = one_of(status.stored(event.event_id, json.loads(found.body)), Provider.PAYU,
                   event.event_id)  # fmt: skip
    assert again.event == event


def test_an_authorisation_stored_as_a_capture_by_an_earlier_release_still_reads_back():
    """An earlier release stored this entry as a capture, under ``reconcile:<txnid>:success``:
    the delivery's page, the timeline and ``payhooks replay`` read it again as it was applied
    (it failed: "stored payment does not read as reconcile:...:success")."""
    body = json.loads((DATA / "verify_payment_auth.json").read_bytes())
    entity = body["transaction_details"]["ph_auth000000001"]
    key = "reconcile:ph_auth000000001:success"
    again = one_of(status.stored(key, entity), Provider.PAYU, key)
    assert (again.event.kind, again.event.event_id) == (EventKind.PAYMENT_CAPTURED, key)


def test_check_payment_reporting_auth_is_an_authorisation_of_that_payment():
    entity = json.loads((DATA / "verify_payment_auth.json").read_bytes())
    details = entity["transaction_details"]["ph_auth000000001"]
    answer = {"status": 1, "msg": "Transaction Fetched Successfully",
              "transaction_details": {**details, "mihpayid": 403993715531207764}}  # fmt: skip
    (found,) = status.checked("403993715531207764", json.dumps(answer).encode()).received
    assert found.event.kind is EventKind.PAYMENT_AUTHORIZED
    assert found.event.event_id == "reconcile:403993715531207764:AUTHORIZED"


def test_a_payment_reconciliation_finds_authorised_is_ordered_only_once_captured(conn, rig):
    buy = purchase(conn, Provider.PAYU)
    rig.api.pay(sim(buy), buy.payment_id)
    entity = rig.api.payment_of(Provider.PAYU, buy.payment_id)
    rig.api.book(sim(buy), {**entity, "unmappedstatus": "auth"})
    rig.run()
    assert orders_of(conn, buy.cart_id) == []
    assert conn.execute(STATUS, (buy.reference,)).fetchone() == ("authorized",)
    assert count(conn, SALES) == 0
    rig.api.book(sim(buy), {**entity, "unmappedstatus": "captured"})  # PayU captured it
    conn.execute(DUE_NOW)
    rig.run()
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert conn.execute(STATUS, (buy.reference,)).fetchone() == ("captured",)
    assert count(conn, SALES) == 1
    keys = [row[0] for row in conn.execute(EVENTS, (buy.reference,))]
    assert keys == [f"reconcile:{buy.reference}:AUTHORIZED", f"reconcile:{buy.reference}:success"]

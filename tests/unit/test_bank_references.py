"""The bank reference a customer reads off their statement, per gateway: found where each
gateway puts it, and never a reason to refuse a payment when it is odd."""

from __future__ import annotations

import json
from typing import Any

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import razorpay
from payhooks.gateways.cashfree import Cashfree, sign
from payhooks.gateways.payu import PayU, encode, reverse_hash
from payhooks.gateways.razorpay import Razorpay
from payhooks.intake.ingest import receive, storable
from tests.gateways.cashfree.test_adapter import TIMESTAMP, VECTOR, refund_body
from tests.gateways.razorpay.test_adapter import sdk_body

RAZORPAY = Razorpay(secrets=("whsec_test",))


def razorpay_event(
    entity: dict[str, Any], event: str = "payment.captured", refund: dict[str, Any] | None = None
) -> bytes:
    payment = {"id": "pay_1", "amount": 100, "currency": "INR", "order_id": "order_1", **entity}
    payload: dict[str, Any] = {"payment": {"entity": payment}}
    if refund is not None:
        payload["refund"] = {"entity": {"payment_id": "pay_1", **refund}}
    return json.dumps({"event": event, "payload": payload}).encode()


@pytest.mark.parametrize(
    ("acquirer_data", "expected"),
    [
        ({"rrn": "418734592212", "upi_transaction_id": "AXL1"}, "418734592212"),  # UPI
        ({"bank_transaction_id": "5733649"}, "5733649"),  # netbanking
        ({"auth_code": "828553", "rrn": "434617298127"}, "434617298127"),  # card
        ({"auth_code": "828553"}, None),  # no reference the customer sees
        ({}, None),
    ],
)
def test_razorpay_reference_is_the_rrn_else_the_bank_transaction_id(acquirer_data, expected):
    event = RAZORPAY.parse(razorpay_event({"acquirer_data": acquirer_data}), {})
    assert event.bank_ref == expected


def test_razorpay_sdk_fixture_has_no_reference_and_still_parses():
    assert RAZORPAY.parse(sdk_body(), {}).bank_ref is None


def test_razorpay_refund_reference_is_the_refunds_arn_not_the_payments_rrn():
    body = razorpay_event(
        {"acquirer_data": {"rrn": "418734592212"}},
        event="refund.processed",
        refund={"id": "rfnd_1", "amount": 100, "acquirer_data": {"arn": "74836402198004523"}},
    )
    event = RAZORPAY.parse(body, {})
    assert event.kind is EventKind.REFUND_PROCESSED
    assert event.bank_ref == "74836402198004523"


def test_cashfree_reference_is_bank_reference_in_the_vector_body():
    body = VECTOR["body"].encode()
    event = Cashfree(secrets=("s",)).parse(body, {})
    assert event.bank_ref == "234928698581"


def test_cashfree_refund_reference_is_its_arn():
    event = Cashfree(secrets=("s",)).parse(refund_body(refund_arn="20240115123456"), {})
    assert event.kind is EventKind.REFUND_PROCESSED
    assert event.bank_ref == "20240115123456"


@pytest.mark.parametrize("name", ["bank_ref_num", "bank_ref_no"])
def test_payu_reference_is_bank_ref_num_or_bank_ref_no(name):
    fields = {
        "key": "gtKFFx",
        "txnid": "t1",
        "amount": "10.00",
        "productinfo": "p",
        "firstname": "A",
        "email": "a@example.com",
        "status": "success",
        "mihpayid": "403993715531",
        name: "ICN1234",
    }
    fields["hash"] = reverse_hash(fields, "salt")
    received = receive(PayU(merchant_key="gtKFFx", salts=("salt",)), encode(fields), {})
    assert received.event.bank_ref == "ICN1234"
    assert received.event.provider is Provider.PAYU


@pytest.mark.parametrize(
    "odd",
    [
        {"rrn": 12},
        {"rrn": ["x"]},
        {"rrn": "  "},
        {"rrn": "a\nb"},
        {"rrn": "9" * 65},
        {"rrn": "4187\ud800"},
    ],
)
def test_an_odd_reference_is_left_out_and_the_payment_still_counts(odd):
    """A number is taken as its digits; anything else unusable is dropped, not refused."""
    body = razorpay_event({"acquirer_data": odd})
    event = receive(
        RAZORPAY, body, {"x-razorpay-signature": razorpay.sign(body, "whsec_test")}
    ).event
    assert event.kind is EventKind.PAYMENT_CAPTURED
    assert event.bank_ref == ("12" if odd["rrn"] == 12 else None)


def test_storable_keeps_a_plain_reference():
    event = RAZORPAY.parse(razorpay_event({"acquirer_data": {"rrn": "418734592212"}}), {})
    assert storable(event).bank_ref == "418734592212"


def test_cashfree_signed_delivery_keeps_its_reference_through_receive():
    body = VECTOR["body"].encode()
    headers = {"x-webhook-timestamp": TIMESTAMP, "x-webhook-signature": sign(body, TIMESTAMP, "k")}
    assert receive(Cashfree(secrets=("k",)), body, headers).event.bank_ref == "234928698581"

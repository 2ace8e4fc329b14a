"""Every gateway's status readers (``src/payhooks/gateways/*/status.py``), each given its
documented answer with one field of the wrong JSON type (a number for a string, a string for a
number, null, a list, an object) or left out: each says the answer does not read (its
``MalformedPayload``; a client's ``GatewayApiError``), never a ``TypeError``, ``KeyError`` or
``AttributeError``, which a pass logs as a failure of its own (``confirm_apply_failed``) rather
than as the gateway's answer it cannot read."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from payhooks.events import Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._refunds import Refund
from payhooks.gateways._status import client as status_client
from payhooks.gateways.cashfree import status as cashfree
from payhooks.gateways.juspay import status as juspay
from payhooks.gateways.payu import status as payu
from payhooks.gateways.phonepe import status as phonepe
from payhooks.gateways.razorpay import status as razorpay
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload
from tests import loopback

DATA = Path(__file__).resolve().parents[1] / "data"
WRONG: tuple[object, ...] = (7700112233, "7700112233", None, [1], {"a": 1}, ...)
"""A number, a numeric string, null, a list, an object; ``...``: the field left out."""
ORDER = TXNID = "ph_0123456789abcdef"
MIHPAYID, REQUEST_ID = "403993715529184406", "129450317"


def _juspay_order() -> dict[str, Any]:
    """Juspay's Order Status sample (a card payment and its refund), its ``//`` comments out."""
    text = (DATA / "juspay" / "order-status" / "card.json").read_text()
    return dict(json.loads(re.sub(r"\s//\s[^\n]*", "", text), parse_float=Decimal))


def _refund(provider: Provider) -> Refund:
    """An intent sent, as the sender asks about it (a PayU one by its recorded mihpayid alone,
    so that sending it asks nothing first)."""
    order = None if provider is Provider.PAYU else ORDER
    return Refund(
        provider=provider, idempotency_key="rf_key_1", payment_id="pay_1", gateway_order_id=order,
        amount_paise=1_800, currency="INR", captured_paise=49_900, reason="asked",
        requested_by="shop", attempts=1, attempt_id=MIHPAYID, gateway_refund_id=REQUEST_ID,
    )  # fmt: skip


def _answering(provider: Provider, body: bytes) -> Any:
    """``provider``'s status client, every call it makes answered 200 with ``body``."""

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=httpx.ByteStream(body))  # streamed, as the network

    credentials = ApiCredentials(provider=provider, id="id", secret="secret",
                                 base_url="https://api.gateway.test")  # fmt: skip
    return status_client(credentials, loopback.Client(transport=httpx.MockTransport(reply)))


PAYU_ENTITY = {
    "mihpayid": MIHPAYID, "request_id": "", "bank_ref_num": "527013524405", "amt": "499.00",
    "txnid": TXNID, "status": "success", "unmappedstatus": "captured", "mode": "UPI",
}  # fmt: skip
PHONEPE_ATTEMPT = {"transactionId": "OM2403282020198651071949", "state": "COMPLETED",
                   "amount": 5000, "timestamp": 1, "paymentMode": "UPI_QR",
                   "rail": {"type": "UPI", "utr": "614029768413"}}  # fmt: skip
READERS: dict[str, tuple[Callable[[bytes], object], object]] = {
    "payu verify_payment": (
        lambda b: payu.payments(TXNID, b),
        {"status": 1, "msg": "1 out of 1", "transaction_details": {TXNID: PAYU_ENTITY}},
    ),
    "payu check_payment": (
        lambda b: payu.checked(MIHPAYID, b),
        {"status": 1, "msg": "Transaction Fetched Successfully",
         "transaction_details": {**PAYU_ENTITY, "mihpayid": int(MIHPAYID)}},
    ),
    "payu check_action_status": (
        lambda b: payu.refund_status(REQUEST_ID, TXNID, b),
        json.loads((DATA / "payu" / "check_action_status_success.json").read_bytes()),
    ),
    "payu a refund's action status": (
        lambda b: _answering(Provider.PAYU, b).refund_status(_refund(Provider.PAYU)),
        json.loads((DATA / "payu" / "check_action_status_success.json").read_bytes()),
    ),
    "payu a refund queued": (
        lambda b: _answering(Provider.PAYU, b).send_refund(_refund(Provider.PAYU)),
        {"status": 1, "msg": "Refund Request Queued", "request_id": REQUEST_ID,
         "bank_ref_num": None, "mihpayid": int(MIHPAYID), "error_code": 102},
    ),
    "phonepe order status": (
        lambda b: phonepe.order_status(ORDER, b),
        {"orderId": "OMO2403282020198641071317", "merchantOrderId": ORDER, "state": "COMPLETED",
         "amount": 5000, "currency": "INR", "paymentDetails": [PHONEPE_ATTEMPT]},
    ),
    "phonepe refund status": (
        lambda b: phonepe.refund_status("rf_1", b),
        {"merchantId": "M1", "merchantRefundId": "rf_1", "originalMerchantOrderId": ORDER,
         "refundId": "OMR7878098045517540996", "amount": 5000, "state": "COMPLETED",
         "paymentDetails": [{**PHONEPE_ATTEMPT, "transactionId": "OMR7896789"}]},
    ),
    "phonepe token": (
        lambda b: phonepe.token_of(b, 0.0),
        {"access_token": "t", "token_type": "O-Bearer", "issued_at": 0, "expires_at": 3600},
    ),
    "juspay order status": (lambda b: juspay.order_report("TS1732037461", b), _juspay_order()),
    "razorpay payments": (
        lambda b: razorpay.payments(ORDER, b),
        {"entity": "collection", "count": 1, "items": [
            {"id": "pay_1", "entity": "payment", "amount": 49_900, "currency": "INR",
             "status": "captured", "order_id": ORDER, "acquirer_data": {"rrn": "1234"}}]},
    ),
    "razorpay a refund": (
        lambda b: _answering(Provider.RAZORPAY, b).refund_status(_refund(Provider.RAZORPAY)),
        {"id": REQUEST_ID, "entity": "refund", "amount": 1_800, "payment_id": "pay_1",
         "notes": {"payhooks_key": "rf_key_1"}, "status": "processed"},
    ),
    "cashfree payments": (
        lambda b: cashfree.payments(ORDER, b),
        [{"cf_payment_id": 5114917039291, "order_id": ORDER, "payment_status": "SUCCESS",
          "order_amount": 499, "payment_amount": 499, "order_currency": "INR",
          "bank_reference": "1234", "payment_offers": [], "payment_surcharge": None}],
    ),
    "cashfree order": (
        lambda b: cashfree.order_expired(b, ORDER),
        {"cf_order_id": 2149460581, "order_id": ORDER, "order_status": "EXPIRED"},
    ),
    "cashfree a refund": (
        lambda b: _answering(Provider.CASHFREE, b).refund_status(_refund(Provider.CASHFREE)),
        {"cf_refund_id": "1553338", "refund_id": "rf_key_1", "order_id": ORDER,
         "refund_amount": 18, "refund_status": "SUCCESS"},
    ),
}  # fmt: skip


def _fields(node: object, path: tuple[object, ...] = ()) -> Iterator[tuple[object, ...]]:
    """The path to every value in ``node``, nested ones included."""
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for name, value in items:
        yield (*path, name)
        yield from _fields(value, (*path, name))


def _with(doc: object, path: tuple[object, ...], value: object) -> bytes:
    """``doc`` with the field at ``path`` set to ``value`` (``...``: left out)."""
    changed = copy.deepcopy(doc)
    node: Any = changed
    for name in path[:-1]:
        node = node[name]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return json.dumps(changed, default=str).encode()


@pytest.mark.parametrize("reader", list(READERS))
def test_a_field_of_the_wrong_json_type_is_an_answer_that_does_not_read(reader):
    read, answer = READERS[reader]
    read(json.dumps(answer, default=str).encode())  # the documented answer reads
    crashed = []
    for path in _fields(answer):
        for value in WRONG:
            try:
                read(_with(answer, path, value))
            except (MalformedPayload, GatewayApiError):
                pass
            except Exception as exc:  # what the test is looking for
                crashed.append(f"{'.'.join(map(str, path))} = {value!r}: {exc!r}")
    assert crashed == []

"""PayU's refund callbacks: JSON that nothing signs (docs.payu.in, "Refund Status Callback"). A
callback for the configured key is accepted and read into a refund to confirm, never applied
as it came; anything else in JSON is refused, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways.payu import PayU
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

DATA = Path(__file__).resolve().parents[2] / "data" / "payu"
SUCCESS = (DATA / "refund_callback_success.json").read_bytes()
FAILURE = (DATA / "refund_callback_failure.json").read_bytes()


def adapter(key: str = "Qm4XvA") -> PayU:
    return PayU(merchant_key=key, salts=("salt",))


def edited(body: bytes, **changes: object) -> bytes:
    doc = json.loads(body)
    doc.update(changes)
    return json.dumps({k: v for k, v in doc.items() if v is not ...}).encode()


def test_a_success_callback_of_the_documented_shape_is_a_refund_to_confirm():
    payu = adapter()
    payu.verify(SUCCESS, {})
    event = payu.parse(SUCCESS, {})
    assert (event.provider, event.kind, event.event_type) == (
        Provider.PAYU, EventKind.REFUND_PROCESSED, "refund.success",
    )  # fmt: skip
    assert event.unconfirmed  # nothing signs it: PayU's check_action_status decides
    assert event.event_id == "ORDER_45820917_1731052866:12931740588:refund.success"
    assert (event.refund_id, event.refund_amount_paise) == ("12931740588", 23_800)
    # a PayU payment is its txnid in payhooks, as for the payment posts
    assert event.payment_id == event.merchant_ref == "ORDER_45820917_1731052866"
    assert (event.amount_paise, event.currency, event.bank_ref) == (None, "INR", "412608517394")


def test_a_failure_callback_moved_no_money_and_is_kept_as_other():
    payu = adapter("tR8bWe")
    payu.verify(FAILURE, {})
    event = payu.parse(FAILURE, {})
    assert (event.kind, event.event_id) == (
        EventKind.OTHER,
        "KTS2411080027QX7BM06:18302265417:refund.failure",
    )
    assert event.unconfirmed and event.refund_amount_paise == 5_600


def test_a_refund_key_never_takes_a_payment_posts_key():
    """A payment post's key is ``<txnid>:<status>``, its status hashed (success, failure,
    pending), a resent one's ``<txnid>:success:<mihpayid>``: a refund's ends
    ``:refund.<status>``."""
    event = adapter().parse(SUCCESS, {})
    assert event.event_id.rsplit(":", 1)[1] == "refund.success"


def test_a_callback_for_another_merchant_key_is_refused():
    with pytest.raises(SignatureMismatch, match="key is not the configured key"):
        adapter("gtKFFx").verify(SUCCESS, {})


@pytest.mark.parametrize("key", [..., None, 7, ""])
def test_a_callback_without_a_usable_key_is_refused(key):
    with pytest.raises(SignatureMismatch, match="key is not the configured key"):
        adapter().verify(edited(SUCCESS, key=key), {})


@pytest.mark.parametrize("action", ["capture", "cancel", None, ...])
def test_a_json_post_other_than_a_refund_callback_is_refused(action):
    with pytest.raises(SignatureMismatch, match=r"only as a refund callback \(action: refund\)"):
        adapter().verify(edited(SUCCESS, action=action), {})


@pytest.mark.parametrize("body", [b"{not json", b"{}" + b"]", b' {"a": NaN}'])
def test_json_that_does_not_read_is_refused_as_unauthenticated(body):
    with pytest.raises(SignatureMismatch, match="refund callback: body is not valid JSON"):
        adapter().verify(body, {})


def test_a_request_id_written_as_a_number_or_with_spaces_is_the_same_id():
    for written in (12931740588, " 12931740588 "):
        event = adapter().parse(edited(SUCCESS, request_id=written), {})
        assert event.event_id == "ORDER_45820917_1731052866:12931740588:refund.success"


@pytest.mark.parametrize(
    ("changes", "problem"),
    [({"request_id": ...}, "request_id"), ({"merchantTxnId": ""}, "merchantTxnId"),
     ({"amt": ...}, "amt"), ({"amt": "2,38.00"}, "amount is not a rupee amount"),
     ({"status": ...}, "status is missing"), ({"request_id": [1]}, "request_id is not a string")],
)  # fmt: skip
def test_a_success_missing_what_it_is_about_is_malformed(changes, problem):
    with pytest.raises(MalformedPayload, match=problem):
        adapter().parse(edited(SUCCESS, **changes), {})


def test_an_amount_written_as_a_json_number_is_read_exactly():
    event = adapter().parse(SUCCESS.replace(b'"amt": "238.00"', b'"amt": 238.50'), {})
    assert event.refund_amount_paise == 23_850


def test_a_payment_post_is_still_read_as_a_form():
    with pytest.raises(SignatureMismatch, match="hash missing"):
        adapter().verify(b"key=Qm4XvA&status=success&txnid=t1&amount=1.00", {})


def test_a_refund_callback_never_takes_a_key_in_reconciliations_key_space():
    """A txnid is the sender's to write: ``reconcile`` would make ``reconcile:<id>:…``, a key
    of the space payhooks' own reconciliation mints; it is moved under ``payu:``."""
    event = adapter().parse(edited(SUCCESS, merchantTxnId="reconcile"), {})
    assert event.event_id == "payu:reconcile:12931740588:refund.success"


def test_a_refund_callback_whose_txnid_holds_a_colon_is_keyed_on_its_body():
    import hashlib

    raw = edited(SUCCESS, merchantTxnId="ORDER_1:12931740588")
    assert adapter().parse(raw, {}).event_id == "refund.success:" + hashlib.sha256(raw).hexdigest()

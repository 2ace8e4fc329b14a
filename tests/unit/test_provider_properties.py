"""Laws every adapter keeps: what is signed verifies, any change breaks it, keys are whole."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from payhooks.events import Event
from payhooks.gateways import cashfree, payu, razorpay
from payhooks.gateways.cashfree import Cashfree
from payhooks.gateways.payu import PayU
from payhooks.gateways.razorpay import Razorpay
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

secrets = st.text(min_size=1, max_size=40)
secret_lists = st.lists(secrets, min_size=1, max_size=4, unique=True)
timestamps = st.from_regex(r"[0-9]{10,13}", fullmatch=True)
ids = st.from_regex(r"[A-Za-z0-9_]{1,20}", fullmatch=True).filter(lambda s: s != "None")
maybe_ids = st.one_of(st.none(), ids)


@st.composite
def one_byte_changed(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with exactly one byte replaced by a different one."""
    i = draw(st.integers(0, len(data) - 1))
    new = draw(st.integers(0, 255).filter(lambda b: b != data[i]))
    return data[:i] + bytes([new]) + data[i + 1 :]


@st.composite
def one_char_changed(
    draw: st.DrawFn, text: str, characters: st.SearchStrategy[str] | None = None
) -> str:
    """``text`` with exactly one character replaced by a different one (of ``characters``)."""
    i = draw(st.integers(0, len(text) - 1))
    pool = st.characters() if characters is None else characters
    new = draw(pool.filter(lambda c: c != text[i]))
    return text[:i] + new + text[i + 1 :]


FORM_CHARACTERS = st.characters(exclude_categories=("Cs",))
"""What a form post can carry: never a lone surrogate, which no form encodes (UTF-8 refuses it,
in the test's own ``payu.encode``). A header may hold one, as a framework passes it on: the
headers' tests draw every character."""


# --- Razorpay -------------------------------------------------------------------------------


@given(body=st.binary(), secret=secrets)
def test_razorpay_verifies_what_it_signed(body: bytes, secret: str) -> None:
    Razorpay(secrets=(secret,)).verify(body, {"x-razorpay-signature": razorpay.sign(body, secret)})


@given(body=st.binary(min_size=1), secret=secrets, data=st.data())
def test_razorpay_rejects_any_one_byte_change_of_the_body(
    body: bytes, secret: str, data: st.DataObject
) -> None:
    changed = data.draw(one_byte_changed(body))
    with pytest.raises(SignatureMismatch):
        Razorpay(secrets=(secret,)).verify(
            changed, {"x-razorpay-signature": razorpay.sign(body, secret)}
        )


@given(body=st.binary(), secret=secrets, data=st.data())
def test_razorpay_rejects_any_one_character_change_of_the_signature(
    body: bytes, secret: str, data: st.DataObject
) -> None:
    signature = data.draw(one_char_changed(razorpay.sign(body, secret)))
    with pytest.raises(SignatureMismatch):
        Razorpay(secrets=(secret,)).verify(body, {"x-razorpay-signature": signature})


@given(body=st.binary(), configured=secret_lists, data=st.data())
def test_razorpay_accepts_any_configured_secret(
    body: bytes, configured: list[str], data: st.DataObject
) -> None:
    secret = data.draw(st.sampled_from(configured))
    headers = {"x-razorpay-signature": razorpay.sign(body, secret)}
    Razorpay(secrets=tuple(configured)).verify(body, headers)


@given(body=st.binary(), configured=secret_lists, other=secrets)
def test_razorpay_rejects_a_secret_not_configured(
    body: bytes, configured: list[str], other: str
) -> None:
    assume(other not in configured)
    headers = {"x-razorpay-signature": razorpay.sign(body, other)}
    with pytest.raises(SignatureMismatch):
        Razorpay(secrets=tuple(configured)).verify(body, headers)


# --- Cashfree -------------------------------------------------------------------------------


def cashfree_headers(body: bytes, timestamp: str, secret: str) -> dict[str, str]:
    return {
        "x-webhook-timestamp": timestamp,
        "x-webhook-signature": cashfree.sign(body, timestamp, secret),
    }


@given(body=st.binary(), timestamp=timestamps, secret=secrets)
def test_cashfree_verifies_what_it_signed(body: bytes, timestamp: str, secret: str) -> None:
    Cashfree(secrets=(secret,)).verify(body, cashfree_headers(body, timestamp, secret))


@given(body=st.binary(min_size=1), timestamp=timestamps, secret=secrets, data=st.data())
def test_cashfree_rejects_any_one_byte_change_of_the_body(
    body: bytes, timestamp: str, secret: str, data: st.DataObject
) -> None:
    changed = data.draw(one_byte_changed(body))
    with pytest.raises(SignatureMismatch):
        Cashfree(secrets=(secret,)).verify(changed, cashfree_headers(body, timestamp, secret))


@given(body=st.binary(), timestamp=timestamps, secret=secrets, data=st.data())
def test_cashfree_rejects_any_one_character_change_of_the_timestamp(
    body: bytes, timestamp: str, secret: str, data: st.DataObject
) -> None:
    headers = cashfree_headers(body, timestamp, secret)
    headers["x-webhook-timestamp"] = data.draw(one_char_changed(timestamp))
    with pytest.raises(SignatureMismatch):
        Cashfree(secrets=(secret,)).verify(body, headers)


@given(body=st.binary(), timestamp=timestamps, secret=secrets, data=st.data())
def test_cashfree_rejects_any_one_character_change_of_the_signature(
    body: bytes, timestamp: str, secret: str, data: st.DataObject
) -> None:
    headers = cashfree_headers(body, timestamp, secret)
    headers["x-webhook-signature"] = data.draw(one_char_changed(headers["x-webhook-signature"]))
    with pytest.raises(SignatureMismatch):
        Cashfree(secrets=(secret,)).verify(body, headers)


@given(body=st.binary(), timestamp=timestamps, configured=secret_lists, data=st.data())
def test_cashfree_accepts_any_configured_secret(
    body: bytes, timestamp: str, configured: list[str], data: st.DataObject
) -> None:
    secret = data.draw(st.sampled_from(configured))
    Cashfree(secrets=tuple(configured)).verify(body, cashfree_headers(body, timestamp, secret))


# --- PayU -----------------------------------------------------------------------------------

HASHED = ["status", *(f"udf{n}" for n in range(1, 11)), "email", "firstname", "productinfo"]
HASHED += ["amount", "txnid", "additionalCharges"]
payu_values = st.text(max_size=30)
payu_forms = st.fixed_dictionaries({name: payu_values for name in HASHED})


def signed_form(fields: dict[str, str], key: str, salt: str) -> dict[str, str]:
    fields = {**fields, "key": key}
    return {**fields, "hash": payu.reverse_hash(fields, salt)}


@given(fields=payu_forms, key=secrets, salt=secrets)
def test_payu_verifies_what_it_hashed(fields: dict[str, str], key: str, salt: str) -> None:
    body = payu.encode(signed_form(fields, key, salt))
    PayU(merchant_key=key, salts=(salt,)).verify(body, {})


@given(fields=payu_forms, key=secrets, salt=secrets, data=st.data())
def test_payu_rejects_any_change_of_a_hashed_field(
    fields: dict[str, str], key: str, salt: str, data: st.DataObject
) -> None:
    form = signed_form(fields, key, salt)
    name = data.draw(st.sampled_from(HASHED))
    form[name] = data.draw(payu_values.filter(lambda v: v != fields[name]))
    with pytest.raises(SignatureMismatch):
        PayU(merchant_key=key, salts=(salt,)).verify(payu.encode(form), {})


@given(fields=payu_forms, key=secrets, salt=secrets, data=st.data())
def test_payu_rejects_any_one_character_change_of_the_hash(
    fields: dict[str, str], key: str, salt: str, data: st.DataObject
) -> None:
    form = signed_form(fields, key, salt)
    form["hash"] = data.draw(one_char_changed(form["hash"], FORM_CHARACTERS))
    with pytest.raises(SignatureMismatch):
        PayU(merchant_key=key, salts=(salt,)).verify(payu.encode(form), {})


@given(fields=payu_forms, key=secrets, configured=secret_lists, data=st.data())
def test_payu_accepts_any_configured_salt(
    fields: dict[str, str], key: str, configured: list[str], data: st.DataObject
) -> None:
    salt = data.draw(st.sampled_from(configured))
    body = payu.encode(signed_form(fields, key, salt))
    PayU(merchant_key=key, salts=tuple(configured)).verify(body, {})


# --- delivery keys --------------------------------------------------------------------------


def assert_whole_key(event: Event) -> None:
    """docs/providers.md, delivery keys: a missing part is never written as 'None' or an
    empty string."""
    parts = event.event_id.split(":")
    assert all(part not in ("", "None") for part in parts), event.event_id


razorpay_events = st.sampled_from(
    [
        "payment.authorized",
        "payment.captured",
        "order.paid",
        "payment.failed",
        "refund.processed",
        "refund.created",
        "payment.dispute.created",
        "settlement.processed",
    ]
)


@given(event=razorpay_events, payment_id=maybe_ids, refund_id=maybe_ids, order_id=maybe_ids)
def test_razorpay_keys_never_hold_an_empty_or_none_part(
    event: str, payment_id: str | None, refund_id: str | None, order_id: str | None
) -> None:
    pay = {"id": payment_id, "amount": 100, "order_id": order_id}
    refund = {"id": refund_id, "amount": 100, "payment_id": payment_id}
    payload = {"payment": {"entity": pay}, "refund": {"entity": refund}}
    body = json.dumps({"event": event, "payload": payload}).encode()
    try:
        parsed = Razorpay(secrets=("s",)).parse(body, {})
    except MalformedPayload:
        return  # an acted-on event without its ids is refused, never keyed with a hole
    assert_whole_key(parsed)


cashfree_types = st.sampled_from(
    [
        "PAYMENT_SUCCESS_WEBHOOK",
        "PAYMENT_FAILED_WEBHOOK",
        "PAYMENT_USER_DROPPED_WEBHOOK",
        "REFUND_STATUS_WEBHOOK",
        "DISPUTE_CREATED",
        "SETTLEMENT_SUCCESS",
    ]
)
cashfree_statuses = st.sampled_from(["SUCCESS", "PENDING", "FAILED", "CANCELLED", "USER_DROPPED"])


@given(type_=cashfree_types, status=cashfree_statuses, cf_id=maybe_ids, order_id=maybe_ids)
def test_cashfree_keys_never_hold_an_empty_or_none_part(
    type_: str, status: str, cf_id: str | None, order_id: str | None
) -> None:
    data = {
        "order": {"order_id": order_id, "order_amount": 1},
        "payment": {"cf_payment_id": cf_id, "payment_status": status},
        "refund": {"cf_refund_id": cf_id, "cf_payment_id": cf_id, "refund_status": status},
    }
    body = json.dumps({"type": type_, "data": data}).encode()
    try:
        parsed = Cashfree(secrets=("s",)).parse(body, {})
    except MalformedPayload:
        return
    assert_whole_key(parsed)


@given(
    status=st.sampled_from(["success", "failure", "pending", "userCancelled", "bounced"]),
    mihpayid=maybe_ids,
    txnid=maybe_ids,
)
def test_payu_keys_never_hold_an_empty_or_none_part(
    status: str, mihpayid: str | None, txnid: str | None
) -> None:
    fields = {"status": status, "amount": "1.00", "mihpayid": mihpayid or "", "txnid": txnid or ""}
    try:
        parsed = PayU(merchant_key="k", salts=("s",)).parse(payu.encode(fields), {})
    except MalformedPayload:
        return
    assert_whole_key(parsed)

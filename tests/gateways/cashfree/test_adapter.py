"""Cashfree adapter: the computed vectors, three webhook versions, rupee amounts, keys."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from payhooks.events import Event, EventKind, Provider
from payhooks.gateways.cashfree import Cashfree, sign
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

DATA = Path(__file__).resolve().parents[2] / "data"
VECTORS = {v["id"]: v for v in json.loads((DATA / "vectors.json").read_bytes())["vectors"]}
VECTOR = VECTORS["cashfree.webhook.computed"]
TRAP = VECTORS["cashfree.webhook.computed.decimal_trap"]
SECRET = "cfsk_test"
TIMESTAMP = "1746427759733"


def adapter(*secrets: str) -> Cashfree:
    return Cashfree(secrets=secrets or (SECRET,))


def payment_body(
    *,
    type_: str = "PAYMENT_SUCCESS_WEBHOOK",
    status: str | None = "SUCCESS",
    cf_payment_id: object = "1453002795",
    order_id: object = "order_OFR_2",
    order_amount: str = "2",
    payment_amount: str = "170.00",
) -> bytes:
    """Amounts are raw JSON number text, exactly as Cashfree would write them."""
    j = json.dumps
    return (
        f'{{"data":{{"order":{{"order_id":{j(order_id)},"order_amount":{order_amount},'
        f'"order_currency":"INR","order_tags":null}},'
        f'"payment":{{"cf_payment_id":{j(cf_payment_id)},"payment_status":{j(status)},'
        f'"payment_amount":{payment_amount},"payment_currency":"INR"}}}},'
        f'"event_time":"2025-01-15T11:16:10+05:30","type":{j(type_)}}}'
    ).encode()


def refund_body(*, status: str = "SUCCESS", cf_refund_id: object = 1919201, **extra: Any) -> bytes:
    refund = {
        "cf_refund_id": cf_refund_id,
        "cf_payment_id": 1453002795,
        "refund_id": "refund_merchant_1",
        "order_id": "order_OFR_2",
        "refund_amount": 1.5,
        "refund_currency": "INR",
        "entity": "Refund",
        "refund_status": status,
        **extra,
    }
    return json.dumps({"data": {"refund": refund}, "type": "REFUND_STATUS_WEBHOOK"}).encode()


def auto_refund_body(*, status: str = "SUCCESS", **extra: Any) -> bytes:
    """``AUTO_REFUND_STATUS_WEBHOOK`` in the shape of Cashfree's sample ("Auto-Refund
    Webhooks"): the refund under ``data.auto_refund``, no merchant ``refund_id``."""
    refund = {
        "event": "AUTO-REFUND",
        "cf_refund_id": 1398207645,
        "cf_payment_id": "1453002795",
        "bank_reference": "417305862294",
        "order_id": "order_OFR_2",
        "refund_amount": 170,
        "refund_currency": "INR",
        "refund_type": "PAYMENT_AUTO_REFUND",
        "refund_arn": "318450296731",
        "refund_status": status,
        "status_description": "Auto-Refund processed successfully",
        "refund_reason": "Multiple payments were performed against same order.",
        "created_at": "2024-10-23T19:02:36+05:30",
        "processed_at": None,
        "refund_charge": 0,
        "refund_splits": None,
        "metadata": None,
        **extra,
    }
    envelope = {"data": {"auto_refund": refund}, "event_time": "2024-10-23T19:04:41+05:30",
                "type": "AUTO_REFUND_STATUS_WEBHOOK"}  # fmt: skip
    return json.dumps(envelope).encode()


def signed(body: bytes, **headers: str) -> dict[str, str]:
    return {
        "x-webhook-timestamp": TIMESTAMP,
        "x-webhook-signature": sign(body, TIMESTAMP, SECRET),
        **{name.replace("_", "-"): value for name, value in headers.items()},
    }


def parse(body: bytes, headers: dict[str, str] | None = None) -> Event:
    return adapter().parse(body, headers or {})


# --- the vectors ----------------------------------------------------------------------------


def vector_headers() -> dict[str, str]:
    return {
        **VECTOR["headers"],
        "x-idempotency-key": "n9rn7079wqXcse3GEDEXCYle9ajXmU0SUQY8zrUNAlc=",
    }


def test_vector_verifies_with_2025_01_01_headers() -> None:
    adapter(VECTOR["secret"]).verify(VECTOR["body"].encode(), vector_headers())


def test_sign_reproduces_the_vector_signature() -> None:
    body = VECTOR["body"].encode()
    assert sign(body, VECTOR["timestamp"], VECTOR["secret"]) == VECTOR["expected_signature"]


def test_vector_parses_as_a_capture_keyed_by_the_idempotency_header() -> None:
    event = parse(VECTOR["body"].encode(), vector_headers())
    assert (event.provider, event.kind) == (Provider.CASHFREE, EventKind.PAYMENT_CAPTURED)
    assert event.event_id == "n9rn7079wqXcse3GEDEXCYle9ajXmU0SUQY8zrUNAlc="
    assert (event.payment_id, event.merchant_ref, event.currency) == (
        "1453002795",
        "order_OFR_2",
        "INR",
    )


def test_vector_keeps_order_and_payment_amounts_apart() -> None:
    event = parse(VECTOR["body"].encode())
    assert (event.amount_paise, event.payment_amount_paise) == (200, 17000)


def test_decimal_trap_body_does_not_verify_against_the_original_signature() -> None:
    headers = {
        "x-webhook-timestamp": TRAP["timestamp"],
        "x-webhook-signature": TRAP["must_not_verify_against"],
    }
    with pytest.raises(SignatureMismatch):
        adapter(TRAP["secret"]).verify(TRAP["body"].encode(), headers)


def test_decimal_trap_body_verifies_against_its_own_signature() -> None:
    headers = {
        "x-webhook-timestamp": TRAP["timestamp"],
        "x-webhook-signature": TRAP["signature_of_this_body"],
    }
    adapter(TRAP["secret"]).verify(TRAP["body"].encode(), headers)


# --- signatures -----------------------------------------------------------------------------


def test_missing_timestamp_header_is_rejected() -> None:
    body = payment_body()
    headers = signed(body)
    del headers["x-webhook-timestamp"]
    with pytest.raises(SignatureMismatch, match="timestamp"):
        adapter().verify(body, headers)


def test_empty_timestamp_header_is_rejected() -> None:
    body = payment_body()
    with pytest.raises(SignatureMismatch, match="timestamp"):
        adapter().verify(body, {**signed(body), "x-webhook-timestamp": ""})


def test_non_ascii_timestamp_header_is_rejected() -> None:
    body = payment_body()
    with pytest.raises(SignatureMismatch, match="ASCII"):
        adapter().verify(body, {**signed(body), "x-webhook-timestamp": "\uff11\uff17\uff14\uff16"})


def test_a_different_timestamp_is_rejected() -> None:
    body = payment_body()
    with pytest.raises(SignatureMismatch):
        adapter().verify(body, {**signed(body), "x-webhook-timestamp": "1746427759734"})


def test_signature_with_a_dot_separator_is_rejected() -> None:
    """The docs' ``$timestamp.$payload`` is PHP concatenation, not a literal dot."""
    body = payment_body()
    dotted = sign(b"." + body, TIMESTAMP, SECRET)
    with pytest.raises(SignatureMismatch):
        adapter().verify(body, {**signed(body), "x-webhook-signature": dotted})


def test_missing_signature_header_is_rejected() -> None:
    body = payment_body()
    with pytest.raises(SignatureMismatch, match="missing"):
        adapter().verify(body, {"x-webhook-timestamp": TIMESTAMP})


def test_non_ascii_signature_header_is_rejected() -> None:
    body = payment_body()
    with pytest.raises(SignatureMismatch, match="ASCII"):
        adapter().verify(body, {**signed(body), "x-webhook-signature": "ÄxWVwCQdHdp6J6MYy9="})


def test_an_old_secret_still_verifies_during_rotation() -> None:
    body = payment_body()
    headers = {
        "x-webhook-timestamp": TIMESTAMP,
        "x-webhook-signature": sign(body, TIMESTAMP, "old"),
    }
    Cashfree(secrets=("new", "old")).verify(body, headers)


def test_a_secret_not_configured_is_rejected() -> None:
    body = payment_body()
    headers = {
        "x-webhook-timestamp": TIMESTAMP,
        "x-webhook-signature": sign(body, TIMESTAMP, "old"),
    }
    with pytest.raises(SignatureMismatch):
        Cashfree(secrets=("new",)).verify(body, headers)


def test_no_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="secret"):
        Cashfree(secrets=())


# --- versions -------------------------------------------------------------------------------


def test_2022_09_01_integer_payment_id_becomes_a_string() -> None:
    assert parse(payment_body(cf_payment_id=1453002795)).payment_id == "1453002795"


def test_2023_08_01_string_payment_id_is_kept() -> None:
    assert parse(payment_body(cf_payment_id="1453002795")).payment_id == "1453002795"


def test_both_versions_give_the_same_derived_key() -> None:
    as_int = parse(payment_body(cf_payment_id=1453002795)).event_id
    as_str = parse(payment_body(cf_payment_id="1453002795")).event_id
    assert as_int == as_str == "PAYMENT_SUCCESS_WEBHOOK:1453002795"


# --- amounts --------------------------------------------------------------------------------


@pytest.mark.parametrize(("rupees", "paise"), [("170.00", 17000), ("1.8", 180), ("2", 200)])
def test_rupee_amount_becomes_exact_paise(rupees: str, paise: int) -> None:
    assert parse(payment_body(order_amount=rupees)).amount_paise == paise


def test_three_decimal_order_amount_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="order_amount"):
        parse(payment_body(order_amount="1.005"))


def test_three_decimal_payment_amount_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="payment_amount"):
        parse(payment_body(payment_amount="1.005"))


def test_a_capture_without_the_orders_currency_reads_the_payments() -> None:
    body = payment_body().replace(b'"order_currency":"INR",', b"")
    assert parse(body).currency == "INR"
    usd = payment_body().replace(b'"order_currency":"INR",', b"").replace(b'"INR"', b'"USD"')
    assert parse(usd).currency == "USD"


def test_a_capture_naming_no_currency_is_malformed_never_taken_for_rupees() -> None:
    body = payment_body().replace(b'"order_currency":"INR",', b"")
    with pytest.raises(MalformedPayload, match="order_currency is missing"):
        parse(body.replace(b',"payment_currency":"INR"', b""))
    failed = payment_body(type_="PAYMENT_FAILED_WEBHOOK", status="FAILED")
    unsaid = failed.replace(b'"order_currency":"INR",', b"").replace(
        b',"payment_currency":"INR"', b""
    )
    assert parse(unsaid).currency is None  # a failed payment's currency is compared with nothing


@pytest.mark.parametrize("amount", ["-1", "1e30", '"2"', "true", "NaN"])
def test_order_amount_that_is_not_rupees_is_malformed(amount: str) -> None:
    with pytest.raises(MalformedPayload):
        parse(payment_body(order_amount=amount))


def test_amount_with_exponent_is_still_exact() -> None:
    assert parse(payment_body(order_amount="1.5E+2")).amount_paise == 15000


# --- event kinds ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_", "status", "kind"),
    [
        ("PAYMENT_SUCCESS_WEBHOOK", "SUCCESS", EventKind.PAYMENT_CAPTURED),
        ("PAYMENT_SUCCESS_WEBHOOK", "PENDING", EventKind.PAYMENT_PENDING),
        ("PAYMENT_SUCCESS_WEBHOOK", "VOID", EventKind.OTHER),
        ("PAYMENT_FAILED_WEBHOOK", "FAILED", EventKind.PAYMENT_FAILED),
        ("PAYMENT_USER_DROPPED_WEBHOOK", "USER_DROPPED", EventKind.PAYMENT_FAILED),
        ("PAYMENT_CHARGES_WEBHOOK", "SUCCESS", EventKind.OTHER),
    ],
)
def test_payment_event_kind(type_: str, status: str, kind: EventKind) -> None:
    assert parse(payment_body(type_=type_, status=status)).kind is kind


def test_successful_refund_is_a_processed_refund() -> None:
    assert parse(refund_body(status="SUCCESS")).kind is EventKind.REFUND_PROCESSED


@pytest.mark.parametrize("status", ["PENDING", "CANCELLED", "ONHOLD"])
def test_refund_not_yet_successful_is_not_acted_on(status: str) -> None:
    assert parse(refund_body(status=status)).kind is EventKind.OTHER


def test_cashfrees_own_auto_refund_is_a_processed_refund_of_the_payment() -> None:
    """The defect: ``AUTO_REFUND_STATUS_WEBHOOK`` (Cashfree refunding a second payment of a
    paid order by itself) was OTHER, answered ``ignored``: the money it gave back was never
    counted, and the merchant's refund of that payment, which Cashfree takes from the order,
    gave the customer the first payment back too."""
    event = parse(auto_refund_body())
    assert (event.kind, event.refund_id, event.payment_id, event.merchant_ref) == (
        EventKind.REFUND_PROCESSED, "1398207645", "1453002795", "order_OFR_2",
    )  # fmt: skip
    assert (event.refund_amount_paise, event.currency) == (17_000, "INR")
    assert event.bank_ref == "318450296731"
    assert event.refund_key is None  # the merchant asked for nothing: no intent of its own
    assert event.event_id == "AUTO_REFUND_STATUS_WEBHOOK:1398207645"


def test_an_auto_refund_of_money_paid_with_no_order_is_still_a_refund() -> None:
    """Paid straight to the merchant's VPA, refunded before any order existed."""
    event = parse(auto_refund_body(order_id=None))
    assert (event.kind, event.merchant_ref) == (EventKind.REFUND_PROCESSED, None)


@pytest.mark.parametrize("status", ["PENDING", "ONHOLD", "CANCELLED"])
def test_an_auto_refund_not_yet_made_is_not_acted_on(status: str) -> None:
    event = parse(auto_refund_body(status=status))
    assert event.kind is EventKind.OTHER
    assert event.event_id == f"AUTO_REFUND_STATUS_WEBHOOK:1398207645:{status}"


def test_refund_fields_come_from_the_refund_entity() -> None:
    event = parse(refund_body())
    assert (event.refund_id, event.payment_id, event.merchant_ref) == (
        "1919201",
        "1453002795",
        "order_OFR_2",
    )
    assert event.refund_amount_paise == 150


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (payment_body(cf_payment_id="1453\ud800"), "cf_payment_id"),
        (payment_body(order_id="order_\ud800"), "order_id"),
        (payment_body(type_="PAYMENT_SUCCESS_WEBHOOK\ud800"), "type"),
        (payment_body(status="SUCCESS\ud800"), "payment_status"),
        (payment_body().replace(b'"INR"', b'"IN\\ud800"', 1), "order_currency"),
        (refund_body(refund_status="SUCCESS\ud800"), "refund_status"),
    ],
)
def test_a_lone_surrogate_in_a_field_read_is_malformed(body: bytes, field: str) -> None:
    with pytest.raises(MalformedPayload, match=f"{field} is not valid text"):
        parse(body)


@pytest.mark.parametrize(
    ("type_", "kind"),
    [
        ("PAYMENT_FAILED_WEBHOOK", EventKind.PAYMENT_FAILED),
        ("PAYMENT_USER_DROPPED_WEBHOOK", EventKind.PAYMENT_FAILED),
        ("SETTLEMENT_WEBHOOK", EventKind.OTHER),
        ("PAYMENT_CHARGES_WEBHOOK", EventKind.OTHER),
    ],
)
def test_a_lone_surrogate_in_a_status_that_decides_nothing_is_left_out(
    type_: str, kind: EventKind
) -> None:
    event = parse(payment_body(type_=type_, status="FAILED\udfff"))
    assert event.kind is kind and "\udfff" not in event.event_id


def test_a_lone_surrogate_in_the_bank_reference_leaves_it_out() -> None:
    body = json.loads(VECTOR["body"])
    body["data"]["payment"]["bank_reference"] = "2349\ud800"
    event = parse(json.dumps(body).encode())
    assert (event.kind, event.bank_ref) == (EventKind.PAYMENT_CAPTURED, None)


def test_unknown_event_type_is_other() -> None:
    body = json.dumps({"data": {"instrument": {"instrument_id": "i1"}},
                       "type": "INSTRUMENT_ACTIVE_WEBHOOK"})  # fmt: skip
    assert parse(body.encode()).kind is EventKind.OTHER


# --- delivery keys --------------------------------------------------------------------------


def test_idempotency_header_is_the_key_as_received() -> None:
    event = parse(payment_body(), {"x-idempotency-key": "abc+/="})
    assert event.event_id == "abc+/="


def test_empty_idempotency_header_falls_back_to_the_derived_key() -> None:
    event = parse(payment_body(), {"x-idempotency-key": ""})
    assert event.event_id == "PAYMENT_SUCCESS_WEBHOOK:1453002795"


def test_pending_success_webhook_key_carries_the_status() -> None:
    event = parse(payment_body(status="PENDING"))
    assert event.event_id == "PAYMENT_SUCCESS_WEBHOOK:1453002795:PENDING"


def test_success_after_pending_is_not_a_duplicate() -> None:
    pending = parse(payment_body(status="PENDING")).event_id
    success = parse(payment_body(status="SUCCESS")).event_id
    assert pending != success


def test_failed_and_success_of_one_attempt_have_different_keys() -> None:
    failed = parse(payment_body(type_="PAYMENT_FAILED_WEBHOOK", status="FAILED")).event_id
    assert failed == "PAYMENT_FAILED_WEBHOOK:1453002795"


def test_successful_refund_key_uses_the_refund_id() -> None:
    assert parse(refund_body()).event_id == "REFUND_STATUS_WEBHOOK:1919201"


@pytest.mark.parametrize("status", ["SUCCESS", "PENDING", "ONHOLD"])
def test_a_refunds_own_id_is_its_key_unless_it_failed(status: str) -> None:
    """``refund_id`` is the merchant's (payhooks sends its intent's key as it): it names the
    intent the refund was sent for, before the sender heard Cashfree's ``cf_refund_id``."""
    assert parse(refund_body(status=status)).refund_key == "refund_merchant_1"


@pytest.mark.parametrize("status", ["CANCELLED", "FAILED"])
def test_a_failed_refund_names_no_intent(status: str) -> None:
    """No money went back: a cancelled intent stays cancelled, its amount free."""
    assert parse(refund_body(status=status)).refund_key is None


@pytest.mark.parametrize("written", [None, "", 1234, ["ph1"]])
def test_a_refund_without_a_usable_own_id_names_no_intent(written: object) -> None:
    event = parse(refund_body(refund_id=written))
    assert (event.kind, event.refund_key) == (EventKind.REFUND_PROCESSED, None)


def test_pending_refund_key_carries_the_status() -> None:
    assert parse(refund_body(status="PENDING")).event_id == "REFUND_STATUS_WEBHOOK:1919201:PENDING"


def test_event_without_id_is_keyed_by_type_and_body_hash() -> None:
    body = json.dumps({"data": {"instrument": {"instrument_id": "i1"}},
                       "type": "INSTRUMENT_ACTIVE_WEBHOOK"})  # fmt: skip
    expected = "INSTRUMENT_ACTIVE_WEBHOOK:" + hashlib.sha256(body.encode()).hexdigest()
    assert parse(body.encode()).event_id == expected


def test_pending_refund_without_id_is_keyed_by_body_hash() -> None:
    body = refund_body(status="PENDING", cf_refund_id=None)
    expected = "REFUND_STATUS_WEBHOOK:" + hashlib.sha256(body).hexdigest()
    assert parse(body).event_id == expected


# --- malformed bodies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b"{}", b'{"type": null}', b'{"type": ""}'],
    ids=["text", "array", "empty", "null-type", "empty-type"],
)
def test_body_that_is_not_an_event_object_is_malformed(body: bytes) -> None:
    with pytest.raises(MalformedPayload):
        parse(body)


def test_success_webhook_without_payment_status_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="payment_status"):
        parse(payment_body(status=None))


def test_capture_without_payment_id_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="cf_payment_id"):
        parse(payment_body(cf_payment_id=None))


def test_boolean_payment_id_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="cf_payment_id"):
        parse(payment_body(type_="PAYMENT_FAILED_WEBHOOK", cf_payment_id=True))


def test_capture_without_order_id_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="order_id"):
        parse(payment_body(order_id=None))


def test_capture_without_order_amount_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="order_amount"):
        parse(payment_body(order_amount="null"))


@pytest.mark.parametrize("unsaid", ["null", None], ids=["null", "left out"])
def test_capture_without_payment_amount_is_malformed(unsaid: str | None) -> None:
    """Never read as paid in full (the order's amount), as it was."""
    body = payment_body(payment_amount=unsaid or "null")
    if unsaid is None:
        body = body.replace(b'"payment_amount":null,', b"")
    with pytest.raises(MalformedPayload, match="payment_amount is missing"):
        parse(body)


def test_failed_payment_without_payment_amount_is_read() -> None:
    """A failed payment moves no money: nothing is read as paid, and it is still recorded."""
    failed = parse(payment_body(type_="PAYMENT_FAILED_WEBHOOK", status="FAILED",
                                payment_amount="null"))  # fmt: skip
    assert (failed.kind, failed.payment_amount_paise) == (EventKind.PAYMENT_FAILED, None)


def test_refund_without_status_is_malformed() -> None:
    body = json.dumps({"data": {"refund": {"cf_refund_id": 1}}, "type": "REFUND_STATUS_WEBHOOK"})
    with pytest.raises(MalformedPayload, match="refund_status"):
        parse(body.encode())


def test_successful_refund_without_amount_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="refund_amount"):
        parse(refund_body(refund_amount=None))

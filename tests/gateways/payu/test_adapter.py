"""PayU adapter: the documented reverse hash, the form body, statuses and delivery keys."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payhooks.events import Event, EventKind, Provider
from payhooks.gateways.payu import PayU, decode_form, encode, reverse_hash
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

DATA = Path(__file__).resolve().parents[2] / "data"
VECTORS = {v["id"]: v for v in json.loads((DATA / "vectors.json").read_bytes())["vectors"]}
DOCS = VECTORS["payu.reverse_hash.docs_formula"]
SDK_VARIANT = VECTORS["payu.reverse_hash.sdk_test_variant_without_status"]
KEY = "gtKFFx"
SALT = "eCwWELxi"


def vector_fields(case: dict[str, Any]) -> dict[str, str]:
    """The SDK fixture's inputs the vector was computed from, plus the case's own fields."""
    fields = {
        "key": KEY,
        "txnid": "20200429103010",
        "amount": "10",
        "productinfo": "iPhone",
        "firstname": "Ashish",
        "email": "test@gmail.com",
        "status": case["status"],
    }
    if "additionalCharges" in case:
        fields["additionalCharges"] = case["additionalCharges"]
    return fields


def post(**overrides: str | None) -> dict[str, str]:
    """A PayU payment post with a valid hash; pass a field as None to leave it out."""
    fields = {
        "mihpayid": "403993715529184406",
        "mode": "UPI",
        "status": "success",
        "unmappedstatus": "captured",
        "key": KEY,
        "txnid": "txn_cart_42",
        "amount": "40.00",
        "addedon": "2026-03-04 14:46:14",
        "productinfo": "order 42",
        "firstname": "Asha",
        "email": "asha@example.com",
        "udf1": "",
        "udf5": "cart-42",
    }
    fields.update({k: v for k, v in overrides.items() if v is not None})
    for name in [k for k, v in overrides.items() if v is None]:
        fields.pop(name, None)
    return {**fields, "hash": reverse_hash(fields, SALT)}


def adapter(*salts: str) -> PayU:
    return PayU(merchant_key=KEY, salts=salts or (SALT,))


def parse(fields: dict[str, str]) -> Event:
    return adapter().parse(encode(fields), {})


# --- the documented formula -----------------------------------------------------------------


@pytest.mark.parametrize("case", DOCS["cases"], ids=lambda c: c["string_to_hash"][:26])
def test_docs_vector_string_hashes_to_its_expected_value(case: dict[str, Any]) -> None:
    digest = hashlib.sha512(case["string_to_hash"].encode()).hexdigest()
    assert digest == case["expected_hash"]


@pytest.mark.parametrize("case", DOCS["cases"], ids=lambda c: c["string_to_hash"][:26])
def test_reverse_hash_reproduces_the_docs_vector(case: dict[str, Any]) -> None:
    assert reverse_hash(vector_fields(case), SALT) == case["expected_hash"]


@pytest.mark.parametrize("case", DOCS["cases"], ids=lambda c: c["string_to_hash"][:26])
def test_docs_vector_verifies_as_a_posted_form(case: dict[str, Any]) -> None:
    body = encode({**vector_fields(case), "hash": case["expected_hash"]})
    adapter().verify(body, {})


def test_udf10_comes_first_after_status() -> None:
    fields = {"status": "success", "udf10": "TEN", "udf6": "SIX", "udf1": "ONE", "key": KEY}
    expected = "S|success|TEN||||SIX|||||ONE||||||" + KEY
    assert reverse_hash(fields, "S") == hashlib.sha512(expected.encode()).hexdigest()


def test_empty_additional_charges_adds_no_prefix() -> None:
    case = DOCS["cases"][0]
    fields = {**vector_fields(case), "additionalCharges": ""}
    assert reverse_hash(fields, SALT) == case["expected_hash"]


def test_sdk_variant_hash_without_status_is_rejected() -> None:
    """PayU's Python SDK leaves status out of the hash; the docs put it in. We follow the docs."""
    fields = vector_fields({"status": "success"})
    with pytest.raises(SignatureMismatch):
        adapter().verify(encode({**fields, "hash": SDK_VARIANT["expected_hash"]}), {})


def test_sdk_variant_hash_is_rejected_even_when_status_is_absent() -> None:
    fields = vector_fields({"status": "success"})
    del fields["status"]
    with pytest.raises(SignatureMismatch):
        adapter().verify(encode({**fields, "hash": SDK_VARIANT["expected_hash"]}), {})


# --- verify ---------------------------------------------------------------------------------


def test_a_valid_post_verifies() -> None:
    adapter().verify(encode(post()), {})


def test_an_old_salt_still_verifies_during_rotation() -> None:
    fields = post()
    fields["hash"] = reverse_hash(fields, "old_salt")
    PayU(merchant_key=KEY, salts=("new_salt", "old_salt")).verify(encode(fields), {})


def test_a_salt_not_configured_is_rejected() -> None:
    fields = post()
    fields["hash"] = reverse_hash(fields, "old_salt")
    with pytest.raises(SignatureMismatch):
        adapter().verify(encode(fields), {})


def test_post_for_another_merchant_key_is_rejected() -> None:
    fields = post(key="someone_else")
    with pytest.raises(SignatureMismatch, match="merchant key"):
        adapter().verify(encode(fields), {})


def test_post_without_key_is_rejected() -> None:
    with pytest.raises(SignatureMismatch, match="merchant key"):
        adapter().verify(encode(post(key=None)), {})


def test_post_without_hash_is_rejected() -> None:
    fields = post()
    del fields["hash"]
    with pytest.raises(SignatureMismatch, match="hash missing"):
        adapter().verify(encode(fields), {})


def test_post_with_empty_hash_is_rejected() -> None:
    with pytest.raises(SignatureMismatch, match="hash missing"):
        adapter().verify(encode({**post(), "hash": ""}), {})


def test_changed_amount_is_rejected() -> None:
    with pytest.raises(SignatureMismatch):
        adapter().verify(encode({**post(), "amount": "40.0"}), {})


def test_amount_with_trailing_space_is_rejected() -> None:
    """Values are hashed exactly as posted; nothing is trimmed."""
    with pytest.raises(SignatureMismatch):
        adapter().verify(encode({**post(), "amount": "40.00 "}), {})


def test_uppercase_hash_is_rejected() -> None:
    fields = post()
    with pytest.raises(SignatureMismatch):
        adapter().verify(encode({**fields, "hash": fields["hash"].upper()}), {})


def test_field_posted_twice_is_rejected() -> None:
    body = encode(post()) + b"&amount=1.00"
    with pytest.raises(SignatureMismatch, match="more than once"):
        adapter().verify(body, {})


def test_body_that_is_not_utf8_is_rejected() -> None:
    with pytest.raises(SignatureMismatch, match="UTF-8"):
        adapter().verify(encode(post()) + b"&x=\xff", {})


def test_percent_escape_that_is_not_utf8_in_a_field_payhooks_does_not_read_is_not_decoded() -> None:
    """Outside the hash, and unread: PayU posts about sixty fields, and none of them may cost
    the payment."""
    from payhooks.intake.ingest import receive

    event = receive(adapter(), encode(post()) + b"&x=%FF", {}).event
    assert (event.kind, event.merchant_ref) == (EventKind.PAYMENT_CAPTURED, "txn_cart_42")


@pytest.mark.parametrize("escape", [b"%FF", b"%ED%A0%80", b"12%C3"])
def test_a_bank_reference_that_is_not_utf8_is_left_out(escape: bytes) -> None:
    from payhooks.intake.ingest import receive

    event = receive(adapter(), encode(post()) + b"&bank_ref_num=" + escape, {}).event
    assert (event.kind, event.bank_ref) == (EventKind.PAYMENT_CAPTURED, None)


def test_percent_escape_that_is_not_utf8_in_a_hashed_field_is_refused_by_verify() -> None:
    with pytest.raises(SignatureMismatch, match="UTF-8"):
        adapter().verify(encode(post()).replace(b"udf5=", b"udf5=%FF"), {})


def test_overlong_field_name_is_refused_before_anything_is_decoded() -> None:
    with pytest.raises(SignatureMismatch, match="name"):
        adapter().verify(encode(post()) + b"&" + b"n" * 65 + b"=1", {})


def test_a_field_posted_twice_under_an_escaped_name_is_refused() -> None:
    with pytest.raises(SignatureMismatch, match="more than once"):
        adapter().verify(encode(post()) + b"&%6Bey=other", {})


@given(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=12))
def test_verify_reads_the_same_fields_as_parse(pairs: list[tuple[str, str]]) -> None:
    """The lean pre-hash split and parse_qsl agree on every name and value."""
    from payhooks.gateways.payu.adapter import _decoded, _raw_fields

    body = encode(pairs)
    try:
        parsed = decode_form(body)
    except SignatureMismatch:
        return
    raw = _raw_fields(body)
    assert {name: _decoded(value) for name, value in raw.items()} == parsed


def test_fields_outside_the_hash_are_not_authenticated() -> None:
    """PayU hashes a subset of the form: mode, mihpayid, addedon... can change undetected.

    Documented so nobody mistakes them for authentic: mihpayid (the payment id and half the
    delivery key) is among them, which is why PayU recommends verify_payment before fulfilling.
    """
    adapter().verify(encode({**post(), "mode": "CC", "mihpayid": "1"}), {})


def test_pipe_moved_into_the_amount_keeps_the_hash_but_is_refused() -> None:
    """The pipe-joined hash is not injective: a '|' in one value can shift into its neighbour.

    Moving ``p|5`` + ``1`` to ``p`` + ``5|1`` keeps the hash; the strict amount grammar is
    what stops it from reaching the shop.
    """
    fields = post(productinfo="p|5", amount="1")
    shifted = {**fields, "productinfo": "p", "amount": "5|1"}
    adapter().verify(encode(shifted), {})
    with pytest.raises(MalformedPayload, match="amount"):
        adapter().parse(encode(shifted), {})


def test_no_salt_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="salt"):
        PayU(merchant_key=KEY, salts=())


def test_no_merchant_key_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="merchant key"):
        PayU(merchant_key="", salts=(SALT,))


# --- the form -------------------------------------------------------------------------------


def test_form_values_survive_encoding_exactly() -> None:
    fields = {"productinfo": "a+b & c=d", "firstname": "Ré mi", "udf1": ""}
    assert decode_form(encode(fields)) == fields


def test_plus_in_a_form_value_is_a_space() -> None:
    assert decode_form(b"addedon=2026-03-04+14%3A46%3A14") == {"addedon": "2026-03-04 14:46:14"}


# --- parse ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        ("success", EventKind.PAYMENT_CAPTURED),
        ("failure", EventKind.PAYMENT_FAILED),
        ("pending", EventKind.PAYMENT_PENDING),
        ("userCancelled", EventKind.OTHER),
    ],
)
def test_status_gives_the_event_kind(status: str, kind: EventKind) -> None:
    assert parse(post(status=status)).kind is kind


def test_event_type_is_payment_dot_status() -> None:
    assert parse(post(status="failure")).event_type == "payment.failure"


def test_payment_fields_come_from_the_form() -> None:
    event = parse(post())
    assert (event.provider, event.merchant_ref) == (Provider.PAYU, "txn_cart_42")
    assert (event.amount_paise, event.currency) == (4000, "INR")


def test_payment_identity_is_the_hashed_txnid_not_the_unhashed_mihpayid() -> None:
    assert parse(post()).payment_id == "txn_cart_42"
    assert parse(post(mihpayid="999999999")).payment_id == "txn_cart_42"


@pytest.mark.parametrize(("amount", "paise"), [("40.00", 4000), ("10", 1000), ("1.8", 180)])
def test_rupee_string_becomes_exact_paise(amount: str, paise: int) -> None:
    assert parse(post(amount=amount)).amount_paise == paise


@pytest.mark.parametrize("amount", ["1.005", " 40.00", "1e2", "1_000", "-1", "४०", "NaN"])
def test_amount_that_is_not_a_plain_rupee_string_is_malformed(amount: str) -> None:
    with pytest.raises(MalformedPayload, match="amount"):
        parse(post(amount=amount))


@pytest.mark.parametrize("field", ["txnid", "amount"])
def test_acted_on_post_without_its_ids_is_malformed(field: str) -> None:
    with pytest.raises(MalformedPayload, match=f"{field} is missing"):
        parse(post(**{field: None}))


def test_post_without_status_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="status"):
        parse(post(status=None))


def test_delivery_key_is_the_hashed_txnid_and_status() -> None:
    assert parse(post()).event_id == "txn_cart_42:success"


def test_delivery_key_ignores_the_unhashed_mihpayid() -> None:
    """mihpayid is not hashed: anyone holding a signed post can change it at will."""
    assert parse(post(mihpayid="1")).event_id == parse(post(mihpayid="2")).event_id


def test_success_without_a_mihpayid_is_still_applied() -> None:
    assert parse(post(mihpayid=None)).payment_id == "txn_cart_42"


def test_failure_and_success_of_one_payment_have_different_keys() -> None:
    assert parse(post(status="failure")).event_id == "txn_cart_42:failure"


def test_other_status_without_txnid_is_keyed_by_body_hash() -> None:
    body = encode(post(status="userCancelled", txnid=None))
    event = adapter().parse(body, {})
    assert event.event_id == "payment.userCancelled:" + hashlib.sha256(body).hexdigest()

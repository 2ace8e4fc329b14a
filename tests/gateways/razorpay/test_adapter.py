"""Razorpay adapter: the SDK's own vector, secret rotation, event kinds and delivery keys."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from payhooks.events import EventKind, Provider, storable
from payhooks.gateways.razorpay import Razorpay, sign
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

DATA = Path(__file__).resolve().parents[2] / "data"
VECTORS = {v["id"]: v for v in json.loads((DATA / "vectors.json").read_bytes())["vectors"]}
SDK = VECTORS["razorpay.webhook.sdk_test"]


def sdk_body() -> bytes:
    """The SDK fixture, checked against the vector so a re-saved file cannot pass silently."""
    body = (DATA / Path(SDK["body_file"]).relative_to("fixtures")).read_bytes()
    assert len(body) == SDK["body_utf8_length"]
    assert hashlib.sha256(body).hexdigest() == SDK["body_sha256"]
    return body


def adapter(*secrets: str) -> Razorpay:
    return Razorpay(secrets=secrets or ("whsec_test",))


def payment(**overrides: Any) -> dict[str, Any]:
    entity = {
        "id": "pay_29QQoUBi66xm2f",
        "entity": "payment",
        "amount": 50000,
        "currency": "INR",
        "status": "captured",
        "order_id": "order_9A33XWu170gUtm",
    }
    entity.update(overrides)
    return entity


def body_of(event: str = "payment.captured", **entities: dict[str, Any] | None) -> bytes:
    """A webhook body; entities default to one payment, pass payment=None to leave it out."""
    entities = {"payment": payment(), **entities}
    payload = {name: {"entity": e} for name, e in entities.items() if e is not None}
    doc = {"entity": "event", "event": event, "contains": list(payload), "payload": payload}
    return json.dumps(doc).encode()


def refund(**overrides: Any) -> dict[str, Any]:
    entity = {
        "id": "rfnd_FP8QHiV938haTz",
        "entity": "refund",
        "amount": 20000,
        "currency": "INR",
        "payment_id": "pay_29QQoUBi66xm2f",
        "status": "processed",
    }
    entity.update(overrides)
    return entity


def parse(body: bytes, headers: dict[str, str] | None = None) -> Any:
    return adapter().parse(body, headers or {})


# --- the SDK vector -------------------------------------------------------------------------


def test_sdk_vector_signature_verifies() -> None:
    headers = {"x-razorpay-signature": SDK["expected_signature"]}
    adapter(SDK["secret"]).verify(sdk_body(), headers)


def test_sign_reproduces_the_sdk_signature() -> None:
    assert sign(sdk_body(), SDK["secret"]) == SDK["expected_signature"]


def test_sdk_vector_without_its_trailing_newline_fails() -> None:
    body = sdk_body()
    assert body.endswith(b"}\n")
    headers = {"x-razorpay-signature": SDK["expected_signature"]}
    with pytest.raises(SignatureMismatch):
        adapter(SDK["secret"]).verify(body[:-1], headers)


def test_sdk_vector_reserialised_fails() -> None:
    body = json.dumps(json.loads(sdk_body())).encode()
    headers = {"x-razorpay-signature": SDK["expected_signature"]}
    with pytest.raises(SignatureMismatch):
        adapter(SDK["secret"]).verify(body, headers)


def test_sdk_vector_parses_as_the_authorized_payment() -> None:
    event = parse(sdk_body())
    assert (event.provider, event.kind, event.event_type) == (
        Provider.RAZORPAY,
        EventKind.PAYMENT_AUTHORIZED,
        "payment.authorized",
    )
    assert (event.payment_id, event.merchant_ref) == ("pay_6koWN7bvxujzxM", "order_100000000order")
    assert (event.amount_paise, event.currency) == (1000000, "INR")


def test_sdk_vector_without_event_id_header_gets_a_derived_key() -> None:
    assert parse(sdk_body()).event_id == "payment.authorized:pay_6koWN7bvxujzxM"


def test_event_id_header_is_the_key_as_received() -> None:
    event = parse(sdk_body(), {"x-razorpay-event-id": "KxPZ9yQnd4Ex1P"})
    assert event.event_id == "KxPZ9yQnd4Ex1P"


def test_empty_event_id_header_falls_back_to_the_derived_key() -> None:
    event = parse(sdk_body(), {"x-razorpay-event-id": ""})
    assert event.event_id == "payment.authorized:pay_6koWN7bvxujzxM"


def test_payload_sha256_is_of_the_raw_body() -> None:
    assert parse(sdk_body()).payload_sha256 == SDK["body_sha256"]


# --- signatures -----------------------------------------------------------------------------


def test_an_old_secret_still_verifies_during_rotation() -> None:
    body = body_of()
    adapter("new_secret", "old_secret").verify(
        body, {"x-razorpay-signature": sign(body, "old_secret")}
    )


def test_a_secret_not_configured_is_rejected() -> None:
    body = body_of()
    with pytest.raises(SignatureMismatch):
        adapter("new_secret").verify(body, {"x-razorpay-signature": sign(body, "old_secret")})


def test_missing_signature_header_is_rejected() -> None:
    with pytest.raises(SignatureMismatch, match="missing"):
        adapter().verify(body_of(), {})


def test_non_ascii_signature_header_is_rejected() -> None:
    body = body_of()
    signature = sign(body, "whsec_test")
    with pytest.raises(SignatureMismatch, match="ASCII"):
        adapter().verify(body, {"x-razorpay-signature": signature[:-1] + "é"})


@pytest.mark.parametrize(
    "signature",
    ["not-a-signature", "sha256=" + "0" * 64, "0" * 64, " " * 64],
    ids=["garbage", "prefixed", "zeros", "spaces"],
)
def test_malformed_signature_header_is_rejected(signature: str) -> None:
    with pytest.raises(SignatureMismatch):
        adapter().verify(body_of(), {"x-razorpay-signature": signature})


def test_uppercase_hex_signature_is_rejected() -> None:
    """Razorpay sends lowercase hex; accepting other spellings would widen what verifies."""
    body = body_of()
    with pytest.raises(SignatureMismatch):
        adapter().verify(body, {"x-razorpay-signature": sign(body, "whsec_test").upper()})


def test_no_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="secret"):
        Razorpay(secrets=())


def test_an_empty_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="secret"):
        Razorpay(secrets=("whsec_test", ""))


# --- event kinds ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "kind"),
    [
        ("payment.authorized", EventKind.PAYMENT_AUTHORIZED),
        ("payment.captured", EventKind.PAYMENT_CAPTURED),
        ("order.paid", EventKind.PAYMENT_CAPTURED),
        ("payment.failed", EventKind.PAYMENT_FAILED),
        ("payment.pending", EventKind.OTHER),
        ("payment.downtime.started", EventKind.OTHER),
        ("some.future.event", EventKind.OTHER),
    ],
)
def test_payment_event_kind(event_type: str, kind: EventKind) -> None:
    assert parse(body_of(event_type)).kind is kind


def test_refund_processed_is_a_processed_refund() -> None:
    assert parse(body_of("refund.processed", refund=refund())).kind is EventKind.REFUND_PROCESSED


def test_refund_created_is_not_acted_on() -> None:
    assert parse(body_of("refund.created", refund=refund())).kind is EventKind.OTHER


def test_payment_fields_come_from_the_payment_entity() -> None:
    event = parse(body_of("payment.captured"))
    assert (event.payment_id, event.merchant_ref) == ("pay_29QQoUBi66xm2f", "order_9A33XWu170gUtm")
    assert (event.amount_paise, event.currency) == (50000, "INR")


def test_order_paid_carries_the_payment_it_captures() -> None:
    order = {"id": "order_9A33XWu170gUtm", "entity": "order", "amount": 50000, "status": "paid"}
    event = parse(body_of("order.paid", order=order))
    assert (event.payment_id, event.merchant_ref) == ("pay_29QQoUBi66xm2f", "order_9A33XWu170gUtm")


def test_refund_fields_come_from_the_refund_entity() -> None:
    body = body_of("refund.processed", payment=None, refund=refund(payment_id="pay_R"))
    event = parse(body)
    assert (event.refund_id, event.refund_amount_paise) == ("rfnd_FP8QHiV938haTz", 20000)
    assert event.payment_id == "pay_R"


def test_a_failed_refund_names_no_intent() -> None:
    """``refund.failed``: no money went back, so its note names no intent (one a person
    cancelled stays cancelled, its amount free)."""
    entity = refund(status="failed", notes={"payhooks_key": "ph0123456789abcdef0123"})
    assert parse(body_of("refund.failed", refund=entity)).refund_key is None


@pytest.mark.parametrize("event", ["refund.processed", "refund.created"])
def test_a_refunds_payhooks_key_note_is_its_key(event: str) -> None:
    """The note payhooks' refund call writes names the intent the refund was sent for, in
    every refund webhook: the intent is found by it before the sender heard Razorpay's id."""
    entity = refund(notes={"payhooks_key": "ph0123456789abcdef0123", "ticket": "T-1"})
    assert parse(body_of(event, refund=entity)).refund_key == "ph0123456789abcdef0123"


@pytest.mark.parametrize(
    "notes", [[], {}, {"ticket": "T-1"}, {"payhooks_key": 7}, {"payhooks_key": ""}, None]
)
def test_a_refund_without_a_usable_payhooks_key_note_names_no_intent(notes: object) -> None:
    """A refund made in Razorpay's dashboard (notes an empty array, or the merchant's own), or
    a key that is no text: no intent named, never a refusal."""
    event = parse(body_of("refund.processed", refund=refund(notes=notes)))
    assert (event.kind, event.refund_key) == (EventKind.REFUND_PROCESSED, None)


def test_a_payhooks_key_note_no_intent_could_have_is_left_out_never_refused() -> None:
    entity = refund(notes={"payhooks_key": "ph\u0007bell"})
    assert storable(parse(body_of("refund.processed", refund=entity))).refund_key is None


def test_other_event_still_names_its_payment() -> None:
    event = parse(body_of("payment.downtime.started"))
    assert (event.payment_id, event.merchant_ref) == ("pay_29QQoUBi66xm2f", "order_9A33XWu170gUtm")


def test_other_event_with_an_odd_amount_is_still_read() -> None:
    """An ignored event is recorded and answered 200, never bounced for a field we do not use."""
    event = parse(body_of("payment.downtime.started", payment=payment(amount="5.00")))
    assert (event.kind, event.amount_paise) == (EventKind.OTHER, None)


def test_null_order_id_gives_no_merchant_ref() -> None:
    assert parse(body_of(payment=payment(order_id=None))).merchant_ref is None


# --- delivery keys --------------------------------------------------------------------------


def test_captured_and_authorized_of_one_payment_have_different_keys() -> None:
    authorized = parse(body_of("payment.authorized")).event_id
    captured = parse(body_of("payment.captured")).event_id
    assert (authorized, captured) == (
        "payment.authorized:pay_29QQoUBi66xm2f",
        "payment.captured:pay_29QQoUBi66xm2f",
    )


def test_order_paid_key_differs_from_payment_captured_key() -> None:
    assert parse(body_of("order.paid")).event_id == "order.paid:pay_29QQoUBi66xm2f"


def test_refund_key_uses_the_refund_id() -> None:
    event = parse(body_of("refund.processed", refund=refund()))
    assert event.event_id == "refund.processed:rfnd_FP8QHiV938haTz"


def test_refund_event_without_refund_id_is_keyed_by_body_not_payment() -> None:
    """Two partial refunds share the payment id; keying on it would swallow the second."""
    body = body_of("refund.created", refund=None)
    assert parse(body).event_id == "refund.created:" + hashlib.sha256(body).hexdigest()


def test_event_without_any_id_is_keyed_by_type_and_body_hash() -> None:
    body = body_of("payment.downtime.started", payment=None)
    assert parse(body).event_id == "payment.downtime.started:" + hashlib.sha256(body).hexdigest()


def test_other_event_with_non_string_payment_id_is_keyed_by_body_hash() -> None:
    body = body_of("payment.downtime.started", payment=payment(id=12))
    assert parse(body).event_id == "payment.downtime.started:" + hashlib.sha256(body).hexdigest()


# --- malformed bodies -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[1, 2]", b'"payment.captured"', b"\xff\xfe{", b"{}", b'{"event": 7}'],
    ids=["text", "array", "string", "binary", "no-event", "event-not-string"],
)
def test_body_that_is_not_an_event_object_is_malformed(body: bytes) -> None:
    with pytest.raises(MalformedPayload):
        parse(body)


def test_nan_amount_is_malformed() -> None:
    body = body_of().replace(b'"amount": 50000', b'"amount": NaN')
    with pytest.raises(MalformedPayload):
        parse(body)


def test_absurdly_nested_body_is_malformed_not_a_crash() -> None:
    with pytest.raises(MalformedPayload):
        parse(b"[" * 100_000 + b"]" * 100_000)


def test_captured_without_payment_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="payment id is missing"):
        parse(body_of("payment.captured", payment=None))


def test_captured_without_amount_is_malformed() -> None:
    entity = payment()
    del entity["amount"]
    with pytest.raises(MalformedPayload, match="amount is missing"):
        parse(body_of("payment.captured", payment=entity))


@pytest.mark.parametrize("type_", ["payment.captured", "payment.authorized"])
def test_a_payment_naming_no_currency_is_malformed_never_taken_for_rupees(type_: str) -> None:
    entity = payment()
    del entity["currency"]
    with pytest.raises(MalformedPayload, match="payment currency is missing"):
        parse(body_of(type_, payment=entity))


@pytest.mark.parametrize("amount", [True, -1, "50000", 500.5], ids=["bool", "neg", "str", "frac"])
def test_amount_that_is_not_non_negative_integer_paise_is_malformed(amount: object) -> None:
    with pytest.raises(MalformedPayload, match="amount"):
        parse(body_of("payment.captured", payment=payment(amount=amount)))


def test_payment_id_that_is_not_a_string_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="payment id"):
        parse(body_of("payment.failed", payment=payment(id=12)))


@pytest.mark.parametrize(
    ("entities", "field"),
    [
        ({"payment": payment(id="pay_\ud800")}, "payment id"),
        ({"payment": payment(order_id="order_\ud800")}, "payment order_id"),
        ({"payment": payment(currency="IN\udc00")}, "payment currency"),
        ({"refund": refund(id="rfnd_\ud800")}, "refund id"),
    ],
)
def test_a_lone_surrogate_in_a_field_acted_on_is_malformed(entities: dict, field: str) -> None:
    event = "refund.processed" if "refund" in entities else "payment.captured"
    with pytest.raises(MalformedPayload, match=f"{field} is not valid text"):
        parse(body_of(event, **entities))


def test_a_lone_surrogate_in_the_event_name_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="event is not valid text"):
        parse(body_of("payment.captured\ud800"))


def test_other_event_with_a_lone_surrogate_leaves_the_field_out() -> None:
    """Ignored and answered 200, like any odd field of an event payhooks does not act on."""
    event = parse(body_of("payment.downtime.started", payment=payment(id="pay_\ud800")))
    assert (event.kind, event.payment_id) == (EventKind.OTHER, None)


def test_refund_processed_without_refund_amount_is_malformed() -> None:
    entity = refund()
    del entity["amount"]
    with pytest.raises(MalformedPayload, match="refund amount is missing"):
        parse(body_of("refund.processed", refund=entity))


def test_refund_processed_without_its_payment_id_is_malformed() -> None:
    with pytest.raises(MalformedPayload, match="refund payment_id is missing"):
        parse(body_of("refund.processed", refund=refund(payment_id=None)))

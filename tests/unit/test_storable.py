"""Authentic bytes can carry values PostgreSQL cannot store; they are refused as malformed."""

from __future__ import annotations

from dataclasses import replace

import pytest

from payhooks.events import Dispute, Event, EventKind, Provider
from payhooks.intake.ingest import MAX_PAISE, MAX_TEXT_CHARS, storable
from payhooks.plumbing.errors import MalformedPayload

EVENT = Event(
    provider=Provider.PAYU,
    kind=EventKind.PAYMENT_CAPTURED,
    event_type="payment.success",
    event_id="1:success",
    payment_id="t1",
    amount_paise=100,
    payload_sha256="x",
)


def test_ordinary_event_is_storable():
    assert storable(EVENT) is EVENT


def test_nul_in_an_id_is_malformed():
    with pytest.raises(MalformedPayload, match="payment_id"):
        storable(replace(EVENT, payment_id="t\x001"))


def test_overlong_id_is_malformed():
    with pytest.raises(MalformedPayload, match="event_id"):
        storable(replace(EVENT, event_id="k" * (MAX_TEXT_CHARS + 1)))


def test_amount_beyond_range_is_malformed():
    with pytest.raises(MalformedPayload, match="amount_paise"):
        storable(replace(EVENT, amount_paise=MAX_PAISE + 1))


@pytest.mark.parametrize("field", ["event_type", "event_id", "payment_id", "merchant_ref"])
@pytest.mark.parametrize("char", ["\n", "\r", "\x1b", "\x85", "\u2028"])
def test_a_control_character_in_a_text_field_is_malformed(field, char):
    """It would reach an email subject (a header), a log line or an operator's terminal."""
    with pytest.raises(MalformedPayload, match=field):
        storable(replace(EVENT, **{field: f"payment{char}Bcc: x@example.com"}))


def test_a_printable_unicode_id_is_storable():
    assert storable(replace(EVENT, merchant_ref="ordre-été-42"))


@pytest.mark.parametrize(
    "field", ["event_type", "event_id", "payment_id", "merchant_ref", "refund_id", "currency"]
)
@pytest.mark.parametrize("char", ["\ud800", "\udfff"])
def test_a_lone_surrogate_in_a_text_field_is_malformed(field, char):
    """JSON can spell it ("\\ud800"); PostgreSQL, a log line or an answer cannot hold it."""
    with pytest.raises(MalformedPayload, match=f"{field} is not valid text"):
        storable(replace(EVENT, **{field: f"pay_{char}1"}))


def test_a_lone_surrogate_in_the_bank_reference_leaves_it_out():
    assert storable(replace(EVENT, bank_ref="4187\ud80034")).bank_ref is None


def test_a_character_beyond_the_basic_plane_is_text():
    assert (
        storable(replace(EVENT, merchant_ref="order-\U0001f600")).merchant_ref == "order-\U0001f600"
    )


DISPUTED = replace(
    EVENT, kind=EventKind.DISPUTE_OPENED, event_type="payment.dispute.created",
    dispute=Dispute(id="disp_1", amount_paise=100, reason="fraud"),
)  # fmt: skip


def test_a_dispute_with_a_nul_in_its_id_is_malformed():
    with pytest.raises(MalformedPayload, match="dispute id"):
        storable(replace(DISPUTED, dispute=Dispute(id="disp\x001")))


def test_a_dispute_amount_beyond_bigint_is_malformed():
    with pytest.raises(MalformedPayload, match="dispute amount_paise"):
        storable(replace(DISPUTED, dispute=Dispute(id="d", amount_paise=MAX_PAISE + 1)))


def test_an_ordinary_dispute_is_storable():
    assert storable(DISPUTED) is DISPUTED


@pytest.mark.parametrize(
    ("field", "value"),
    [("payment_id", 7700112233), ("refund_id", ["r1"]), ("merchant_ref", {"id": "o1"}),
     ("currency", True), ("amount_paise", "100"), ("refund_amount_paise", 1.5),
     ("amount_paise", True)],
)  # fmt: skip
def test_a_field_of_another_json_type_than_it_holds_is_malformed_never_a_type_error(field, value):
    """A reader that hands on a gateway's value as it came (PhonePe's ``refundId`` written as
    the number 7700112233) reaches ``storable``: it raised ``TypeError``, which a pass logged
    as its own failure, not as an answer it cannot read."""
    with pytest.raises(MalformedPayload, match=field):
        storable(replace(EVENT, **{field: value}))

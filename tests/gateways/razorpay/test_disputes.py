"""Razorpay's dispute webhooks, read from payhooks' own bodies in the shape of the six its
documentation publishes (tests/data/razorpay/disputes/README.md): the kind each event is, the
dispute's figures, the payment and order it names, and its delivery key with and without the
event id header."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from payhooks.events import EventKind, storable
from payhooks.gateways.razorpay import Razorpay, sign
from payhooks.plumbing.errors import MalformedPayload

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "razorpay" / "disputes"
ADAPTER = Razorpay(secrets=("whsec",))


def sample(name: str) -> bytes:
    return (SAMPLES / f"payment.dispute.{name}.json").read_bytes()


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("created", EventKind.DISPUTE_OPENED),
        ("under_review", EventKind.DISPUTE_UNDER_REVIEW),
        ("action_required", EventKind.DISPUTE_ACTION_REQUIRED),
        ("won", EventKind.DISPUTE_WON),
        ("lost", EventKind.DISPUTE_LOST),
        ("closed", EventKind.DISPUTE_CLOSED),
    ],
)
def test_each_documented_shape_is_its_kind_and_verifies(name: str, kind: EventKind) -> None:
    body = sample(name)
    ADAPTER.verify(body, {"x-razorpay-signature": sign(body, "whsec")})
    event = storable(ADAPTER.parse(body, {}))
    assert (event.kind, event.event_type) == (kind, f"payment.dispute.{name}")
    assert event.dispute is not None and event.dispute.id.startswith("disp_")


def test_the_lost_body_says_what_was_taken_back_and_when_to_answer() -> None:
    event = ADAPTER.parse(sample("lost"), {})
    assert (event.payment_id, event.merchant_ref, event.currency) == (
        "pay_Nq4TzLb8WcXe2K", "order_Nq4SkV1mPd7yHa", "INR",
    )  # fmt: skip
    dispute = event.dispute
    assert dispute is not None
    assert (dispute.id, dispute.amount_paise, dispute.deducted_paise) == (
        "disp_Ow3JcY8rKm5TuD", 84_900, 84_900,
    )  # fmt: skip
    assert (dispute.phase, dispute.status, dispute.reason) == (
        "chargeback", "lost", "processed_invalid_expired_card",
    )  # fmt: skip
    assert dispute.respond_by == datetime.fromtimestamp(1737052200, UTC)
    assert dispute.reported_at == datetime.fromtimestamp(1737014622, UTC)
    assert event.amount_paise is None  # the dispute's amount is never compared with a cart


def test_action_required_comes_with_the_dispute_still_open() -> None:
    event = ADAPTER.parse(sample("action_required"), {})
    assert event.kind is EventKind.DISPUTE_ACTION_REQUIRED
    assert event.dispute is not None and event.dispute.status == "open"


def test_a_body_naming_no_order_names_its_payment() -> None:
    event = ADAPTER.parse(sample("closed"), {})
    assert (event.payment_id, event.merchant_ref) == ("pay_Ob2LmQ7rTy4KvN", None)
    assert event.dispute is not None and event.dispute.phase == "fraud"


def test_the_key_is_the_event_id_header_else_event_dispute_and_time() -> None:
    body = sample("created")
    assert ADAPTER.parse(body, {"x-razorpay-event-id": "evt_9"}).event_id == "evt_9"
    derived = "payment.dispute.created:disp_Ow3JcY8rKm5TuD:1736414338"
    assert ADAPTER.parse(body, {}).event_id == derived
    assert ADAPTER.parse(body, {"x-razorpay-event-id": "a:b"}).event_id == derived


def test_each_report_of_one_dispute_has_a_key_of_its_own() -> None:
    keys = {ADAPTER.parse(sample(n), {}).event_id for n in ("created", "action_required", "lost")}
    assert len(keys) == 3


def test_a_dispute_without_its_id_is_malformed() -> None:
    body = sample("created").replace(b'"id": "disp_Ow3JcY8rKm5TuD"', b'"id": null')
    with pytest.raises(MalformedPayload, match="dispute id is missing"):
        ADAPTER.parse(body, {})


def test_a_dispute_amount_that_is_not_paise_is_malformed() -> None:
    body = sample("created").replace(b'"amount": 84900', b'"amount": "849.00"')
    with pytest.raises(MalformedPayload, match="dispute amount"):
        ADAPTER.parse(body, {})


def test_an_odd_deadline_is_left_out_never_the_report() -> None:
    body = sample("created").replace(b'"respond_by": 1737052200', b'"respond_by": "soon"')
    event = ADAPTER.parse(body, {})
    assert event.dispute is not None and event.dispute.respond_by is None

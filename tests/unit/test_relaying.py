"""The relay's pure parts: which message id an event gets, and which events a pass takes."""

from __future__ import annotations

import pytest

from payhooks.events import Event, EventKind, Provider
from payhooks.intake.relaying import message_id, payment_of, relayed
from payhooks.relay.relaying import Queued, next_batch
from payhooks.service.config import Settings
from payhooks.service.errors import SettingError


def event(kind: EventKind, **more: object) -> Event:
    fields = {"provider": Provider.RAZORPAY, "kind": kind, "event_type": "x",
              "event_id": "evt_1", "payload_sha256": "0" * 64, "payment_id": "pay_1",
              "merchant_ref": "order_1", **more}  # fmt: skip
    return Event(**fields)  # type: ignore[arg-type]


def test_a_capture_is_one_event_whichever_delivery_brought_it():
    first = event(EventKind.PAYMENT_CAPTURED, event_id="evt_captured")
    second = event(EventKind.PAYMENT_CAPTURED, event_id="evt_order_paid")
    assert message_id(first) == message_id(second) == "razorpay:pay_1:payment_captured"


def test_a_refund_is_keyed_by_its_refund_id():
    refund = event(EventKind.REFUND_PROCESSED, refund_id="rfnd_1")
    assert message_id(refund) == "razorpay:refund:rfnd_1"
    assert payment_of(refund) == "razorpay:pay_1"


def test_any_other_kind_is_keyed_by_the_claims_key():
    assert message_id(event(EventKind.PAYMENT_FAILED)) == "razorpay:evt_1"
    assert message_id(event(EventKind.OTHER, event_id="evt_9")) == "razorpay:evt_9"


def test_the_message_names_the_order_and_its_place():
    message = relayed(event(EventKind.PAYMENT_CAPTURED, amount_paise=100), "ord_1")
    assert message.subject == "razorpay.payment_captured"
    assert '"order_id":"ord_1"' in message.body and '"amount_paise":100' in message.body


def queued(ident: int, payment: str, *, due: bool = True) -> Queued:
    return Queued(id=ident, dedupe_key=f"k{ident}", subject="s", body="{}",
                  message_id=f"m{ident}", payment=payment, due=due, attempts=0)  # fmt: skip


def test_a_pass_takes_each_payments_first_event_only():
    window = [queued(1, "a"), queued(2, "a"), queued(3, "b"), queued(4, "c"), queued(5, "b")]
    assert [q.id for q in next_batch(window, 10)] == [1, 3, 4]


def test_an_event_waiting_out_a_refusal_holds_back_its_payments_later_ones():
    window = [queued(1, "a", due=False), queued(2, "a"), queued(3, "b")]
    assert [q.id for q in next_batch(window, 10)] == [3]


def test_a_pass_takes_at_most_a_batch():
    window = [queued(n, f"p{n}") for n in range(10)]
    assert [q.id for q in next_batch(window, 3)] == [0, 1, 2]


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("PAYHOOKS_RELAY_NATS_URL", "http://nats:4222", "nats:// or tls://"),
        ("PAYHOOKS_RELAY_RABBITMQ_URL", "amqp://guest:secret@", "with a host"),
        ("PAYHOOKS_RELAY_RABBITMQ_URL", "amqp://guest:se cret@h/", "spaces"),
        ("PAYHOOKS_RELAY_SUBJECT_PREFIX", "pay.>", "letters, digits"),
        ("PAYHOOKS_RELAY_BATCH", "5000", "from 1 to 1000"),
    ],
)
def test_a_bad_relay_setting_is_refused_naming_it_never_its_secret(variable, value, said):
    with pytest.raises(SettingError) as refused:
        Settings.from_env({variable: value})
    assert variable in str(refused.value) and said in str(refused.value)
    assert "secret" not in str(refused.value)

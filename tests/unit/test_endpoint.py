"""The webhook step every front door shares (``payhooks.endpoint``): which gateway, one limit
on its name, and what is answered and logged. The doors' own tests drive it over HTTP."""

from __future__ import annotations

import logging

import pytest

from payhooks import Provider
from payhooks.intake.endpoint import MAX_GATEWAY_CHARS, Endpoint, served, unfolded
from payhooks.intake.ingest import Outcome, Receipt
from payhooks.plumbing.errors import (
    LockTimeout,
    PayloadTooLarge,
    ProviderNotConfigured,
    SerializationConflict,
)
from payhooks.plumbing.retries import Retries
from tests.factories import ADAPTERS, GATEWAY

RAZORPAY = ADAPTERS[Provider.RAZORPAY]
log = logging.getLogger("payhooks.test_endpoint")


def endpoint() -> Endpoint:
    return Endpoint(served(ADAPTERS.values()), log)


def test_the_bound_is_the_gateways_adapters():
    assert endpoint().bound("razorpay") == RAZORPAY.max_body_bytes


def test_a_name_at_the_limit_is_quoted_whole():
    name = "a" * MAX_GATEWAY_CHARS
    with pytest.raises(ProviderNotConfigured) as refused:
        endpoint().bound(name)
    assert refused.value.provider == name


def test_a_name_past_the_limit_is_clipped_to_it():
    with pytest.raises(ProviderNotConfigured) as refused:
        endpoint().bound("a" * (MAX_GATEWAY_CHARS + 1))
    assert refused.value.provider == "a" * (MAX_GATEWAY_CHARS - 1) + "\u2026"


def test_a_refusal_is_answered_from_the_table_and_logged_once(caplog):
    caplog.set_level(logging.INFO, logger=log.name)
    reply = endpoint().refused("b" * 10_000, ProviderNotConfigured("b" * 10_000))
    assert (reply.status, reply.body["error"], reply.log_name) == (
        404,
        "provider_not_configured",
        "webhook_rejected",
    )
    [record] = caplog.records
    assert record.getMessage() == "webhook_rejected"
    assert record.provider == "b" * (MAX_GATEWAY_CHARS - 1) + "\u2026"


def test_a_body_refused_unread_asks_the_door_to_close_the_connection():
    reply = endpoint().refused("razorpay", PayloadTooLarge("razorpay", "too big"))
    assert (reply.status, reply.close) == (413, True)


def test_a_forged_delivery_is_refused_before_the_claim_runs():
    def claim(received):  # type: ignore[no-untyped-def]
        raise AssertionError("claimed a forged delivery")

    pairs = [("x-razorpay-signature", "0" * 64)]
    reply = endpoint().deliver("razorpay", b"{}", pairs, claim)
    assert (reply.status, reply.outcome, reply.received) == (401, "signature_mismatch", None)


def capture() -> tuple[list[tuple[str, str]], bytes]:
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_endpoint0001", order_id="order_ep1", amount_paise=100
    )
    return list(delivery.headers.items()), delivery.body


def test_the_sync_door_answers_the_claims_receipt_without_an_event_loop():
    pairs, body = capture()

    def claim(received):  # type: ignore[no-untyped-def]
        return Receipt(outcome=Outcome.PROCESSED, event=received.event, order_id="ord_1")

    reply = endpoint().deliver("razorpay", body, pairs, claim)
    assert (reply.status, reply.body["order_id"], reply.log_name) == (
        200,
        "ord_1",
        "webhook_processed",
    )


def test_a_claims_bug_is_shown_as_a_500_and_raised_by_the_sync_door():
    pairs, body = capture()
    seen = []

    def claim(received):  # type: ignore[no-untyped-def]
        raise RuntimeError("a handler's bug")

    with pytest.raises(RuntimeError, match="a handler's bug"):
        endpoint().deliver("razorpay", body, pairs, claim, seen.append)
    assert [(reply.status, reply.outcome) for reply in seen] == [(500, "internal_error")]


def conflicted(times: int, sqlstate: str = "40001"):  # type: ignore[no-untyped-def]
    """A claim that loses ``times`` serialization conflicts, then is applied; ``calls`` counts."""
    calls: list[int] = []

    def claim(received):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) <= times:
            raise SerializationConflict(sqlstate, received.event.event_id)
        return Receipt(outcome=Outcome.PROCESSED, event=received.event, order_id="ord_1")

    return claim, calls


def test_a_claim_that_lost_a_conflict_is_run_again_and_each_retry_logged(caplog):
    caplog.set_level(logging.INFO, logger=log.name)
    pairs, body = capture()
    claim, calls = conflicted(2, "40P01")
    reply = endpoint().deliver("razorpay", body, pairs, claim)
    assert (reply.status, reply.outcome, reply.retries, len(calls)) == (200, "processed", 2, 3)
    retried = [r for r in caplog.records if r.getMessage() == "webhook_conflict_retried"]
    assert [(r.sqlstate, r.retry) for r in retried] == [("40P01", 1), ("40P01", 2)]


def test_a_conflict_past_the_last_attempt_is_answered_503_with_its_retries():
    pairs, body = capture()
    claim, calls = conflicted(10)
    reply = endpoint().deliver("razorpay", body, pairs, claim)
    assert (reply.status, reply.outcome, reply.retries) == (503, "database_unavailable", 2)
    assert len(calls) == 3


def test_no_retry_is_made_when_the_window_is_closed():
    pairs, body = capture()
    claim, calls = conflicted(1)
    closed = Endpoint(served(ADAPTERS.values()), log, retries=Retries(window_s=0))
    reply = closed.deliver("razorpay", body, pairs, claim)
    assert (reply.status, reply.retries, len(calls)) == (503, 0, 1)


def test_another_unavailability_is_not_retried():
    pairs, body = capture()
    calls: list[int] = []

    def claim(received):  # type: ignore[no-untyped-def]
        calls.append(1)
        raise LockTimeout(received.event.event_id)

    reply = endpoint().deliver("razorpay", body, pairs, claim)
    assert (reply.status, reply.retries, len(calls)) == (503, 0, 1)


def test_two_adapters_for_one_gateway_are_refused():
    with pytest.raises(ValueError, match="two adapters for razorpay"):
        served([RAZORPAY, RAZORPAY])


def test_a_folded_signature_header_is_split_back_into_its_copies():
    pairs = unfolded([("X-Razorpay-Signature", "ab, cd"), ("Accept", "a, b")], RAZORPAY)
    assert pairs == [
        ("X-Razorpay-Signature", "ab"),
        ("X-Razorpay-Signature", "cd"),
        ("Accept", "a, b"),
    ]


def test_a_failure_to_record_the_reply_never_changes_the_answer(caplog):
    """The claim may have committed: a log or metrics hook that raises is logged, and the
    gateway still gets the claim's answer (else it would retry work already done)."""
    pairs, body = capture()

    def claim(received):  # type: ignore[no-untyped-def]
        return Receipt(outcome=Outcome.PROCESSED, event=received.event, order_id="ord_1")

    def broken(reply):  # type: ignore[no-untyped-def]
        raise RuntimeError("can't start new thread")

    noted = Endpoint(served(ADAPTERS.values()), log, broken)
    with caplog.at_level(logging.ERROR, logger="payhooks"):
        reply = noted.deliver("razorpay", body, pairs, claim)
    assert reply.status == 200 and reply.body["status"] == "processed"
    assert "webhook_reply_unrecorded" in caplog.text


def test_a_delivery_answered_under_another_key_is_logged_and_noted_under_it():
    """A PayU post naming a second ``mihpayid`` is recorded and answered under a key of its
    own (``<txnid>:success:<mihpayid>``): its log line and delivery-log row named the first
    post's key, and the console counted the second payment's requests as the first post's
    copies."""
    from dataclasses import replace

    pairs, body = capture()
    step = endpoint()
    received = step.received("razorpay", body, pairs)
    second = replace(received.event, event_id=received.event.event_id + ":pay_second")
    receipt = Receipt(outcome=Outcome.CONFIRMING, event=second)
    noted: list = []

    def claim(delivery):  # type: ignore[no-untyped-def]
        return receipt

    reply = step.deliver("razorpay", body, pairs, claim, noted.append)
    assert reply.body["event_id"] == second.event_id
    assert reply.log_fields["event_id"] == second.event_id
    assert [r.received.event.event_id for r in noted] == [second.event_id]
    assert reply.received is not None and reply.received.body == body  # the bytes as sent

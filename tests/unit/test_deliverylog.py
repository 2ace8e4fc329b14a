"""The delivery log's lines: what a refused request's line keeps, and what it never does."""

from __future__ import annotations

import logging

import pytest

from payhooks.gateways.razorpay import Razorpay
from payhooks.intake.endpoint import Arrival, Endpoint, Reply
from payhooks.operations.deliverylog import line
from payhooks.plumbing.errors import ProviderNotConfigured, SignatureMismatch

ENDPOINT = Endpoint.serving([Razorpay(secrets=("whsec_unit",))], logging.getLogger("test"))


def refused_for(name: str) -> tuple[Arrival, Reply]:
    with pytest.raises(ProviderNotConfigured) as refusal:
        ENDPOINT.adapter(name)
    return Arrival.now(name, b"{}"), ENDPOINT.refused(name, refusal.value)


@pytest.mark.parametrize("name", ["forged-name", "<script>alert(1)</script>", "x" * 300])
def test_a_refusal_for_an_unknown_gateway_keeps_no_word_of_the_name_a_client_chose(name):
    arrival, reply = refused_for(name)
    noted = line(arrival, reply)
    assert (noted.provider, noted.outcome, noted.verified) == (
        "unknown",
        "provider_not_configured",
        False,
    )
    assert noted.detail and name[:10] not in noted.detail


def test_the_answer_to_an_unknown_gateway_still_names_it():
    _, reply = refused_for("forged-name")
    assert reply.body["detail"] == "provider 'forged-name' is not configured"


def test_a_refusal_for_a_known_gateway_keeps_the_steps_words():
    reply = ENDPOINT.refused("razorpay", SignatureMismatch("razorpay", "signature missing"))
    noted = line(Arrival.now("razorpay", b"{}"), reply)
    assert (noted.provider, noted.detail) == ("razorpay", "razorpay: signature missing")


def test_an_authentic_delivery_refused_for_now_keeps_the_steps_words():
    """A verified delivery answered 503 (the database away, the pool's wait over) was logged
    with no detail, though its answer said why."""
    from payhooks.gateways.razorpay import sign
    from payhooks.plumbing.errors import DatabaseUnavailable

    body = (
        b'{"event":"payment.captured","payload":{"payment":{"entity":{"id":"pay_unit0001",'
        b'"order_id":"order_unit0001","amount":100,"currency":"INR","status":"captured"}}}}'
    )
    headers = (("x-razorpay-signature", sign(body, "whsec_unit")),
               ("x-razorpay-event-id", "evt_unit0001"))  # fmt: skip
    received = ENDPOINT.received("razorpay", body, headers)
    reply = ENDPOINT.failed(received, DatabaseUnavailable("database unavailable: PoolTimeout"))
    noted = line(Arrival.now("razorpay", body), reply)
    assert (noted.status, noted.verified) == (503, True)
    assert noted.detail == "database unavailable: PoolTimeout"

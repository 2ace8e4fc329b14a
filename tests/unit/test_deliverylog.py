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

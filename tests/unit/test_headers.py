"""header_map: the raw (name, value) pairs of a request, as one unambiguous mapping; and the
headers kept with a delivery, which must be storable."""

from __future__ import annotations

import importlib

import pytest

from payhooks.events import Provider
from payhooks.gateways import Adapter, cashfree, razorpay
from payhooks.gateways.cashfree import Cashfree
from payhooks.gateways.payu import PayU
from payhooks.gateways.razorpay import Razorpay
from payhooks.intake.ingest import header_map, receive
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch
from tests.gateways.cashfree.test_adapter import payment_body
from tests.unit.test_bank_references import razorpay_event

RAZORPAY = Razorpay(secrets=("s",))
ADAPTERS: list[Adapter] = [
    RAZORPAY,
    Cashfree(secrets=("s",)),
    PayU(merchant_key="k", salts=("s",)),
]
READ = [(adapter, name) for adapter in ADAPTERS for name in adapter.headers_read]


def test_names_are_lower_cased():
    pairs = [("X-Razorpay-Signature", "abc"), ("Content-Type", "application/json")]
    assert header_map(pairs, RAZORPAY) == {
        "x-razorpay-signature": "abc",
        "content-type": "application/json",
    }


@pytest.mark.parametrize(("adapter", "name"), READ, ids=[f"{a.provider}-{n}" for a, n in READ])
def test_a_header_the_adapter_reads_sent_twice_with_different_values_is_refused(adapter, name):
    with pytest.raises(SignatureMismatch) as caught:
        header_map([(name, "one"), (name.upper(), "two")], adapter)
    assert caught.value.provider == adapter.provider
    assert name in caught.value.reason


def test_every_provider_but_payu_has_headers_to_guard():
    guarded = {adapter.provider for adapter, _ in READ}
    assert guarded == {Provider.RAZORPAY, Provider.CASHFREE}


def test_identical_repeats_of_a_header_the_adapter_reads_pass():
    pairs = [("x-razorpay-signature", "abc"), ("X-Razorpay-Signature", "abc")]
    assert header_map(pairs, RAZORPAY) == {"x-razorpay-signature": "abc"}


def test_repeats_of_a_header_the_adapter_ignores_keep_the_first():
    pairs = [("accept", "text/plain"), ("Accept", "application/json")]
    assert header_map(pairs, RAZORPAY) == {"accept": "text/plain"}


@pytest.mark.parametrize("values", [("a", "b"), ("b", "a")])
def test_the_order_of_conflicting_copies_does_not_matter(values):
    pairs = [("x-razorpay-event-id", value) for value in values]
    with pytest.raises(SignatureMismatch):
        header_map(pairs, RAZORPAY)


def test_header_map_is_exported_for_framework_integrations():
    module = importlib.import_module("payhooks.intake.ingest")
    assert "header_map" in module.__all__


def cashfree_headers(body: bytes, **extra: str) -> dict[str, str]:
    timestamp = "1746427759733"
    return {
        "x-webhook-timestamp": timestamp,
        "x-webhook-signature": cashfree.sign(body, timestamp, "s"),
        **extra,
    }


@pytest.mark.parametrize("value", ["2025-01-01\x00", "2025\ud800"])
def test_a_kept_header_that_cannot_be_stored_is_malformed(value):
    """A framework may pass on what an HTTP server would refuse (a NUL) or cannot decode (a
    lone surrogate); the version header is not signed, so a genuine body may come with it."""
    body = payment_body()
    headers = cashfree_headers(body, **{"x-webhook-version": value})
    with pytest.raises(MalformedPayload, match="x-webhook-version is not valid text"):
        receive(Cashfree(secrets=("s",)), body, headers)


def test_a_key_header_holding_a_lone_surrogate_is_malformed():
    body = razorpay_event({})
    headers = {
        "x-razorpay-signature": razorpay.sign(body, "s"),
        "x-razorpay-event-id": "evt_\ud800",
    }
    with pytest.raises(MalformedPayload, match="event_id is not valid text"):
        receive(RAZORPAY, body, headers)

"""header_map: the raw (name, value) pairs of a request, as one unambiguous mapping."""

from __future__ import annotations

import importlib

import pytest

from payhooks.errors import SignatureMismatch
from payhooks.events import Provider
from payhooks.ingest import header_map
from payhooks.providers import Adapter
from payhooks.providers.cashfree import Cashfree
from payhooks.providers.payu import PayU
from payhooks.providers.razorpay import Razorpay

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
    module = importlib.import_module("payhooks.ingest")  # payhooks.ingest is the function
    assert "header_map" in module.__all__

"""WSGI folds a repeated header into one value; the headers an adapter reads are unfolded."""

from __future__ import annotations

import pytest

from payhooks import SignatureMismatch, header_map
from payhooks.events import Provider
from payhooks.flask import unfolded
from tests.factories import ADAPTERS

RAZORPAY = ADAPTERS[Provider.RAZORPAY]


def test_a_folded_signature_header_is_split_into_the_copies_sent():
    pairs = unfolded([("X-Razorpay-Signature", "abc,def")], RAZORPAY)
    assert pairs == [("X-Razorpay-Signature", "abc"), ("X-Razorpay-Signature", "def")]


def test_copies_folded_with_a_comma_and_a_space_are_split_too():
    assert unfolded([("X-Razorpay-Event-Id", "evt_1, evt_1")], RAZORPAY) == [
        ("X-Razorpay-Event-Id", "evt_1"),
        ("X-Razorpay-Event-Id", "evt_1"),
    ]


def test_headers_the_adapter_does_not_read_stay_whole():
    assert unfolded([("Accept", "text/html, application/json")], RAZORPAY) == [
        ("Accept", "text/html, application/json")
    ]


def test_identical_folded_copies_give_one_value():
    headers = header_map(unfolded([("X-Razorpay-Signature", "abc,abc")], RAZORPAY), RAZORPAY)
    assert headers == {"x-razorpay-signature": "abc"}


def test_different_folded_copies_are_refused():
    with pytest.raises(SignatureMismatch, match="more than once"):
        header_map(unfolded([("X-Razorpay-Signature", "abc,def")], RAZORPAY), RAZORPAY)

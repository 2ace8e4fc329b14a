"""The adapters' shared field readers (payhooks.gateways._common): a field an event payhooks
acts on is refused when odd or missing, the same field of an ignored event is left out."""

from __future__ import annotations

from decimal import Decimal

import pytest

from payhooks.events import Provider
from payhooks.gateways._common import optional_paise, refuse, require, require_secrets, same_id
from payhooks.gateways.cashfree import Cashfree
from payhooks.gateways.juspay import Juspay
from payhooks.gateways.payu import PayU
from payhooks.gateways.phonepe import PhonePe
from payhooks.gateways.razorpay import Razorpay
from payhooks.plumbing.errors import MalformedPayload

P = Provider.CASHFREE


def test_refuse_raises_for_a_strict_field_with_the_problem_as_said():
    with pytest.raises(MalformedPayload, match="amount is odd"):
        refuse("amount is odd", strict=True, provider=P)


def test_refuse_lets_a_lenient_field_be_left_out():
    refuse("amount is odd", strict=False, provider=P)


def test_optional_paise_reads_rupees_and_leaves_a_missing_amount_out():
    assert optional_paise(Decimal("12.34"), "amount", strict=True, provider=P) == 1234
    assert optional_paise(None, "amount", strict=True, provider=P) is None


def test_optional_paise_refuses_a_strict_odd_amount_and_leaves_a_lenient_one_out():
    with pytest.raises(MalformedPayload, match="amount is not a whole number of paise"):
        optional_paise(Decimal("1.234"), "amount", strict=True, provider=P)
    assert optional_paise(Decimal("1.234"), "amount", strict=False, provider=P) is None


def test_a_negative_amount_is_said_to_be_negative():
    with pytest.raises(MalformedPayload, match=r"payment_amount is negative: Decimal\('-250.00'\)"):
        optional_paise(Decimal("-250.00"), "payment_amount", strict=True, provider=P)


def test_require_names_the_first_missing_field():
    with pytest.raises(MalformedPayload, match="order_id is missing"):
        require({"id": "x", "order_id": None, "amount": None}, provider=P)
    require({"id": "x", "amount": 0}, provider=P)


@pytest.mark.parametrize("secrets", [(), ("",), ("a", "")])
def test_require_secrets_refuses_none_or_an_empty_one(secrets):
    with pytest.raises(ValueError, match=r"^needs one$"):
        require_secrets(secrets, "needs one")


def test_require_secrets_takes_several():
    require_secrets(("new", "old"), "needs one")


@pytest.mark.parametrize(
    "make",
    [
        lambda one: Razorpay(secrets=one),
        lambda one: Cashfree(secrets=one),
        lambda one: PayU(merchant_key="key", salts=one),
        lambda one: PhonePe(credentials=one),
        lambda one: Juspay(credentials=one),
    ],
    ids=["razorpay", "cashfree", "payu", "phonepe", "juspay"],
)
def test_one_secret_given_as_a_string_is_refused_not_read_as_one_per_character(make):
    """``Razorpay(secrets="whsec_x")`` would verify a signature keyed with "w" alone: a string
    is a sequence of one-character strings. It is refused at once, saying how to write it."""
    with pytest.raises(TypeError, match=r"a tuple of strings, not one string"):
        make("user:whsec_example")


@pytest.mark.parametrize(
    ("found", "asked", "same"),
    [
        ("403993715521889530", "403993715521889530", True),
        (" 403993715521889530 ", "403993715521889530", True),  # PayU pads its ids
        ("403993715521889540", "403993715521889530", False),  # text is the id exactly
        (403993715521889540, "403993715521889530", True),  # a double's rounding of it
        (403993715521889536, "403993715521889530", True),  # the double itself, in full
        (403993715521889600, "403993715521889530", False),  # another double
        (9007199254740993, "9007199254740992", True),  # just past 2**53: one double
        (9007199254740991, "9007199254740990", False),  # below it a number is exact
        (11111111111, "11111111111", True),
        (403993715521889540, "4039937155218895xx", False),
        (10**400, "1" + "0" * 400, True),  # past a double's range: equal or nothing
        (10**400, "9" * 400, False),
        (True, "1", False),
        ([403993715521889530], "403993715521889530", False),
        (Decimal("403993715521889530"), "403993715521889530", False),
    ],
)
def test_an_id_an_answer_names_is_the_one_asked_exactly_or_as_a_double_rounds_it(
    found, asked, same
):
    assert same_id(found, asked) is same


# A time PostgreSQL stores but Python cannot read back (before year 1 once in UTC, after 9999)
# failed every later read of its table: one dispute's odd deadline stopped every dispute alert.
UNREADABLE_TIMES = ["0001-01-01T00:00:00", "0001-01-01T03:00:00+05:30", "9999-12-31T23:59:59-05:00",
                    "9999-12-31T20:00:00"]  # fmt: skip


@pytest.mark.parametrize("written", UNREADABLE_TIMES)
def test_a_time_outside_what_is_read_back_is_no_time(written):
    from payhooks.gateways._common import iso_time

    assert iso_time(written) is None
    assert iso_time("2024-11-28T23:59:59") is not None


@pytest.mark.parametrize("written", UNREADABLE_TIMES)
def test_a_settlement_time_outside_what_is_read_back_is_malformed(written):
    from payhooks.gateways._settlements import iso_time

    with pytest.raises(MalformedPayload, match="settled_on is out of range"):
        iso_time(P, {"settled_on": written}, "settled_on")

"""The adapters' shared field readers (payhooks.gateways._common): a field an event payhooks
acts on is refused when odd or missing, the same field of an ignored event is left out."""

from __future__ import annotations

from decimal import Decimal

import pytest

from payhooks.events import Provider
from payhooks.gateways._common import (
    load_json_object,
    optional_paise,
    paise_field,
    refuse,
    require,
    require_secrets,
    same_id,
)
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
    with pytest.raises(MalformedPayload, match="amount has a fraction of a paisa"):
        optional_paise(Decimal("1.234"), "amount", strict=True, provider=P)
    assert optional_paise(Decimal("1.234"), "amount", strict=False, provider=P) is None


# A refusal's words reach the gateway's dashboard and the operator: what was refused and why,
# the value as the gateway wrote it, never Python's repr of it (Decimal('12000.0')).
RUPEES_REFUSED = [
    (Decimal("-250.00"), "payment_amount is negative: -250.00"),
    (Decimal("1.234"), "payment_amount has a fraction of a paisa: 1.234 (rupees take at most "
                       "2 decimal places)"),
    ("abc", 'payment_amount must be a number of rupees, not "abc"'),
    ("NaN", 'payment_amount must be a number of rupees, not "NaN"'),
    (Decimal("1E+30"), "payment_amount is too large to be an amount: 1E+30"),
    (True, "payment_amount must be a number of rupees, not true"),
    ([1], "payment_amount must be a number of rupees, not an array"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "said"), RUPEES_REFUSED)
def test_a_rupee_amount_is_refused_saying_what_was_sent_and_why(value, said):
    with pytest.raises(MalformedPayload) as refused:
        optional_paise(value, "payment_amount", strict=True, provider=P)
    assert refused.value.reason == said


PAISE_REFUSED = [
    (Decimal("12000.0"), "amount must be an integer number of paise, not 12000.0"),
    (Decimal("120.5"), "amount must be an integer number of paise, not 120.5"),
    (True, "amount must be an integer number of paise, not true"),
    ("12000", 'amount must be an integer number of paise, not "12000"'),
    ({"value": 1}, "amount must be an integer number of paise, not an object"),
    (-5, "amount is negative: -5"),
]


@pytest.mark.parametrize(("value", "said"), PAISE_REFUSED)
def test_an_amount_in_paise_is_refused_saying_what_was_sent_and_why(value, said):
    """PhonePe's ``"amount": 12000.0`` is a whole number, written as a fraction: what is
    refused is that a paise amount is not written as an integer."""
    with pytest.raises(MalformedPayload) as refused:
        paise_field(value, "amount", strict=True, provider=P)
    assert refused.value.reason == said


def test_a_long_string_is_cut_in_the_words_of_a_refusal():
    with pytest.raises(MalformedPayload) as refused:
        optional_paise("9" * 30 + "x" * 100, "amount", strict=True, provider=P)
    assert refused.value.reason == f'amount must be a number of rupees, not "{"9" * 30}{"x" * 10}…"'


def nested(depth: int) -> bytes:
    return b'{"a": ' + b"[" * depth + b"]" * depth + b"}"


def test_json_nested_too_deep_to_read_is_said_to_be_so():
    """Valid JSON, but past what Python's parser reaches: never a gateway's body."""
    with pytest.raises(MalformedPayload) as refused:
        load_json_object(nested(5000), provider=P)
    assert refused.value.reason == "body is nested too deep to read"
    assert load_json_object(nested(50), provider=P)["a"] is not None


def test_json_holding_a_number_too_long_to_read_is_said_to_be_so():
    """Valid JSON too: Python reads no integer of more than 4300 digits."""
    with pytest.raises(MalformedPayload) as refused:
        load_json_object(b'{"amount": ' + b"1" * 5000 + b"}", provider=P)
    assert refused.value.reason == "body holds a number of 5000 digits, more than payhooks reads"


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_holding_nan_or_infinity_is_not_json(constant):
    with pytest.raises(MalformedPayload) as refused:
        load_json_object(b'{"amount": ' + constant.encode() + b"}", provider=P)
    assert refused.value.reason == f"body is not valid JSON: {constant} is not a JSON number"


def test_a_status_answer_nested_too_deep_is_said_to_be_so():
    from payhooks.gateways._reports import read_json

    with pytest.raises(MalformedPayload) as refused:
        read_json(P, nested(5000))
    assert refused.value.reason == "status API answer is nested too deep to read"


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

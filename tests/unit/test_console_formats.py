"""The console writes rupees grouped the Indian way and times in the operators' zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from payhooks.console.formats import UnknownTimezone, grouped, rupees, when, zone_of


@pytest.mark.parametrize(
    ("number", "shown"),
    [(0, "0"), (999, "999"), (1000, "1,000"), (123456, "1,23,456"), (1234567, "12,34,567"),
     (123456789, "12,34,56,789"), (-1234567, "-12,34,567")],
)  # fmt: skip
def test_digits_are_grouped_the_indian_way(number, shown):
    assert grouped(number) == shown


def test_rupees_are_grouped_the_indian_way_with_paise():
    assert rupees(123456700) == "₹12,34,567.00"
    assert rupees(5) == "₹0.05"
    assert rupees(-500) == "-₹5.00"
    assert rupees(None) == "—"


def test_a_time_is_shown_in_ist_with_its_zone_named():
    at = datetime(2026, 12, 3, 9, 5, 7, 123456, tzinfo=UTC)
    assert when(at, zone_of("Asia/Kolkata")) == "2026-12-03 14:35:07.123 IST"
    assert when(at, zone_of("UTC")) == "2026-12-03 09:05:07.123 UTC"


@pytest.mark.parametrize("name", ["Asia/Nowhere", "", " UTC", "../etc/passwd", "/etc/localtime"])
def test_a_zone_the_database_does_not_hold_is_refused(name):
    with pytest.raises(UnknownTimezone):
        zone_of(name)


def test_the_console_extra_brings_the_zone_database_and_pins_it():
    """zoneinfo falls back on the tzdata package where the system has no zone database: the
    console (IST by default) must not depend on the machine having one."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    console = project["project"]["optional-dependencies"]["console"]
    assert any(dep.split(">")[0].strip() == "tzdata" for dep in console)
    pins = (root / "constraints.txt").read_text().split()
    assert any(pin.startswith("tzdata==") for pin in pins)


def test_a_deadline_says_how_long_is_left_or_how_long_overdue():
    from payhooks.console.formats import until

    now = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    assert until(datetime(2026, 12, 5, 14, 30, tzinfo=UTC), now) == "in 2 d 5 h"
    assert until(datetime(2026, 12, 3, 9, 40, tzinfo=UTC), now) == "in 40 min"
    assert until(datetime(2026, 12, 3, 6, 0, tzinfo=UTC), now) == "overdue by 3 h"
    assert until(None, now) == "—"


def held(**fields: object):
    """A dispute as payhooks holds it, opened on a Razorpay chargeback unless told otherwise."""
    from payhooks.intake.disputes import Dispute

    at = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    row = {"provider": "razorpay", "dispute_id": "disp_1", "payment_id": "pay_1",
           "gateway_order_id": None, "status": "opened", "phase": "chargeback",
           "gateway_status": "open", "amount_paise": 100, "currency": "INR", "reason": None,
           "respond_by": None, "lost_paise": 0, "event_id": "evt_1", "opened_at": at,
           "updated_at": at, "closed_at": None}  # fmt: skip
    return Dispute(**{**row, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("13.1: Goods Not Received", "Goods Not Received (13.1)"),
        ("non_matching_account_number",
         "Account number does not match (non_matching_account_number)"),
        ("processed_invalid_expired_card: Card expired",
         "Card expired (processed_invalid_expired_card)"),
        ("a_code_razorpay_adds_later", "a_code_razorpay_adds_later"),
        ("Fraud suspected: card stolen", "Fraud suspected: card stolen"),
        (None, "—"),
    ],
)  # fmt: skip
def test_a_disputes_reason_is_said_in_words_with_its_code_beside(reason, said):
    """A description the gateway sent, else the words for a code payhooks knows; a code it
    does not know, or a description with no code before it, as it came."""
    from payhooks.console.formats import dispute_words

    assert dispute_words(held(reason=reason)).reason == said


def test_where_a_dispute_stands_names_its_phase_and_the_gateways_own_word():
    from payhooks.console.formats import dispute_words

    lost = held(provider="cashfree", status="lost", phase="pre_arbitration",
                gateway_status="PRE_ARBITRATION_MERCHANT_ACCEPTED")  # fmt: skip
    assert dispute_words(lost).stands == (
        "lost (pre-arbitration phase; Cashfree: PRE_ARBITRATION_MERCHANT_ACCEPTED)"
    )
    bare = held(status="action_required", phase=None, gateway_status=None)
    assert dispute_words(bare).stands == "action required"


def test_coded_shows_backticked_spans_as_code_and_escapes_the_rest():
    from payhooks.console.formats import coded

    assert str(coded("run `payhooks confirm` <now> & `x<y`")) == (
        "run <code>payhooks confirm</code> &lt;now&gt; &amp; <code>x&lt;y</code>"
    )

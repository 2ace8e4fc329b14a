"""What the docs tell a merchant about refunds, parked deliveries and the CLI, checked against
the code: the fields named are the fields there are, the defaults the defaults."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from pathlib import Path

import pytest

from payhooks.events import Provider
from payhooks.gateways._refunds import Refund
from payhooks.gateways.cashfree.status import _refunded
from payhooks.intake import idempotency
from payhooks.refunding import refunds

DOCS = Path(__file__).parents[2] / "docs"
OPERATIONS = " ".join((DOCS / "operations.md").read_text().split())


def _joined(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


def test_refunds_list_names_every_field_it_prints():
    fields = [f.name for f in dataclasses.fields(refunds.Refund)]
    listed = OPERATIONS.split("prints a payment's intents as a JSON array", 1)[1][:900]
    assert [f for f in fields if f"`{f}`" not in listed] == []


def test_reason_and_requested_by_are_required_as_the_docs_say():
    # request and request_async take intent's keywords as they are (RefundTerms)
    terms = typing.get_type_hints(refunds.RefundTerms, include_extras=True)
    for name in ("reason", "requested_by"):
        parameter = inspect.signature(refunds.intent).parameters[name]
        assert parameter.default is inspect.Parameter.empty
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY
        assert typing.get_origin(terms[name]) is typing.Required
    for asking in (refunds.request, refunds.request_async):
        taken = inspect.signature(asking).parameters["terms"]
        assert taken.kind is inspect.Parameter.VAR_KEYWORD
    assert "`reason=`" in OPERATIONS and "`requested_by=`" in OPERATIONS
    assert "are required keyword arguments" in OPERATIONS


def test_the_retry_schedule_after_a_failed_refund_call_is_the_documented_one():
    waits = [int(refunds.wait_after(n).total_seconds()) for n in range(1, 12)]
    assert waits[:4] == [5, 10, 20, 40] and max(waits) == 600
    assert "after 5 s, then 10 s, 20 s, 40 s, doubling up to 10 minutes" in OPERATIONS
    assert "Each call is bounded by `PAYHOOKS_RECONCILE_TIMEOUT_MS`" in OPERATIONS


def test_cashfrees_refund_id_kept_is_its_cf_refund_id():
    intent = Refund(provider=Provider.CASHFREE, idempotency_key="phr_key", payment_id="1",
                    gateway_order_id="order_1", amount_paise=100, currency="INR",
                    captured_paise=100, reason="asked", requested_by="test")  # fmt: skip
    entity = {"cf_refund_id": "98765", "refund_id": "phr_key", "refund_status": "PENDING"}
    sent = _refunded(entity, intent)
    assert sent.gateway_refund_id == "98765"
    assert "the id kept as `gateway_refund_id` is Cashfree's `cf_refund_id`" in OPERATIONS


def test_serve_is_said_not_to_send_refunds():
    assert "`payhooks serve` never sends a refund" in OPERATIONS


def test_parked_takes_and_returns_what_its_docs_say():
    signature = inspect.signature(idempotency.parked)
    assert list(signature.parameters) == ["conn", "limit"]
    assert signature.parameters["limit"].default == 10_000
    fields = [f.name for f in dataclasses.fields(idempotency.Stored)]
    for name in ("fastapi.md", "flask.md"):
        said = _joined(name).split("`payhooks.intake.idempotency.parked(conn, limit=10_000)`", 1)[
            1
        ][:700]
        listed, apart = said.split("`unreadable`", 1)
        assert [f for f in fields if f"`{f}`" not in listed] == [], name
        unread = [f.name for f in dataclasses.fields(idempotency.Unreadable)]
        assert [f for f in unread if f"`{f}`" not in apart] == [], name
    assert all(f"``{f}``" in (idempotency.parked.__doc__ or "") for f in fields)


def test_the_failover_section_says_emails_may_be_sent_twice_under_one_message_id():
    failover = OPERATIONS.split("### Database failover", 1)[1].split("## Measured", 1)[0]
    assert re.search(r"sends it again, under the same `Message-ID`", failover)


def test_the_can_act_example_shows_the_password_it_asks_for():
    console = (DOCS / "console.md").read_text()
    example = "payhooks operator add ravi --can-act  "
    line = next(x for x in console.splitlines() if x.startswith(example))
    assert "asks for a password" in line
    assert "--can-act --password-stdin" in console


@pytest.mark.parametrize("name", ["django.md", "fastapi.md", "flask.md"])
def test_each_guide_keeps_an_order_payable_after_a_failed_attempt(name):
    """The failure's handler as the guides told it ("a failure never un-pays a paid order:
    change it only where pending") moved a pending order to failed, and the customer's next
    attempt, paid, found no pending order: the capture answered ignored, the order unpaid."""
    said = _joined(name)
    assert "The failure's handler: a failed attempt closes nothing." in said
    assert "rather than move the order out of" in said

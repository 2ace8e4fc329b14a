"""Cashfree's dispute webhooks, read from payhooks' own bodies in the shape of those its
documentation publishes for versions 2022-09-01 and 2025-01-01
(tests/data/cashfree/disputes/README.md): what each status means, the dispute's figures, its
phase, and its delivery key."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from payhooks.events import EventKind, storable
from payhooks.gateways.cashfree import Cashfree, sign
from payhooks.plumbing.errors import MalformedPayload

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "cashfree" / "disputes"
ADAPTER = Cashfree(secrets=("cfsecret",))
IST = timezone(timedelta(hours=5, minutes=30))


def sample(name: str) -> bytes:
    return (SAMPLES / name).read_bytes()


def with_status(status: str, type_: str = "DISPUTE_UPDATED") -> bytes:
    doc = json.loads(sample("2022-09-01_DISPUTE_UPDATED.json"))
    doc["data"]["dispute"]["dispute_status"] = status
    doc["type"] = type_
    return json.dumps(doc).encode()


def test_the_created_bodies_of_both_versions_verify_and_read_alike() -> None:
    events = []
    for name in ("2022-09-01_DISPUTE_CREATED.json", "2025-01-01_DISPUTE_CREATED.json"):
        body = sample(name)
        signed = {"x-webhook-timestamp": "1", "x-webhook-signature": sign(body, "1", "cfsecret")}
        ADAPTER.verify(body, signed)
        events.append(storable(ADAPTER.parse(body, {})))
    old, new = events
    assert old.kind is new.kind is EventKind.DISPUTE_OPENED
    assert old.dispute == new.dispute
    assert (new.payment_id, new.merchant_ref, new.currency) == (
        "732118840", "order_2217504Wp5GnZc2RtXh7LsQa9VbEk3MfY", "INR",
    )  # fmt: skip
    dispute = new.dispute
    assert dispute is not None
    assert (dispute.id, dispute.amount_paise, dispute.phase, dispute.status) == (
        "518391027", 700, "dispute", "DISPUTE_CREATED",
    )  # fmt: skip
    assert dispute.reason == "12.6.1: Duplicate Processing"
    assert dispute.respond_by == datetime(2024, 11, 28, 23, 59, 59, tzinfo=IST)
    assert dispute.reported_at == datetime(2024, 11, 25, 16, 8, 41, tzinfo=IST)


def test_the_2025_created_body_with_the_doubled_quotes_cashfree_prints_is_not_json() -> None:
    with pytest.raises(MalformedPayload, match="not valid JSON"):
        ADAPTER.parse(sample("2025-01-01_DISPUTE_CREATED.doubled-quotes.txt"), {})


def test_the_closed_body_is_a_chargeback_won() -> None:
    event = ADAPTER.parse(sample("2022-09-01_DISPUTE_CLOSED.json"), {})
    assert event.kind is EventKind.DISPUTE_WON
    assert event.dispute is not None
    assert (event.dispute.phase, event.dispute.amount_paise) == ("chargeback", 189_900)


def test_the_updated_body_opens_the_same_dispute_again_as_a_pre_arbitration() -> None:
    event = ADAPTER.parse(sample("2022-09-01_DISPUTE_UPDATED.json"), {})
    assert event.kind is EventKind.DISPUTE_OPENED
    assert event.dispute is not None
    assert (event.dispute.id, event.dispute.phase) == ("518204663", "pre_arbitration")


@pytest.mark.parametrize(
    ("status", "type_", "kind"),
    [
        ("CHARGEBACK_CREATED", "DISPUTE_CREATED", EventKind.DISPUTE_OPENED),
        ("CHARGEBACK_DOCS_RECEIVED", "DISPUTE_UPDATED", EventKind.DISPUTE_UNDER_REVIEW),
        ("RETRIEVAL_UNDER_REVIEW", "DISPUTE_UPDATED", EventKind.DISPUTE_UNDER_REVIEW),
        ("CHARGEBACK_INSUFFICIENT_EVIDENCE", "DISPUTE_UPDATED", EventKind.DISPUTE_ACTION_REQUIRED),
        ("CHARGEBACK_INSUFFICIENT_EVIDENCE", "DISPUTE_CLOSED", EventKind.DISPUTE_LOST),
        ("ARBITRATION_MERCHANT_WON", "DISPUTE_CLOSED", EventKind.DISPUTE_WON),
        ("DISPUTE_MERCHANT_LOST", "DISPUTE_CLOSED", EventKind.DISPUTE_LOST),
        ("PRE_ARBITRATION_MERCHANT_ACCEPTED", "DISPUTE_CLOSED", EventKind.DISPUTE_LOST),
        ("CHARGEBACK_SOMETHING_NEW", "DISPUTE_CLOSED", EventKind.DISPUTE_CLOSED),
        ("CHARGEBACK_SOMETHING_NEW", "DISPUTE_CREATED", EventKind.DISPUTE_OPENED),
        ("CHARGEBACK_SOMETHING_NEW", "DISPUTE_UPDATED", EventKind.OTHER),
    ],
)
def test_each_status_means_what_cashfree_documents(status, type_, kind) -> None:
    assert ADAPTER.parse(with_status(status, type_), {}).kind is kind


def test_the_phase_is_read_from_the_status_when_the_type_is_missing() -> None:
    doc = json.loads(with_status("PRE_ARBITRATION_UNDER_REVIEW"))
    del doc["data"]["dispute"]["dispute_type"]
    event = ADAPTER.parse(json.dumps(doc).encode(), {})
    assert event.dispute is not None and event.dispute.phase == "pre_arbitration"


def test_an_update_payhooks_does_not_act_on_is_recorded_without_figures() -> None:
    event = ADAPTER.parse(with_status("CHARGEBACK_SOMETHING_NEW"), {})
    assert (event.kind, event.dispute) == (EventKind.OTHER, None)


def test_the_key_is_the_idempotency_header_else_type_id_status_and_update_time() -> None:
    body = sample("2022-09-01_DISPUTE_UPDATED.json")
    assert ADAPTER.parse(body, {"x-idempotency-key": "k1"}).event_id == "k1"
    assert ADAPTER.parse(body, {}).event_id == (
        "DISPUTE_UPDATED:518204663:PRE_ARBITRATION_CREATED:202411181147360530"
    )


def test_a_dispute_without_its_payment_is_malformed() -> None:
    doc = json.loads(sample("2022-09-01_DISPUTE_CLOSED.json"))
    del doc["data"]["order_details"]["cf_payment_id"]
    with pytest.raises(MalformedPayload, match="cf_payment_id is missing"):
        ADAPTER.parse(json.dumps(doc).encode(), {})


@pytest.mark.parametrize("written", ["0001-01-01T00:00:00", "9999-12-31T23:59:59-05:00"])
def test_a_deadline_outside_the_times_a_database_reads_back_is_no_deadline(written) -> None:
    """Cashfree's "no date" written as the first day of year 1: stored as it came, it is a
    time PostgreSQL keeps and psycopg cannot read, and every later read of the disputes (the
    dispute alerts, the console's list) failed on it."""
    doc = json.loads(sample("2022-09-01_DISPUTE_CREATED.json"))
    doc["data"]["dispute"]["respond_by"] = written
    doc["data"]["dispute"]["updated_at"] = written
    event = storable(ADAPTER.parse(json.dumps(doc).encode(), {}))
    assert event.dispute is not None
    assert (event.dispute.respond_by, event.dispute.reported_at) == (None, None)

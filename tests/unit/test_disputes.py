"""What a dispute report writes (``payhooks.intake.disputes``), pure: every dispute kind has
its status and rank, the phases of the chargeback process are in order, and a lost dispute
takes back what the gateway says it deducted, else its amount."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from payhooks.events import Dispute, Event, EventKind, Provider
from payhooks.intake import disputes


def event(kind: EventKind, **figures: object) -> Event:
    return Event(
        provider=Provider.RAZORPAY, kind=kind, event_type="payment.dispute.x",
        event_id="evt_1", payment_id="pay_1", merchant_ref="order_1", currency="INR",
        payload_sha256="x", dispute=Dispute(id="disp_1", **figures),  # type: ignore[arg-type]
    )  # fmt: skip


def test_every_dispute_kind_reports_a_status_and_only_they_do():
    assert set(disputes.STATUS) == {kind for kind in EventKind if kind.is_dispute}
    assert set(disputes.RANK) == set(disputes.Status)


def test_a_decided_dispute_is_a_final_kind_and_an_open_one_is_not():
    for kind, status in disputes.STATUS.items():
        assert kind.is_final is (disputes.RANK[status] == disputes.DECIDED)


@pytest.mark.parametrize(
    ("earlier", "later"),
    [("retrieval", "chargeback"), ("fraud", "chargeback"), ("DISPUTE", "CHARGEBACK"),
     ("chargeback", "pre_arbitration"), ("PRE_ARBITRATION", "ARBITRATION"),
     ("pre-arbitration", "arbitration")],
)  # fmt: skip
def test_the_phases_of_the_chargeback_process_are_in_order(earlier, later):
    assert disputes.phase_rank(earlier) < disputes.phase_rank(later)


def test_a_phase_no_gateway_documents_is_placed_as_a_chargeback():
    assert disputes.phase_rank("compliance") == disputes.phase_rank("chargeback")
    assert disputes.phase_rank(None) == disputes.phase_rank("chargeback")


def test_a_lost_dispute_takes_back_what_was_deducted_else_its_amount():
    deducted = disputes.values(event(EventKind.DISPUTE_LOST, amount_paise=500, deducted_paise=300))
    assert deducted["lost_paise"] == 300
    whole = disputes.values(event(EventKind.DISPUTE_LOST, amount_paise=500, deducted_paise=0))
    assert whole["lost_paise"] == 500


def test_a_report_that_is_no_loss_takes_nothing_back():
    opened = disputes.values(event(EventKind.DISPUTE_OPENED, amount_paise=500))
    assert (opened["status"], opened["status_rank"], opened["lost_paise"]) == ("opened", 0, 0)


def test_the_row_names_the_payment_its_order_and_the_deadline():
    due = datetime(2026, 12, 3, tzinfo=UTC)
    row = disputes.values(event(EventKind.DISPUTE_ACTION_REQUIRED, respond_by=due, phase="fraud"))
    assert (row["payment_id"], row["gateway_order_id"], row["respond_by"]) == (
        "pay_1", "order_1", due,
    )  # fmt: skip
    assert (row["status"], row["phase_rank"]) == ("action_required", 0)


def test_a_dispute_kind_without_its_figures_is_refused():
    bare = Event(provider=Provider.RAZORPAY, kind=EventKind.DISPUTE_WON, event_type="x",
                 event_id="e", payload_sha256="x")  # fmt: skip
    with pytest.raises(ValueError, match="carries no dispute"):
        disputes.values(bare)

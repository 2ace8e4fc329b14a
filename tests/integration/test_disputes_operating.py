"""Operating disputes on the database: the payment's story shows them and a dispute id finds
it, the alerts (opened, deadline near, lost) reach a chat webhook over a loopback socket once
each, and the gauges count the open ones per gateway."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import generate_latest

from payhooks import EventKind, Hooks
from payhooks.events import Provider
from payhooks.intake.ingest import Outcome, ingest
from payhooks.operations import metrics, timeline
from payhooks.operations.alerts import (
    DISPUTE_LOST_REPORTED,
    Condition,
    core_sources,
    disputes_alerts,
)
from payhooks.operations.notifier import Notifier, Policy, Webhook
from payhooks.sim.deliveries import Delivery, Disputed
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.factories import ADAPTERS, GATEWAY
from tests.integration.test_alerts import Receiver, receiving

HOOKS = Hooks()
HOOKS.on(*(kind for kind in EventKind if kind.is_dispute))(lambda conn, event: None)
HOOKS.on(EventKind.PAYMENT_CAPTURED)(lambda conn, event: None)


def unix(at: datetime) -> int:
    return int(at.timestamp())


def disputed(what: str, dispute_id: str, *, due: datetime, at: datetime, payment: str = "pay_OP1",
             order: str = "order_OP1", amount: int = 49_900) -> Disputed:  # fmt: skip
    return Disputed(what=what, dispute_id=dispute_id, payment_id=payment, reference=order,
                    amount_paise=amount, respond_by=unix(due), reported_at=unix(at))  # fmt: skip


def send(conn, delivery: Delivery) -> Outcome:
    adapter = ADAPTERS[delivery.provider]
    return ingest(conn, adapter, delivery.body, delivery.headers, HOOKS).outcome


def razorpay(conn, told: Disputed) -> Outcome:
    return send(conn, razorpay_sim.dispute_delivery(GATEWAY, told))


NOW = datetime.now(UTC).replace(microsecond=0)


# --- the timeline ------------------------------------------------------------------------------


def test_the_orders_story_shows_its_dispute_and_a_dispute_id_finds_the_order(conn):
    paid = razorpay_sim.delivery(GATEWAY, "payment.captured", payment_id="pay_OP1",
                                 order_id="order_OP1", amount_paise=49_900)  # fmt: skip
    assert send(conn, paid) is Outcome.PROCESSED
    razorpay(conn, disputed("opened", "disp_OP1", due=NOW + timedelta(days=5), at=NOW))
    [found] = timeline.find(conn, "disp_OP1")
    assert (found.provider, found.gateway_order_id, found.matched) == (
        "razorpay", "order_OP1", timeline.Matched.DISPUTE,
    )  # fmt: skip
    story = timeline.story(conn, "razorpay", "order_OP1")
    assert story is not None
    [dispute] = story.disputes
    assert (dispute.dispute_id, dispute.status, dispute.awaiting_response) == (
        "disp_OP1", "opened", True,
    )  # fmt: skip
    assert [r.event_type for r in story.records] == ["payment.captured", "payment.dispute.created"]
    assert story.as_json()["disputes"][0]["open"] is True


def test_a_dispute_whose_report_named_no_order_is_found_through_its_payment(conn):
    """Razorpay's closed and won samples name no order (``order_id: null``): the payment's
    record does."""
    paid = razorpay_sim.delivery(GATEWAY, "payment.captured", payment_id="pay_OP2",
                                 order_id="order_OP2", amount_paise=100)  # fmt: skip
    send(conn, paid)
    razorpay(conn, disputed("opened", "disp_OP2", due=NOW, at=NOW, payment="pay_OP2", order=""))
    assert conn.execute("SELECT gateway_order_id FROM payhooks_disputes").fetchone() == (None,)
    [found] = timeline.find(conn, "disp_OP2")
    assert found.gateway_order_id == "order_OP2"


# --- the alerts --------------------------------------------------------------------------------


@pytest.fixture
def chat():
    with receiving(Receiver()) as receiver:
        yield receiver


def notifier(url: str, warning: timedelta = timedelta(hours=48)) -> Notifier:
    sources = core_sources(dispute_warning=warning)
    return Notifier([Webhook(url=url, timeout_s=10.0)], sources, Policy(repeat=timedelta(0)))


def conditions(conn, now: datetime) -> set[tuple[Condition, str]]:
    return {(a.condition, a.subject) for a in disputes_alerts(conn, now)}


def test_a_dispute_opened_is_said_once_however_long_it_stays_open(conn, chat):
    razorpay(conn, disputed("opened", "disp_A1", due=NOW + timedelta(days=6), at=NOW))
    told = notifier(chat.url)
    assert told.tick(conn, NOW).raised == 1
    for hours in (1, 2, 30):  # a repeat interval of 0: a lasting alert would be said again
        assert told.tick(conn, NOW + timedelta(hours=hours)).sent == 0
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: razorpay: dispute disp_A1 opened")
    assert "Answer it by" in text and "https://dashboard.razorpay.com/" in text


def test_a_dispute_still_unanswered_is_said_again_at_the_bound_before_its_deadline(conn, chat):
    due = NOW + timedelta(days=3)
    razorpay(conn, disputed("opened", "disp_A2", due=due, at=NOW))
    told = notifier(chat.url, warning=timedelta(hours=24))
    told.tick(conn, NOW)
    assert told.tick(conn, due - timedelta(hours=25)).raised == 0
    assert told.tick(conn, due - timedelta(hours=24)).raised == 1
    assert told.tick(conn, due - timedelta(hours=2)).sent == 0  # said once, not hourly
    opened, warned = chat.texts()
    assert opened.startswith("[payhooks] ALERT: razorpay: dispute disp_A2 opened")
    assert warned.startswith("[payhooks] ALERT: razorpay: dispute disp_A2 due in 24 hour(s)")


def test_an_answered_dispute_is_not_warned_of_and_its_warning_is_said_resolved(conn, chat):
    due = NOW + timedelta(hours=10)
    razorpay(conn, disputed("opened", "disp_A3", due=due, at=NOW))
    told = notifier(chat.url)
    assert told.tick(conn, NOW).raised == 2  # opened, and already within the bound
    razorpay(conn, disputed("under_review", "disp_A3", due=due, at=NOW + timedelta(minutes=1)))
    tally = told.tick(conn, NOW + timedelta(minutes=2))
    assert (tally.raised, tally.resolved, tally.sent) == (0, 1, 1)
    assert chat.texts()[-1].startswith("[payhooks] RESOLVED: razorpay: dispute disp_A3 due")


@pytest.mark.parametrize(
    ("left", "words"),
    [
        (timedelta(minutes=59), "due in 59 minute(s)"),
        (timedelta(minutes=119), "due in 119 minute(s)"),
        (timedelta(hours=2), "due in 2 hour(s)"),
        (-timedelta(minutes=1), "due now: its deadline passed"),
    ],
)
def test_a_dispute_due_within_two_hours_says_the_minutes_left(conn, left, words):
    """Whole hours alone said "due in 0 hour(s)" of a deadline 59 minutes away."""
    razorpay(conn, disputed("opened", "disp_A5", due=NOW + left, at=NOW - timedelta(hours=1)))
    due = [a.title for a in disputes_alerts(conn, NOW) if a.condition is Condition.DISPUTE_DUE]
    assert due == [f"razorpay: dispute disp_A5 {words}"]


def test_a_lost_dispute_is_said_once_and_cleared_silently_a_week_later(conn, chat):
    razorpay(conn, disputed("opened", "disp_A4", due=NOW + timedelta(days=6), at=NOW))
    told = notifier(chat.url)
    told.tick(conn, NOW)
    razorpay(conn, disputed("lost", "disp_A4", due=NOW + timedelta(days=6),
                            at=NOW + timedelta(minutes=5)))  # fmt: skip
    tally = told.tick(conn, NOW + timedelta(minutes=6))
    assert (tally.raised, tally.resolved) == (1, 1)  # lost raised; opened cleared, silently
    assert chat.texts()[-1].startswith("[payhooks] ALERT: razorpay: dispute disp_A4 lost")
    assert "took 499.00 INR back" in chat.texts()[-1]
    later = NOW + DISPUTE_LOST_REPORTED + timedelta(hours=1)
    assert (Condition.DISPUTE_LOST, "razorpay:disp_A4") not in conditions(conn, later)
    tally = told.tick(conn, later)
    assert (tally.resolved, tally.sent) == (1, 0)
    assert len(chat.texts()) == 2


def test_a_lost_disputes_alert_says_whether_payhooks_keeps_a_record_of_its_payment(conn):
    """The payment captured through payhooks: its record counts the loss. A payment payhooks
    never saw: the alert says it has no record of it, never that the record says so."""
    captured = GATEWAY.razorpay("payment.captured", payment_id="pay_OP1", order_id="order_OP1",
                                amount_paise=49_900)  # fmt: skip
    assert send(conn, captured) is Outcome.PROCESSED
    for dispute, payment in (("disp_K1", "pay_OP1"), ("disp_K2", "pay_NEVERSEEN")):
        razorpay(conn, disputed("lost", dispute, due=NOW + timedelta(days=6), at=NOW,
                                payment=payment))  # fmt: skip
    said = {a.subject: a.body for a in disputes_alerts(conn, NOW + timedelta(minutes=1))}
    assert "the payment's record says so (disputed_paise)" in said["razorpay:disp_K1"]
    assert "payhooks has no record of that payment" in said["razorpay:disp_K2"]
    assert "record says so" not in said["razorpay:disp_K2"]


def test_a_won_dispute_raises_nothing_more(conn):
    razorpay(conn, disputed("opened", "disp_A5", due=NOW + timedelta(hours=1), at=NOW))
    assert len(conditions(conn, NOW)) == 2
    razorpay(conn, disputed("won", "disp_A5", due=NOW + timedelta(hours=1),
                            at=NOW + timedelta(minutes=1)))  # fmt: skip
    assert conditions(conn, NOW + timedelta(minutes=2)) == set()


def test_a_dispute_won_then_lost_in_a_later_phase_is_decided_again_and_said_lost(conn):
    """A chargeback won, then, weeks on, the pre-arbitration's loss with no report of it opening
    (lost, or still to come): the dispute is decided anew at its loss, so its loss is news."""
    razorpay(conn, disputed("won", "disp_A6", due=NOW, at=NOW))
    conn.execute("UPDATE payhooks_disputes SET closed_at = closed_at - interval '30 days'")
    lost = replace(disputed("lost", "disp_A6", due=NOW, at=NOW + timedelta(minutes=1)),
                   phase="pre_arbitration")  # fmt: skip
    assert razorpay(conn, lost) is Outcome.PROCESSED
    closed = conn.execute("SELECT now() - closed_at < interval '1 hour' FROM payhooks_disputes")
    assert closed.fetchone() == (True,)
    assert (Condition.DISPUTE_LOST, "razorpay:disp_A6") in conditions(conn, NOW)


MANY = """INSERT INTO payhooks_disputes (provider, dispute_id, payment_id, status, status_rank,
    phase, phase_rank, amount_paise, currency, respond_by, lost_paise, event_id, closed_at)
    SELECT 'razorpay', %(status)s || n, 'pay_' || n, %(status)s, %(rank)s, 'chargeback', 1, 100,
           'INR', %(due)s::timestamptz + n * interval '1 second', %(lost)s, 'evt_' || n,
           %(closed)s
    FROM generate_series(1, %(n)s) n"""


def many(conn, n: int, *, status: str, due: datetime, closed: datetime | None = None) -> None:
    """``n`` disputes standing ``status``, the deadlines a second apart from ``due``."""
    rank = 2 if status == "lost" else 0
    lost = 100 if status == "lost" else 0
    values = {"n": n, "status": status, "rank": rank, "due": due, "lost": lost, "closed": closed}
    conn.execute(MANY.encode(), values)


def test_no_dispute_alert_is_cut_from_a_pass_however_many_disputes_there_are(conn, chat):
    """Eleven hundred disputes waiting for an answer near their deadline and as many lost (each
    kind past the thousand a pass once read): each is told, and none is said resolved, or
    cleared, while it still holds."""
    many(conn, 1_100, status="opened", due=NOW + timedelta(hours=5))
    many(conn, 1_100, status="lost", due=NOW, closed=NOW - timedelta(hours=1))
    told = notifier(chat.url)
    assert told.evaluate(conn, NOW).raised == 3_300  # each open one opened and due; each lost
    many(conn, 1, status="action_required", due=NOW + timedelta(hours=1))  # the nearest now
    tally = told.evaluate(conn, NOW + timedelta(minutes=1))
    assert (tally.raised, tally.resolved) == (2, 0)


# --- the gauges --------------------------------------------------------------------------------


def test_the_gauges_count_the_open_disputes_their_amounts_and_the_overdue(conn):
    razorpay(conn, disputed("opened", "disp_G1", due=NOW - timedelta(hours=1), at=NOW,
                            amount=1000))  # fmt: skip
    razorpay(conn, disputed("under_review", "disp_G2", due=NOW + timedelta(days=1), at=NOW,
                            amount=2500))  # fmt: skip
    razorpay(conn, disputed("lost", "disp_G3", due=NOW, at=NOW, amount=9999))
    snapshot = metrics.read(conn)
    assert snapshot.disputes == (("razorpay", 2, 3500, 1, 1),)
    scraped = generate_latest(metrics.registry(lambda: snapshot)).decode()
    assert 'payhooks_disputes_open{gateway="razorpay"} 2.0' in scraped
    assert 'payhooks_disputes_open_paise{gateway="razorpay"} 3500.0' in scraped
    assert 'payhooks_disputes_awaiting_response{gateway="razorpay"} 1.0' in scraped
    assert 'payhooks_disputes_overdue{gateway="razorpay"} 1.0' in scraped
    assert 'payhooks_disputes_open{gateway="cashfree"} 0.0' in scraped
    assert Provider.CASHFREE.value == "cashfree"

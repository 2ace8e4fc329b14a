"""Disputes once and in order, on the database: each report a gateway sends moves the core's
dispute only forward (payhooks.intake.disputes), whatever order the deliveries take, and a
stale one reaches no handler; real concurrency for the claim that two deliveries of one
dispute cannot regress it."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import psycopg
import pytest

from payhooks import Applied, EventKind, Hooks, ingest_in_transaction
from payhooks.aio.claims import ingest_received as ingest_received_async
from payhooks.events import Event, Provider
from payhooks.fastapi import AsyncHooks
from payhooks.gateways import cashfree, razorpay
from payhooks.intake import disputes
from payhooks.intake.ingest import Outcome, Receipt, ingest, ingest_received, receive
from payhooks.intake.payments import find as find_payment
from payhooks.refunding import refunds
from payhooks.sim.deliveries import Delivery, Disputed
from payhooks.sim.gateway import new_payment_id
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.conftest import released_together
from tests.factories import ADAPTERS, GATEWAY, KEYS

SAMPLES = Path(__file__).parents[1] / "data"
OPTIONS = "-c lock_timeout=5000 -c statement_timeout=10000"


class Seen:
    """A merchant's hooks for every dispute kind and a capture: what reached them, in order,
    written in the delivery's own transaction (so the order is the commit order)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        conn.execute(
            "CREATE TABLE seen (n bigint GENERATED ALWAYS AS IDENTITY, kind text, dispute text)"
        )
        self.hooks = Hooks()
        kinds = [kind for kind in EventKind if kind.is_dispute]
        self.hooks.on(*kinds)(self._saw)
        self.hooks.on(EventKind.PAYMENT_CAPTURED)(lambda conn, event: None)

    @staticmethod
    def _saw(conn: psycopg.Connection, event: object) -> None:
        conn.execute(
            "INSERT INTO seen (kind, dispute) VALUES (%s, %s)",
            (event.kind.value, event.dispute.id),  # type: ignore[attr-defined]
        )

    @staticmethod
    def kinds(conn: psycopg.Connection) -> list[str]:
        return [row[0] for row in conn.execute("SELECT kind FROM seen ORDER BY n")]


def razorpay_sample(name: str, *, event_id: str | None = None) -> Delivery:
    body = (SAMPLES / "razorpay" / "disputes" / f"payment.dispute.{name}.json").read_bytes()
    headers = {"x-razorpay-signature": razorpay.sign(body, KEYS.razorpay)}
    if event_id is not None:
        headers["x-razorpay-event-id"] = event_id
    return Delivery(provider=Provider.RAZORPAY, body=body, headers=headers,
                    label=name)  # fmt: skip


def cashfree_sample(name: str) -> Delivery:
    body = (SAMPLES / "cashfree" / "disputes" / name).read_bytes()
    headers = {"x-webhook-timestamp": "1731910693000"}
    headers["x-webhook-signature"] = cashfree.sign(body, headers["x-webhook-timestamp"],
                                                   KEYS.cashfree)  # fmt: skip
    return Delivery(provider=Provider.CASHFREE, body=body, headers=headers,
                    label=name)  # fmt: skip


def send(conn: psycopg.Connection, delivery: Delivery, hooks: Hooks) -> Receipt:
    adapter = ADAPTERS[delivery.provider]
    return ingest(conn, adapter, delivery.body, delivery.headers, hooks)


def dispute_row(conn: psycopg.Connection, dispute_id: str) -> dict[str, object]:
    found = disputes.find(conn, dispute_id, ["razorpay", "cashfree"])
    assert len(found) == 1
    return {"status": found[0].status, "phase": found[0].phase, "lost": found[0].lost_paise}


def capture(conn: psycopg.Connection, hooks: Hooks, payment_id: str, order_id: str) -> None:
    """The payment the dispute is about, applied as any capture is (its core record)."""
    paid = razorpay_sim.delivery(GATEWAY, "payment.captured", payment_id=payment_id,
                                 order_id=order_id, amount_paise=3_149_900)  # fmt: skip
    assert send(conn, paid, hooks).outcome is Outcome.PROCESSED


def test_razorpay_dispute_bodies_of_the_documented_shape_are_recorded_in_order(conn):
    seen = Seen(conn)
    capture(conn, seen.hooks, "pay_Nq4TzLb8WcXe2K", "order_Nq4SkV1mPd7yHa")
    for name in ("created", "action_required", "lost"):
        assert send(conn, razorpay_sample(name), seen.hooks).outcome is Outcome.PROCESSED
    assert seen.kinds(conn) == ["dispute_opened", "dispute_action_required", "dispute_lost"]
    row = dispute_row(conn, "disp_Ow3JcY8rKm5TuD")
    assert row == {"status": "lost", "phase": "chargeback", "lost": 84_900}


def test_a_lost_dispute_records_what_it_took_back_on_the_payments_record(conn):
    seen = Seen(conn)
    capture(conn, seen.hooks, "pay_Nq4TzLb8WcXe2K", "order_Nq4SkV1mPd7yHa")
    assert find_payment(conn, "razorpay", "pay_Nq4TzLb8WcXe2K").disputed_paise == 0
    send(conn, razorpay_sample("created"), seen.hooks)
    assert find_payment(conn, "razorpay", "pay_Nq4TzLb8WcXe2K").disputed_paise == 0
    send(conn, razorpay_sample("lost"), seen.hooks)
    assert find_payment(conn, "razorpay", "pay_Nq4TzLb8WcXe2K").disputed_paise == 84_900


def test_a_late_created_after_the_loss_changes_nothing_and_reaches_no_handler(conn):
    seen = Seen(conn)
    assert send(conn, razorpay_sample("lost"), seen.hooks).outcome is Outcome.PROCESSED
    late = send(conn, razorpay_sample("created"), seen.hooks)
    assert late.outcome is Outcome.IGNORED
    assert seen.kinds(conn) == ["dispute_lost"]
    assert dispute_row(conn, "disp_Ow3JcY8rKm5TuD")["status"] == "lost"
    recorded = conn.execute(
        "SELECT outcome FROM processed_webhooks WHERE event_type = 'payment.dispute.created'"
    ).fetchone()
    assert recorded == ("ignored",)  # the stale delivery stays in the log


def test_a_copy_of_a_dispute_delivery_is_a_duplicate(conn):
    seen = Seen(conn)
    first = send(conn, razorpay_sample("created", event_id="evt_A1"), seen.hooks)
    again = send(conn, razorpay_sample("created", event_id="evt_A1"), seen.hooks)
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert seen.kinds(conn) == ["dispute_opened"]


@pytest.mark.parametrize("report", ["created", "lost"])
def test_a_copy_of_a_dispute_delivery_sent_after_the_purge_is_ignored(conn, report):
    """The defect: the purge took the delivery's record, and the same report sent again was
    taken for the replay of a parked one (the dispute's row names its key): ``processed``,
    its hook called a second time. It moves the dispute nowhere: ``ignored``."""
    seen = Seen(conn)
    first = send(conn, razorpay_sample(report, event_id="evt_P1"), seen.hooks)
    conn.execute("DELETE FROM processed_webhooks")  # as the purge leaves it
    again = send(conn, razorpay_sample(report, event_id="evt_P1"), seen.hooks)
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.IGNORED)
    assert seen.kinds(conn) == [f"dispute_{'opened' if report == 'created' else report}"]


def test_the_retry_of_a_report_whose_handler_committed_reaches_the_handler_again(conn):
    """A handler that runs ``COMMIT`` as SQL is refused and its claim deleted, so the gateway's
    retry runs it again (docs/django.md): the dispute's row, written before the handler, was
    committed by that ``COMMIT`` too, and the retry was read as a copy, ``ignored``."""
    from payhooks.intake.hooks import guarded
    from payhooks.plumbing.errors import HandlerCommitted
    from tests.integration.test_ingest import received_of

    def commits(conn, event):
        conn.execute("COMMIT")
        return Applied(outcome=Outcome.PROCESSED)

    seen = Seen(conn)
    delivery = razorpay_sample("created", event_id="evt_C1")
    with pytest.raises(HandlerCommitted):
        ingest_received(conn, received_of(delivery), guarded(commits))
    again = send(conn, delivery, seen.hooks)
    assert again.outcome is Outcome.PROCESSED
    assert seen.kinds(conn) == ["dispute_opened"]
    assert dispute_row(conn, "disp_Ow3JcY8rKm5TuD")["status"] == "opened"


ORDERS = list(itertools.permutations(("created", "action_required", "lost")))


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
def test_every_arrival_order_ends_lost_and_handlers_see_only_forward_reports(conn, order):
    seen = Seen(conn)
    for name in order:
        send(conn, razorpay_sample(name), seen.hooks)
    assert dispute_row(conn, "disp_Ow3JcY8rKm5TuD")["status"] == "lost"
    ranks = [disputes.RANK[disputes.Status(k.removeprefix("dispute_"))] for k in seen.kinds(conn)]
    assert ranks == sorted(set(ranks))  # strictly forward
    assert seen.kinds(conn)[-1] == "dispute_lost"


def test_a_chargeback_won_then_raised_again_as_pre_arbitration_is_opened_again(conn):
    """As in Cashfree's published samples, one dispute (here 518204663) closed won as a
    chargeback, then updated to PRE_ARBITRATION_CREATED four minutes later: a later phase moves
    a decided dispute."""
    seen = Seen(conn)
    won = send(conn, cashfree_sample("2022-09-01_DISPUTE_CLOSED.json"), seen.hooks)
    again = send(conn, cashfree_sample("2022-09-01_DISPUTE_UPDATED.json"), seen.hooks)
    assert (won.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.PROCESSED)
    assert seen.kinds(conn) == ["dispute_won", "dispute_opened"]
    row = disputes.find(conn, "518204663", ["cashfree"])[0]
    assert (row.status, row.phase, row.open) == ("opened", "pre_arbitration", True)


def test_the_chargebacks_decision_arriving_after_its_pre_arbitration_is_stale(conn):
    seen = Seen(conn)
    send(conn, cashfree_sample("2022-09-01_DISPUTE_UPDATED.json"), seen.hooks)
    late = send(conn, cashfree_sample("2022-09-01_DISPUTE_CLOSED.json"), seen.hooks)
    assert late.outcome is Outcome.IGNORED
    assert disputes.find(conn, "518204663", ["cashfree"])[0].phase == "pre_arbitration"


def test_cashfree_created_bodies_of_two_versions_are_one_dispute(conn):
    seen = Seen(conn)
    old = send(conn, cashfree_sample("2022-09-01_DISPUTE_CREATED.json"), seen.hooks)
    new = send(conn, cashfree_sample("2025-01-01_DISPUTE_CREATED.json"), seen.hooks)
    assert old.outcome is Outcome.PROCESSED
    assert new.outcome is Outcome.DUPLICATE  # the same key: type, id, status, updated_at
    found = disputes.find(conn, "518391027", ["cashfree"])[0]
    assert (found.amount_paise, found.reason) == (700, "12.6.1: Duplicate Processing")
    assert found.respond_by.isoformat() == "2024-11-28T18:29:59+00:00"


def test_two_reports_of_one_open_rank_are_ordered_by_the_gateways_time(conn):
    seen = Seen(conn)
    start = 1_767_225_600

    def report(what: str, at: int) -> Delivery:
        told = Disputed(what=what, dispute_id="disp_R1", payment_id="pay_R1",
                        reference="order_R1", amount_paise=1000, respond_by=start + 86_400,
                        reported_at=at)  # fmt: skip
        return razorpay_sim.dispute_delivery(GATEWAY, told)

    send(conn, report("under_review", start + 20), seen.hooks)
    late = send(conn, report("action_required", start + 10), seen.hooks)
    newer = send(conn, report("action_required", start + 30), seen.hooks)
    assert (late.outcome, newer.outcome) == (Outcome.IGNORED, Outcome.PROCESSED)
    assert dispute_row(conn, "disp_R1")["status"] == "action_required"


# --- real concurrency ------------------------------------------------------------------------


def report(what: str, dispute_id: str, payment_id: str, *, amount: int, at: int) -> Delivery:
    """A Razorpay report of a dispute, as the simulator sends it, under an event id of its own."""
    told = Disputed(what=what, dispute_id=dispute_id, payment_id=payment_id,
                    reference="order_" + dispute_id, amount_paise=amount,
                    respond_by=at + 86_400, reported_at=at)  # fmt: skip
    return razorpay_sim.dispute_delivery(GATEWAY, told)


THREADS = 40
STATES = ("opened", "under_review", "action_required", "won")


def test_forty_deliveries_of_one_dispute_at_once_move_it_only_forward(conn, database_url):
    """Ten copies of each of four reports, each under its own key, released together: the
    dispute ends won, each report reaches the handler at most once, and what reached it (in
    commit order) only ever moved forward."""
    seen = Seen(conn)
    start = 1_767_225_600
    reports = [
        report(what, "disp_RACE", "pay_RACE", amount=5000, at=start + n)
        for n, what in enumerate(STATES)
    ]
    deliveries = [report for report in reports for _ in range(THREADS // len(STATES))]
    receipts = released_together(
        deliveries,
        lambda _: psycopg.connect(database_url, autocommit=True, options=OPTIONS),
        lambda c, d: send(c, d, seen.hooks),
    )
    processed = sum(r.outcome is Outcome.PROCESSED for r in receipts)
    assert 1 <= processed <= len(STATES)
    kinds = seen.kinds(conn)
    assert len(kinds) == processed and len(set(kinds)) == len(kinds)
    ranks = [(disputes.RANK[disputes.Status(k.removeprefix("dispute_"))], k) for k in kinds]
    assert [rank for rank, _ in ranks] == sorted(rank for rank, _ in ranks)
    assert kinds[-1] == "dispute_won"
    assert dispute_row(conn, "disp_RACE")["status"] == "won"


def test_two_disputes_of_one_payment_lost_at_once_are_both_counted(conn, database_url):
    seen = Seen(conn)
    payment_id = new_payment_id(Provider.RAZORPAY)
    capture(conn, seen.hooks, payment_id, "order_TWO")
    lost = [
        report("lost", f"disp_TWO{n}", payment_id, amount=1000 * (n + 1), at=1_767_225_600)
        for n in range(2)
    ]
    released_together(
        lost,
        lambda _: psycopg.connect(database_url, autocommit=True, options=OPTIONS),
        lambda c, d: send(c, d, seen.hooks),
    )
    assert find_payment(conn, "razorpay", payment_id).disputed_paise == 3000


def test_a_dispute_body_names_what_the_log_shows(conn):
    seen = Seen(conn)
    send(conn, razorpay_sample("created"), seen.hooks)
    row = conn.execute(
        "SELECT payment_id, merchant_ref FROM processed_webhooks WHERE outcome = 'processed'"
    ).fetchone()
    assert row == ("pay_Nq4TzLb8WcXe2K", "order_Nq4SkV1mPd7yHa")
    assert json.loads(razorpay_sample("created").body)["event"] == "payment.dispute.created"


def test_what_a_lost_dispute_took_back_is_never_refunded_again(conn):
    seen = Seen(conn)
    capture(conn, seen.hooks, "pay_Nq4TzLb8WcXe2K", "order_Nq4SkV1mPd7yHa")
    send(conn, razorpay_sample("lost"), seen.hooks)
    ask = {"key": "refund-after-dispute", "captured_paise": 3_149_900, "reason": "test",
           "requested_by": "test"}  # fmt: skip
    with pytest.raises(refunds.RefundTooLarge):
        refunds.request(conn, "razorpay", "pay_Nq4TzLb8WcXe2K", 3_149_900, **ask)
    made = refunds.request(conn, "razorpay", "pay_Nq4TzLb8WcXe2K", 3_149_900 - 84_900, **ask)
    assert made.amount_paise == 3_065_000


def test_what_a_lost_dispute_took_back_of_a_payment_the_handler_ignored_is_never_refunded(conn):
    """A second payment of a paid order, answered ``ignored`` by the handler (the guides'
    advice: a person refunds it) keeps no payment record of payhooks'; its dispute, lost, is
    recorded all the same. The refund's bound came from the record alone: the whole amount
    was refunded on top of what the dispute took back."""
    ignoring = Hooks()
    ignoring.on(EventKind.PAYMENT_CAPTURED)(lambda conn, event: Applied(outcome=Outcome.IGNORED))
    ignoring.on(*[kind for kind in EventKind if kind.is_dispute])(lambda conn, event: None)
    paid = razorpay_sim.delivery(GATEWAY, "payment.captured", payment_id="pay_Nq4TzLb8WcXe2K",
                                 order_id="order_Nq4SkV1mPd7yHa",
                                 amount_paise=3_149_900)  # fmt: skip
    assert send(conn, paid, ignoring).outcome is Outcome.IGNORED
    assert find_payment(conn, "razorpay", "pay_Nq4TzLb8WcXe2K") is None
    send(conn, razorpay_sample("lost"), ignoring)
    ask = {"key": "refund-after-dispute", "captured_paise": 3_149_900, "reason": "test",
           "requested_by": "test"}  # fmt: skip
    with pytest.raises(refunds.RefundTooLarge):
        refunds.request(conn, "razorpay", "pay_Nq4TzLb8WcXe2K", 3_149_900, **ask)
    made = refunds.request(conn, "razorpay", "pay_Nq4TzLb8WcXe2K", 3_149_900 - 84_900, **ask)
    assert made.captured_paise == 3_149_900 - 84_900


def test_a_payment_recorded_after_its_dispute_was_lost_counts_what_it_took_back(conn):
    """The capture's record written only after the loss (the capture parked for an order not
    yet there and replayed, or recovered by reconciliation): the loss is on it all the same,
    and bounds its refunds."""
    seen = Seen(conn)
    payment_id = new_payment_id(Provider.RAZORPAY)
    lost = report("lost", "disp_LATE", payment_id, amount=39_000, at=1_767_225_600)
    assert send(conn, lost, seen.hooks).outcome is Outcome.PROCESSED
    capture(conn, seen.hooks, payment_id, "order_LATE")
    paid = find_payment(conn, "razorpay", payment_id)
    assert paid is not None and paid.disputed_paise == 39_000
    ask = {"key": "refund-after-loss", "captured_paise": paid.paid_paise, "reason": "test",
           "requested_by": "test"}  # fmt: skip
    with pytest.raises(refunds.RefundTooLarge):
        refunds.request(conn, "razorpay", payment_id, paid.paid_paise, **ask)


# --- the other drivers: the async claim and the caller's own transaction -----------------------


def test_the_async_claim_records_disputes_once_and_in_order(conn):
    """``payhooks.aio`` (FastAPI's hooks) runs the same steps: a late report is ignored there
    too, and its async hooks see only the forward ones."""
    seen: list[str] = []
    hooks = AsyncHooks()

    @hooks.on(*(kind for kind in EventKind if kind.is_dispute))
    async def saw(on: psycopg.AsyncConnection, event: Event) -> None:
        seen.append(event.kind.value)

    async def deliver(names: list[str]) -> list[Outcome]:
        async with await psycopg.AsyncConnection.connect(conn.info.dsn, autocommit=True) as on:
            found = []
            for name in names:
                sample = razorpay_sample(name)
                received = receive(ADAPTERS[Provider.RAZORPAY], sample.body, sample.headers)
                found.append((await ingest_received_async(on, received, hooks)).outcome)
            return found

    outcomes = asyncio.run(deliver(["lost", "created", "lost"]))
    assert outcomes == [Outcome.PROCESSED, Outcome.IGNORED, Outcome.DUPLICATE]
    assert seen == ["dispute_lost"]


def test_inside_the_callers_transaction_a_stale_report_is_ignored_too(conn):
    seen = Seen(conn)
    adapter = ADAPTERS[Provider.RAZORPAY]
    for name, outcome in (("lost", Outcome.PROCESSED), ("created", Outcome.IGNORED)):
        sample = razorpay_sample(name)
        with conn.transaction():
            pending = ingest_in_transaction(conn, adapter, sample.body, sample.headers, seen.hooks)
        assert pending.receipt().outcome is outcome
    assert seen.kinds(conn) == ["dispute_lost"]


def test_an_async_dispute_hook_reads_what_the_loss_took_back_as_the_guides_show(database_url):
    """docs/fastapi.md: an async app's dispute hook reads the payment's record on the
    connection it is handed (``payments.find_async``), in the delivery's own transaction: the
    loss recorded by the core before the hook runs is there. The sync ``find`` on that
    connection raised, the delivery answered 500 at every retry, and the dispute was never
    recorded."""
    import asyncio

    from payhooks.aio.claims import ingest as ingest_async
    from payhooks.fastapi import AsyncHooks
    from payhooks.intake.payments import find_async

    taken_back: list[int] = []
    hooks = AsyncHooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    async def paid(conn, event):
        return None

    @hooks.on(*[kind for kind in EventKind if kind.is_dispute])
    async def disputed(conn, event):
        found = await find_async(conn, event.provider, event.payment_id)
        assert found is not None
        taken_back.append(found.disputed_paise)

    async def deliver_all() -> list[Outcome]:
        capture = razorpay_sim.delivery(GATEWAY, "payment.captured",
                                        payment_id="pay_Nq4TzLb8WcXe2K",
                                        order_id="order_Nq4SkV1mPd7yHa",
                                        amount_paise=3_149_900)  # fmt: skip
        outcomes = []
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            for delivery in (capture, razorpay_sample("created"), razorpay_sample("lost")):
                adapter = ADAPTERS[delivery.provider]
                got = await ingest_async(conn, adapter, delivery.body, delivery.headers, hooks)
                outcomes.append(got.outcome)
        return outcomes

    assert asyncio.run(deliver_all()) == [Outcome.PROCESSED] * 3
    assert taken_back == [0, 84_900]

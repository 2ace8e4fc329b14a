"""Settlements on the database: a settlement webhook is recorded by the claim and reaches no
handler; a payout and its lines are recorded once however many times they come, at the same
moment too (real connections, released together); lines are matched to the payments payhooks
applied; a payout's state only moves up; the review flags the captures not settled within
their gateway's cycle and a margin, and a settled line clears the flag."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways._settlements import Line, LineKind, Settlement, SettlementState
from payhooks.intake.ingest import Applied, Outcome, ingest
from payhooks.settlements import flags, listing, records
from payhooks.sim.gateways import cashfree as cashfree_sim
from payhooks.sim.gateways import razorpay as razorpay_sim
from payhooks.sim.parts import PaidOut, Payout
from tests.conftest import released_together
from tests.factories import ADAPTERS, GATEWAY, deliver, purchase
from tests.racing import while_held

NOW = datetime(2026, 1, 10, 6, 0, tzinfo=UTC)


def payout(provider: Provider = Provider.RAZORPAY, *entries: PaidOut, sid: str = "") -> Payout:
    entries = entries or (
        PaidOut(entry_id="pay_A1", kind="payment", payment_id="pay_A1", order_id="order_1",
                amount_paise=50_000, at=1_767_000_000),
    )  # fmt: skip
    return Payout(provider=provider, settlement_id=sid or "setl_T1", utr="UTR1", at=1_767_500_000,
                  entries=entries)  # fmt: skip


def line(
    payment_id: str | None,
    *,
    entry_id: str = "",
    sid: str = "setl_T1",
    net: int = 100,
    kind: LineKind = LineKind.PAYMENT,
    provider: Provider = Provider.RAZORPAY,
) -> Line:
    return Line(provider=provider, settlement_id=sid, entry_id=entry_id or str(payment_id),
                kind=kind, entry_type=kind.value, payment_id=payment_id, gateway_order_id=None,
                amount_paise=abs(net), fee_paise=0, tax_paise=0, net_paise=net)  # fmt: skip


def test_two_lines_of_one_payout_under_one_id_and_two_types_are_both_recorded(conn):
    """Cashfree numbers each kind of event on its own: a chargeback and its reversal can share
    an ``event_id`` in one payout. Keyed by the id alone, the second replaced the first,
    silently, and the payout's lines no longer added up."""
    from dataclasses import replace

    debit = replace(line(None, entry_id="8800", sid="9005", net=-20_000,
                         kind=LineKind.ADJUSTMENT, provider=Provider.CASHFREE),
                    entry_type="CHARGEBACK")  # fmt: skip
    credit = replace(debit, entry_type="CHARGEBACK_REVERSE", net_paise=20_000)
    records.record(conn, [], [debit, credit])
    records.record(conn, [], [credit, debit])  # the day fetched again: nothing twice
    kept = conn.execute(
        "SELECT entry_type, net_paise FROM payhooks_settlement_lines ORDER BY entry_type"
    ).fetchall()
    assert kept == [("CHARGEBACK", -20_000), ("CHARGEBACK_REVERSE", 20_000)]


def rows(conn, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def never(conn, event):
    raise AssertionError(f"a settlement reached the handler: {event}")


@pytest.mark.parametrize(
    "made",
    [razorpay_sim.settlement_delivery, cashfree_sim.settlement_delivery],
    ids=["razorpay", "cashfree"],
)
def test_a_settlement_webhook_is_recorded_once_and_reaches_no_handler(conn, made):
    provider = Provider.RAZORPAY if made is razorpay_sim.settlement_delivery else Provider.CASHFREE
    paid = payout(provider, sid="setl_W1" if provider is Provider.RAZORPAY else "7001")
    delivery = made(GATEWAY, paid)
    adapter = ADAPTERS[provider]
    first = ingest(conn, adapter, delivery.body, delivery.headers, never)
    again = ingest(conn, adapter, delivery.body, delivery.headers, never)
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert first.event.kind is EventKind.SETTLEMENT
    state, amount, utr = conn.execute(
        "SELECT state, amount_paise, utr FROM payhooks_settlements"
    ).fetchone()
    assert (state, amount, utr) == ("settled", paid.amount_paise, "UTR1")
    assert rows(conn, "payhooks_settlements") == 1


def test_the_reference_shops_handler_never_sees_a_settlement(conn):
    receipt = deliver(conn, razorpay_sim.settlement_delivery(GATEWAY, payout()))
    assert receipt.outcome is Outcome.PROCESSED
    assert rows(conn, "payments") == 0 and rows(conn, "payhooks_payments") == 0


def test_a_payout_and_its_lines_are_recorded_once_however_often_they_come(conn):
    lines = [line("pay_X", net=900), line(None, entry_id="adj_1", kind=LineKind.ADJUSTMENT)]
    first = records.record(conn, [], lines)
    again = records.record(conn, [], list(reversed(lines)) + lines)  # a report's repeat too
    assert (first.settlements, first.lines) == (1, 2)
    assert (again.settlements, again.lines, again.matched) == (0, 0, 0)
    assert rows(conn, "payhooks_settlement_lines") == 2


def test_lines_are_matched_to_the_payments_payhooks_applied(conn):
    buy = purchase(conn)
    deliver(conn, buy.captured())
    done = records.record(
        conn, [], [line(buy.payment_id, net=buy.amount_paise), line("pay_nobody")]
    )
    assert (done.matched, done.unmatched) == (1, 1)
    found = {e.payment_id: e for e in listing.lines(conn, "razorpay", "setl_T1")}
    assert found[buy.payment_id].matched is True
    assert found[buy.payment_id].gateway_order_id == buy.reference  # from the payment's record
    assert found["pay_nobody"].matched is False
    (count,) = flags.unmatched(conn)
    assert (count.provider, count.count) == ("razorpay", 1)


def test_a_line_recorded_before_its_payment_is_matched_by_the_next_review(conn):
    buy = purchase(conn)
    records.record(conn, [], [line(buy.payment_id, net=buy.amount_paise)])
    assert [c.count for c in flags.unmatched(conn)] == [1]
    deliver(conn, buy.captured())
    assert flags.unmatched(conn) == []  # no longer counted, before any review
    assert flags.review(conn, NOW).matched == 1
    (entry,) = listing.of_payments(conn, "razorpay", [buy.payment_id])
    assert entry.matched is True


def test_a_line_whose_payment_was_applied_since_is_known_to_the_list_console_and_alert(conn):
    """Before any review matches it again, the list, the payouts' counts, the line itself and
    the alert all read it alike: its payment is known now."""
    from payhooks.operations import alerts

    buy = purchase(conn)
    records.record(conn, [], [line(buy.payment_id, net=buy.amount_paise), line("pay_nobody")])
    deliver(conn, buy.captured())
    assert [e.payment_id for e in listing.unmatched_lines(conn)] == ["pay_nobody"]
    start, end = NOW - timedelta(days=3650), datetime.now(UTC) + timedelta(days=1)
    (paid,) = listing.payouts(conn, start, end)
    assert paid.unmatched == 1
    total = listing.totals(conn, start, end)
    assert total.unmatched == 1
    (entry,) = listing.of_payments(conn, "razorpay", [buy.payment_id])
    assert entry.matched is True
    (said,) = [a for a in alerts.settlements(conn, NOW) if a.condition.value.endswith("unmatched")]
    assert said.title.startswith("razorpay: 1 settlement line naming")


def test_a_late_line_of_a_payment_whose_record_was_purged_is_matched_by_its_settled_line(conn):
    """A refund's line a year after its capture, whose record the purge had taken
    (``REFUNDABLE_DAYS``): it was counted "naming a payment payhooks never applied" and
    alerted, though the payment had paid an order and been settled. The payment's own line, in
    an earlier payout, is the record that stays: the late line is matched by it."""
    buy = purchase(conn)
    deliver(conn, buy.captured())
    records.record(conn, [], [line(buy.payment_id, net=buy.amount_paise)])
    conn.execute("DELETE FROM payhooks_payments WHERE payment_id = %s", (buy.payment_id,))
    late = line(buy.payment_id, entry_id="rfnd_late1", sid="setl_T2", net=-100,
                kind=LineKind.REFUND)  # fmt: skip
    done = records.record(conn, [], [late])
    assert (done.matched, done.unmatched) == (1, 0)
    assert flags.unmatched(conn) == [] and listing.unmatched_lines(conn) == []
    (entry,) = [e for e in listing.lines(conn, "razorpay", "setl_T2")]
    assert entry.matched is True and entry.gateway_order_id == buy.reference


def test_a_payouts_state_only_moves_up_and_no_source_wipes_a_figure(conn):
    def state(s: SettlementState, status: str, amount: int | None) -> Settlement:
        return Settlement(provider=Provider.CASHFREE, settlement_id="900", state=s,
                          status=status, amount_paise=amount)  # fmt: skip

    records.record(conn, [state(SettlementState.SETTLED, "SUCCESS", 9794)])
    records.record(conn, [state(SettlementState.PENDING, "INITIATED", 9999)])  # late
    records.record(conn, [], [line("1", sid="900", provider=Provider.CASHFREE)])  # no figures
    found = conn.execute("SELECT state, status, amount_paise FROM payhooks_settlements").fetchone()
    assert found == ("settled", "SUCCESS", 9794)
    records.record(conn, [state(SettlementState.REVERSED, "REVERSED", None)])
    found = conn.execute("SELECT state, status, amount_paise FROM payhooks_settlements").fetchone()
    assert found == ("reversed", "REVERSED", 9794)


def cashfree_payout(state: SettlementState, status: str | None = None, *, current=False):
    return Settlement(provider=Provider.CASHFREE, settlement_id="900", state=state,
                      status=status or state.value, current=current)  # fmt: skip


def recorded_state(conn) -> str:
    return conn.execute("SELECT state FROM payhooks_settlements").fetchone()[0]


@pytest.mark.parametrize("told", [SettlementState.FAILED, SettlementState.REVERSED])
def test_a_failure_told_after_the_report_wins_and_its_capture_is_flagged_again(conn, told):
    """A report line says "paid out" as far as a report lists it; the gateway's own word
    that the payout failed or came back, later, is what stands."""
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=9),))
    records.record(conn, [], [line(buy.payment_id, sid="900", provider=Provider.CASHFREE)])
    assert recorded_state(conn) == "settled" and flags.review(conn, NOW).flagged == 0
    records.record(conn, [cashfree_payout(told)])
    assert recorded_state(conn) == told.value
    assert flags.review(conn, NOW).flagged == 1
    assert [u.payment_id for u in listing.unsettled(conn)] == [buy.payment_id]


def test_a_settled_word_after_a_failure_never_undoes_it(conn):
    """A ``SETTLEMENT_SUCCESS`` delivered again, or a report line of the payout, after its
    ``SETTLEMENT_FAILED``: the failure stands, and so does a reversal."""
    records.record(conn, [cashfree_payout(SettlementState.FAILED)])
    records.record(conn, [cashfree_payout(SettlementState.SETTLED, "SUCCESS")])
    records.record(conn, [], [line("1", sid="900", provider=Provider.CASHFREE)])
    assert recorded_state(conn) == "failed"
    records.record(conn, [cashfree_payout(SettlementState.REVERSED)])
    records.record(conn, [cashfree_payout(SettlementState.SETTLED, "SUCCESS")])
    records.record(conn, [cashfree_payout(SettlementState.FAILED)])
    assert recorded_state(conn) == "reversed"


def test_the_gateways_answer_about_the_payout_now_replaces_what_is_recorded(conn):
    """Razorpay tries a failed settlement again: its settlement entity, asked for now, says
    processed, and that is the payout's state."""
    records.record(conn, [cashfree_payout(SettlementState.FAILED, current=True)])
    records.record(conn, [cashfree_payout(SettlementState.SETTLED, current=True)])
    assert recorded_state(conn) == "settled"


def test_a_line_of_a_failed_payout_clears_no_flag(conn):
    buy = purchase(conn, Provider.CASHFREE)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=9),))
    assert flags.review(conn, NOW).flagged == 1
    records.record(conn, [cashfree_payout(SettlementState.FAILED)])
    records.record(conn, [], [line(buy.payment_id, sid="900", provider=Provider.CASHFREE)])
    assert [u.payment_id for u in listing.unsettled(conn)] == [buy.payment_id]


def test_one_payout_fetched_and_delivered_at_once_by_many_is_recorded_once(database_url):
    """Eight connections at the same moment: four record the report's page, four claim the
    webhook; one payout, its lines once, one claim."""
    paid = payout(Provider.RAZORPAY, *(
        PaidOut(entry_id=f"pay_C{n}", kind="payment", payment_id=f"pay_C{n}", order_id="o",
                amount_paise=10_000 + n, at=1_767_000_000) for n in range(40)
    ), sid="setl_C1")  # fmt: skip
    delivery = razorpay_sim.settlement_delivery(GATEWAY, paid)
    page = [line(e.payment_id, sid="setl_C1", net=e.net_paise) for e in paid.entries]

    def act(conn, n: int):
        if n % 2:
            return ingest(conn, ADAPTERS[Provider.RAZORPAY], delivery.body, delivery.headers, never)
        return records.record(conn, [], list(reversed(page)) if n % 4 else page)

    done = released_together(
        list(range(8)), lambda n: psycopg.connect(database_url, autocommit=True), act
    )
    outcomes = sorted(r.outcome.value for r in done if not isinstance(r, records.Recorded))
    assert outcomes == ["duplicate", "duplicate", "duplicate", "processed"]
    written = [r for r in done if isinstance(r, records.Recorded)]
    assert sum(r.lines for r in written) == 40
    with psycopg.connect(database_url) as conn:
        assert rows(conn, "payhooks_settlements") == 1
        assert rows(conn, "payhooks_settlement_lines") == 40
        amount = conn.execute("SELECT amount_paise FROM payhooks_settlements").fetchone()[0]
    assert amount == paid.amount_paise


def test_the_review_flags_a_capture_past_its_cycle_and_a_settled_line_clears_it(conn):
    late, settled = purchase(conn), purchase(conn)
    for buy in (late, settled):
        deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=7),))
    records.record(conn, [], [line(settled.payment_id, net=settled.amount_paise)])
    found = flags.review(conn, NOW)
    assert (found.flagged, found.cleared) == (1, 0)
    (flagged,) = listing.unsettled(conn)
    assert (flagged.payment_id, flagged.gateway_order_id) == (late.payment_id, late.reference)
    assert flagged.due_at == NOW - timedelta(days=7) + timedelta(days=4) + flags.DEFAULT_MARGIN
    assert flags.review(conn, NOW).flagged == 0  # flagged once
    records.record(conn, [], [line(late.payment_id, sid="setl_T2", net=late.amount_paise)])
    assert listing.unsettled(conn) == []  # cleared the moment a settled line names it


@pytest.mark.parametrize("held", ["settled line", "review"])
def test_a_settled_line_recorded_while_the_review_runs_leaves_its_payment_unflagged(
    conn, database_url, held
):
    """The review and a report page whose settled line names an overdue capture, at the same
    moment, either one held open: neither statement sees the other's uncommitted rows, so the
    review flagged the capture and the line's own clear found no flag to take (a false "money
    missing" until the next review, six hours on). They take turns; the payment ends
    unflagged whichever commits first."""
    buy = purchase(conn)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=7),))
    page = [line(buy.payment_id, net=buy.amount_paise)]

    def settle(on) -> None:
        records.record(on, [], page)

    def review(on) -> None:
        flags.review(on, NOW)

    first, second = (settle, review) if held == "settled line" else (review, settle)
    while_held(database_url, conn, first, second)
    assert listing.unsettled(conn) == []


def test_a_capture_within_its_cycle_and_margin_is_not_flagged(conn):
    buy = purchase(conn)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=5),))
    assert flags.review(conn, NOW).flagged == 0
    assert flags.review(conn, NOW, margin=timedelta(hours=12)).flagged == 1


def test_a_reversed_payout_unsettles_its_payments_at_the_next_review(conn):
    buy = purchase(conn)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=9),))
    records.record(conn, [], [line(buy.payment_id, net=buy.amount_paise)])
    assert flags.review(conn, NOW).flagged == 0
    reversed_ = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_T1",
                           state=SettlementState.REVERSED, status="reversed")  # fmt: skip
    records.record(conn, [reversed_])
    assert flags.review(conn, NOW).flagged == 1


@pytest.mark.parametrize("told", [SettlementState.REVERSED, SettlementState.FAILED])
def test_a_payout_that_came_back_flags_its_captures_again_whatever_their_age(conn, told):
    buy = purchase(conn)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=200),))
    records.record(conn, [], [line(buy.payment_id, net=buy.amount_paise)])
    came_back = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_T1", state=told,
                           status=told.value)  # fmt: skip
    records.record(conn, [came_back])
    assert flags.review(conn, NOW, providers=()).flagged == 1  # the gateway's word: no silence
    (flagged,) = listing.unsettled(conn)
    assert flagged.payment_id == buy.payment_id


def test_a_payout_that_came_back_flags_its_capture_beside_another_payout_settled(conn):
    """With any payment's payout settled, every payment read as settled: the flag of a payout
    that came back named its line ``l``, as the settled check names its own."""
    came, went = purchase(conn), purchase(conn)
    for buy in (came, went):
        deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=200),))
    settled = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_OK",
                         state=SettlementState.SETTLED, status="processed")  # fmt: skip
    records.record(conn, [settled], [
        line(went.payment_id, net=went.amount_paise, sid="setl_OK"),
        line(came.payment_id, net=came.amount_paise),
    ])  # fmt: skip
    came_back = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_T1",
                           state=SettlementState.REVERSED, status="reversed")  # fmt: skip
    records.record(conn, [came_back])
    assert flags.review(conn, NOW, providers=()).flagged == 1
    assert [u.payment_id for u in listing.unsettled(conn)] == [came.payment_id]


def test_a_payout_that_came_back_flags_a_capture_whose_record_the_purge_took(conn):
    """A capture's record goes with the purge after a refund's year; its payout reported
    reversed later was no longer flagged: what flags it is the settlement line itself."""
    from payhooks.operations.retention import purge

    buy = purchase(conn)
    deliver(conn, buy.captured())
    now = datetime.now(UTC)
    captured = now - timedelta(days=400)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (captured,))
    paid = replace(line(buy.payment_id, net=buy.amount_paise), occurred_at=captured,
                   gateway_order_id=buy.reference)  # fmt: skip
    records.record(conn, [], [paid])
    purge(conn, 90)
    gone = conn.execute("SELECT count(*) FROM payhooks_payments").fetchone()
    assert gone == (0,)  # the premise: the capture's record is purged
    came_back = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_T1",
                           state=SettlementState.REVERSED, status="reversed")  # fmt: skip
    records.record(conn, [came_back])
    assert flags.review(conn, now, providers=()).flagged == 1
    (flagged,) = listing.unsettled(conn)
    assert (flagged.payment_id, flagged.gateway_order_id) == (
        buy.payment_id,
        buy.reference,
    )
    assert abs(flagged.captured_at - captured) < timedelta(seconds=1)


def test_the_longest_margin_still_flags_a_capture_once_it_falls_due(conn):
    """A margin of 60 days: a capture falls due past the 45 days a review reads back from
    now, and is flagged all the same."""
    buy = purchase(conn)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=70),))
    longest = timedelta(hours=flags.MARGIN_HOURS[-1])
    assert flags.review(conn, NOW, margin=longest).flagged == 1


def test_a_capture_a_line_it_cannot_read_names_is_not_flagged_on_that_silence(conn):
    """The line may be its payout: it is for a person (kept, alerted), not read as "not paid"."""
    import json

    from payhooks.gateways.razorpay import settlements

    buy = purchase(conn)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=9),))
    item = {"entity_id": buy.payment_id, "type": "payment", "settled": True, "amount": -1,
            "settlement_id": "setl_U1"}  # fmt: skip
    body = json.dumps({"entity": "collection", "count": 1, "items": [item]}).encode()
    records.record(conn, [], [], settlements.recon(body).unreadable)
    assert flags.review(conn, NOW).flagged == 0
    assert [u.payment_id for u in listing.unreadable(conn)] == [buy.payment_id]


def test_a_line_it_cannot_read_is_kept_once_as_last_met_and_leaves_once_read(conn):
    import json

    from payhooks.gateways.razorpay import settlements

    def met(**item) -> None:
        odd = {"entity_id": "pay_K1", "type": "payment", "settled": True,
               "settlement_id": "setl_K1"} | item  # fmt: skip
        body = json.dumps({"entity": "collection", "count": 1, "items": [odd]}).encode()
        records.record(conn, [], [], settlements.recon(body).unreadable)

    met(amount=-1)
    met(amount=100, credit=98, debit=0, fee=2)  # another field now, still unreadable
    (kept,) = listing.unreadable(conn)
    assert kept.reason == "tax is missing" and '"fee": 2' in kept.raw
    records.record(conn, [], [line("pay_K1", sid="setl_K1")])  # read at last
    assert listing.unreadable(conn) == []


def test_a_gateway_that_documents_no_cycle_is_not_reviewed(conn):
    buy = purchase(conn, Provider.PAYU)
    deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (NOW - timedelta(days=30),))
    assert flags.review(conn, NOW).flagged == 0
    assert Provider.PAYU not in flags.allowed()


def test_the_list_adds_up_each_payout_and_says_when_its_lines_do_not(conn):
    stated = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_T1",
                        state=SettlementState.SETTLED, status="processed", amount_paise=1000,
                        fees_paise=20, tax_paise=4,
                        settled_at=NOW - timedelta(hours=1))  # fmt: skip
    records.record(conn, [stated], [line("pay_1", net=700), line("pay_2", net=300)])
    other = Settlement(
        provider=Provider.CASHFREE, settlement_id="55", state=SettlementState.SETTLED,
        status="SUCCESS", amount_paise=500, settled_at=NOW - timedelta(hours=2),
    )  # fmt: skip
    records.record(conn, [other], [line("9", sid="55", net=400, provider=Provider.CASHFREE)])
    first, second = listing.payouts(conn, NOW - timedelta(days=1), NOW)
    assert (first.settlement_id, first.lines, first.lines_net_paise, first.differs) == (
        "setl_T1",
        2,
        1000,
        False,
    )
    assert (second.settlement_id, second.lines_net_paise, second.differs) == ("55", 400, True)
    total = listing.totals(conn, NOW - timedelta(days=1), NOW)
    assert (total.settlements, total.amount_paise, total.lines_net_paise, total.differing) == (
        2,
        1500,
        1400,
        1,
    )
    assert listing.payouts(conn, NOW - timedelta(days=1), NOW, provider="cashfree") == [second]
    assert listing.payouts(conn, NOW - timedelta(days=1), NOW, after=first.cursor) == [second]


def test_hooks_registered_for_settlements_never_run(conn):
    """The core records a settlement; a merchant's hooks are for payments."""
    from payhooks import Hooks

    hooks = Hooks()
    hooks.on(EventKind.SETTLEMENT)(lambda c, e: Applied(outcome=Outcome.IGNORED))
    delivery = razorpay_sim.settlement_delivery(GATEWAY, payout())
    receipt = ingest(conn, ADAPTERS[Provider.RAZORPAY], delivery.body, delivery.headers, hooks)
    assert receipt.outcome is Outcome.PROCESSED


def test_the_async_claim_records_a_settlement_as_the_sync_one_does(conn, database_url):
    """``payhooks.aio`` drives the same steps: a FastAPI app's async hooks never see it."""
    import asyncio

    from payhooks.aio.claims import ingest_received as ingest_async
    from payhooks.intake.ingest import receive

    paid = payout(Provider.CASHFREE, sid="7002")
    delivery = cashfree_sim.settlement_delivery(GATEWAY, paid)
    adapter = ADAPTERS[Provider.CASHFREE]
    received = receive(adapter, delivery.body, delivery.headers)

    async def never_async(conn, event):
        raise AssertionError(f"a settlement reached the handler: {event}")

    async def twice() -> list[str]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as on:
            return [(await ingest_async(on, received, never_async)).outcome.value for _ in "ab"]

    assert asyncio.run(twice()) == ["processed", "duplicate"]
    assert conn.execute(
        "SELECT settlement_id, amount_paise FROM payhooks_settlements"
    ).fetchall() == [("7002", paid.amount_paise)]

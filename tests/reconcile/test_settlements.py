"""Fetching settlements (``payhooks.reconcile.settling``) against the gateways' doubles over a
loopback socket, on real PostgreSQL: payouts and their lines recorded and matched to the
payments the shop applied, a second fetch recording nothing twice, a range refused before
any call, one gateway's API error told without stopping the other, and the review after."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from itertools import pairwise

import pytest

from payhooks.events import Provider
from payhooks.gateways._settlements import INDIA, MAX_RANGE_DAYS
from payhooks.reconcile import settling
from payhooks.reconcile.running import connecting
from payhooks.reconcile.settling import fetch, fetch_once
from payhooks.settlements import listing, reads
from payhooks.sim.gateway_api import Fault
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.factories import deliver, purchase
from tests.reconcile.conftest import API_KEYS, sim

DAY = date(2026, 1, 5)
NEXT = date(2026, 1, 6)
DAY_START = datetime(2026, 1, 1, tzinfo=UTC)
PAID_AT = int(datetime(2026, 1, 5, 6, 0, tzinfo=UTC).timestamp())
LATER = datetime(2026, 1, 20, tzinfo=UTC)
CAPTURED = datetime(2026, 1, 3, tzinfo=UTC)
CYCLE = (date(2026, 1, 3), date(2026, 1, 9))
"""The days a capture of ``CAPTURED`` may be paid out on: its gateway's cycle and the margin.
The review flags it only once they are read whole."""


def paid(conn, api, provider: Provider):
    """A checkout paid: captured at the double, its webhook applied by the shop."""
    buy = purchase(conn, provider)
    api.pay(sim(buy), buy.payment_id)
    deliver(conn, buy.captured())
    return buy


def credentials(url: str) -> dict:
    from payhooks.gateways import credentials as read

    return read(API_KEYS.env(url))


def test_a_fetch_records_each_payout_and_matches_its_lines(conn, database_url, gateway_api):
    api, url = gateway_api
    rzp = [paid(conn, api, Provider.RAZORPAY) for _ in range(3)]
    cf = paid(conn, api, Provider.CASHFREE)
    for provider in (Provider.RAZORPAY, Provider.CASHFREE):
        api.pay_out(provider, at=PAID_AT)
    tally = fetch_once(connecting(database_url), credentials(url), DAY, DAY, now=lambda: LATER)
    assert tally.failures == {}
    assert tally.recorded[Provider.RAZORPAY].lines == 3
    assert tally.recorded[Provider.RAZORPAY].matched == 3
    assert tally.recorded[Provider.CASHFREE].matched == 1
    payouts = listing.payouts(conn, datetime(2026, 1, 1, tzinfo=UTC), LATER)
    assert {p.provider for p in payouts} == {"razorpay", "cashfree"}
    assert all(not p.differs and p.unmatched == 0 for p in payouts)
    (entry,) = listing.of_payments(conn, "cashfree", [cf.payment_id])
    assert entry.gateway_order_id == cf.reference and entry.state == "settled"
    assert {e.payment_id for e in listing.lines(conn, "razorpay", payouts[-1].settlement_id)} <= {
        b.payment_id for b in rzp
    }
    assert "razorpay: 1 new payout(s), 3 new line(s), 3 matched" in tally.summary()


def test_a_second_fetch_records_nothing_twice(conn, database_url, gateway_api):
    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    found = credentials(url)
    fetch_once(connecting(database_url), found, DAY, DAY, now=lambda: LATER)
    again = fetch_once(connecting(database_url), found, DAY, DAY, now=lambda: LATER)
    done = again.recorded[Provider.RAZORPAY]
    assert (done.settlements, done.lines, done.matched) == (0, 0, 0)
    assert conn.execute("SELECT count(*) FROM payhooks_settlement_lines").fetchone()[0] == 1


def test_a_capture_the_gateway_kept_back_is_flagged_by_the_review(conn, database_url, gateway_api):
    api, url = gateway_api
    settled, held = paid(conn, api, Provider.RAZORPAY), paid(conn, api, Provider.RAZORPAY)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (CAPTURED,))
    api.pay_out(Provider.RAZORPAY, at=PAID_AT, held={held.payment_id})
    tally = fetch_once(connecting(database_url), credentials(url), *CYCLE, now=lambda: LATER)
    assert tally.review is not None and tally.review.flagged == 1
    assert [u.payment_id for u in listing.unsettled(conn)] == [held.payment_id]
    assert listing.of_payments(conn, "razorpay", [settled.payment_id])


def test_one_gateways_error_is_told_and_the_other_is_still_fetched(conn, database_url, gateway_api):
    api, url = gateway_api
    paid(conn, api, Provider.CASHFREE)
    api.pay_out(Provider.CASHFREE, at=PAID_AT)
    api.fail_next(Provider.RAZORPAY, Fault(status=503))
    tally = fetch_once(connecting(database_url), credentials(url), DAY, DAY, now=lambda: LATER)
    assert "razorpay" in tally.trouble() and "503" in tally.trouble()
    assert tally.recorded[Provider.CASHFREE].lines == 1
    assert "FAILED" in tally.summary()


def test_a_gateway_whose_report_failed_has_no_capture_flagged(conn, database_url, gateway_api):
    """An error says nothing of what was paid out: its captures wait for a fetch that reads."""
    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (CAPTURED,))
    api.fail_next(Provider.RAZORPAY, Fault(status=500))
    failed = fetch_once(connecting(database_url), credentials(url), *CYCLE, now=lambda: LATER)
    assert failed.review is not None and failed.review.flagged == 0
    again = fetch_once(connecting(database_url), credentials(url), *CYCLE, now=lambda: LATER)
    assert again.review is not None and again.review.flagged == 1  # read whole: nothing paid


@pytest.mark.parametrize(
    ("refusing", "error"),
    [
        pytest.param(
            "INSERT ON payhooks_settlement_lines",
            ("55P03", "LockNotAvailable"),
            id="a page of its report",
        ),
        pytest.param(
            "INSERT OR UPDATE ON payhooks_settlement_reads",
            ("P0001", "RaiseException"),
            id="its days read marked",
        ),
    ],
)
def test_a_database_error_on_one_gateway_leaves_the_others_fetched_marked_and_reviewed(
    conn, database_url, gateway_api, refusing, error
):
    """Not only an API error: the database failing one gateway's page (a lock or statement
    timeout, a deadlock; one line's own refusal is that line's, kept unread, below), or
    refusing the mark of its days read whole, is that gateway's failure, told with its type;
    the others are fetched, their days marked and their captures reviewed, and its own
    captures are not flagged on that silence."""
    code, name = error
    api, url = gateway_api
    paid(conn, api, Provider.CASHFREE)
    settled, held = paid(conn, api, Provider.RAZORPAY), paid(conn, api, Provider.RAZORPAY)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (CAPTURED,))
    api.pay_out(Provider.CASHFREE, at=PAID_AT)
    api.pay_out(Provider.RAZORPAY, at=PAID_AT, held={held.payment_id})
    conn.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$ BEGIN RAISE EXCEPTION 'cashfree is refused' USING ERRCODE = '{code}'; END $$"
    )
    conn.execute(
        f"CREATE TRIGGER refuse BEFORE {refusing} FOR EACH ROW"
        " WHEN (NEW.provider = 'cashfree') EXECUTE FUNCTION refuse()"
    )
    tally = fetch_once(connecting(database_url), credentials(url), *CYCLE, now=lambda: LATER)
    assert set(tally.failures) == {Provider.CASHFREE}
    assert name in tally.trouble() and "cashfree is refused" in tally.trouble()
    assert tally.recorded[Provider.RAZORPAY].lines == 1
    assert reads.read_through(conn, list(Provider)).keys() == {Provider.RAZORPAY}
    assert tally.review is not None and tally.review.flagged == 1
    assert [u.payment_id for u in listing.unsettled(conn)] == [held.payment_id]
    assert listing.of_payments(conn, "razorpay", [settled.payment_id])


NEGATIVE = {"amount": -2450, "credit": 0, "debit": 2450}
"""An adjustment whose amount is negative."""
NUL = {"amount": 2450, "credit": 2450, "debit": 0, "order_id": "order_\u0000x"}
"""An adjustment naming an order with a NUL in it: valid JSON, text PostgreSQL cannot hold."""


def unreadable_page(payout, odd=NEGATIVE) -> bytes:
    """A day of Razorpay's recon as the double answers it, and an adjustment more, ``odd``: a
    line payhooks cannot read."""
    items = [razorpay_sim.recon_item(payout, e) for e in payout.entries]
    adjustment = {"entity_id": "adj_Neg1", "type": "adjustment", "fee": 0, "tax": 0}
    items.append(items[0] | adjustment | odd)
    return json.dumps({"entity": "collection", "count": len(items), "items": items}).encode()


@pytest.mark.parametrize(
    ("odd", "why"),
    [(NEGATIVE, "amount is negative: -2450"), (NUL, "order_id is not valid text")],
)
def test_an_unreadable_line_is_kept_and_every_other_line_day_and_total_recorded(
    conn, database_url, gateway_api, odd, why
):
    api, url = gateway_api
    for _ in range(2):
        paid(conn, api, Provider.RAZORPAY)
    first = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    paid(conn, api, Provider.RAZORPAY)
    second = api.pay_out(Provider.RAZORPAY, at=PAID_AT + 86_400)
    assert first is not None and second is not None
    for _ in range(2):  # the next fetch meets the same line, and goes on again
        api.fail_next(Provider.RAZORPAY, Fault(body=unreadable_page(first, odd)))
        tally = fetch_once(connecting(database_url), credentials(url), DAY, NEXT, now=lambda: LATER)
        assert tally.failures == {}
        assert tally.unreadable == {Provider.RAZORPAY: 1}
        assert "1 line(s) it cannot read, kept" in tally.summary()
    assert conn.execute("SELECT count(*) FROM payhooks_settlement_lines").fetchone()[0] == 3
    stated = {p.settlement_id: p.amount_paise for p in listing.payouts(conn, DAY_START, LATER)}
    assert stated == {first.settlement_id: first.amount_paise,
                      second.settlement_id: second.amount_paise}  # fmt: skip
    (kept,) = listing.unreadable(conn)
    assert (kept.provider, kept.settlement_id, kept.entry_id) == (
        "razorpay",
        first.settlement_id,
        "adj_Neg1",
    )
    assert why in kept.reason and '"adj_Neg1"' in kept.raw


def test_a_line_the_database_refuses_is_kept_unreadable_and_the_rest_recorded(
    conn, database_url, gateway_api
):
    """An app's trigger refusing one line's row failed the whole page, on every fetch: the
    payout's other lines never recorded, the gateway's review never run. The refused line is
    kept, saying why, as a line payhooks cannot read; the rest are recorded."""
    api, url = gateway_api
    for _ in range(3):
        paid(conn, api, Provider.RAZORPAY)
    payout = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    assert payout is not None
    refused = payout.entries[1].entry_id
    conn.execute(
        "CREATE FUNCTION refuse_line() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'this line is refused'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_line BEFORE INSERT OR UPDATE ON payhooks_settlement_lines"
        f" FOR EACH ROW WHEN (NEW.entry_id = '{refused}') EXECUTE FUNCTION refuse_line()"
    )
    for _ in range(2):  # the next fetch meets it again, and goes on again
        tally = fetch_once(connecting(database_url), credentials(url), DAY, NEXT, now=lambda: LATER)
        assert tally.failures == {}, tally.trouble()
        assert tally.unreadable == {Provider.RAZORPAY: 1}
        assert tally.review is not None
    lines = "SELECT entry_id FROM payhooks_settlement_lines ORDER BY entry_id"
    assert [e for (e,) in conn.execute(lines)] == sorted(
        e.entry_id for e in payout.entries if e.entry_id != refused
    )
    (kept,) = listing.unreadable(conn)
    assert (kept.settlement_id, kept.entry_id) == (payout.settlement_id, refused)
    assert "the database refused to record it" in kept.reason
    assert "this line is refused" in kept.reason


def test_a_payout_the_database_refuses_is_told_and_the_other_payouts_recorded(
    conn, database_url, gateway_api
):
    """A payout's own row refused (an app's trigger) failed the page after its lines were
    taken row by row: every payout of the page, and the gateway's fetch, on every run. The
    refused payout is told (the gateway's fetch said failed in part), its lines kept unread
    with it, and the other payout and its lines recorded."""
    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    first = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    paid(conn, api, Provider.RAZORPAY)
    second = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    assert first is not None and second is not None
    conn.execute(
        "CREATE FUNCTION refuse_payout() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'this payout is under audit'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_payout BEFORE INSERT OR UPDATE ON payhooks_settlements FOR EACH ROW"
        f" WHEN (NEW.settlement_id = '{second.settlement_id}') EXECUTE FUNCTION refuse_payout()"
    )
    tally = fetch_once(connecting(database_url), credentials(url), DAY, NEXT, now=lambda: LATER)
    trouble = tally.trouble() or ""
    assert f"payout {second.settlement_id} refused: this payout is under audit" in trouble, trouble
    assert "CONTEXT" not in trouble
    stated = {p.settlement_id for p in listing.payouts(conn, DAY_START, LATER)}
    assert stated == {first.settlement_id}
    lines = "SELECT settlement_id, count(*) FROM payhooks_settlement_lines GROUP BY 1"
    assert conn.execute(lines).fetchall() == [(first.settlement_id, len(first.entries))]
    assert {u.settlement_id for u in listing.unreadable(conn)} == {second.settlement_id}


def test_one_payout_whose_figures_failed_is_told_and_the_rest_recorded(
    conn, database_url, gateway_api
):
    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    first = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    paid(conn, api, Provider.RAZORPAY)
    second = api.pay_out(Provider.RAZORPAY, at=PAID_AT + 86_400)
    assert first is not None and second is not None
    api.fail_next(Provider.RAZORPAY, Fault(), Fault(), Fault(body=b'{"entity": "other"}'))
    tally = fetch_once(connecting(database_url), credentials(url), DAY, NEXT, now=lambda: LATER)
    assert first.settlement_id in tally.trouble() and "not a settlement entity" in tally.trouble()
    assert tally.recorded[Provider.RAZORPAY].lines == 2
    stated = {p.settlement_id: p.amount_paise for p in listing.payouts(conn, DAY_START, LATER)}
    assert stated == {first.settlement_id: None, second.settlement_id: second.amount_paise}


@pytest.mark.parametrize(
    ("start", "end", "why"),
    [
        (date(2026, 1, 6), date(2026, 1, 5), "starts"),
        (date(2025, 12, 1), date(2025, 12, 1) + timedelta(days=MAX_RANGE_DAYS), "more than"),
        (date(2026, 1, 19), date(2026, 1, 21), "after today"),
    ],
)
def test_a_range_it_cannot_fetch_is_refused_before_any_call(
    database_url, gateway_api, start, end, why
):
    api, url = gateway_api
    with pytest.raises(ValueError, match=why):
        fetch_once(connecting(database_url), credentials(url), start, end, now=lambda: LATER)
    assert sum(api.asked.values()) == 0


def test_gateways_with_no_settlement_report_are_named_not_fetched(database_url, gateway_api):
    _, url = gateway_api
    tally = fetch_once(connecting(database_url), credentials(url), DAY, DAY, now=lambda: LATER)
    assert set(tally.unread) == {Provider.PAYU, Provider.PHONEPE, Provider.JUSPAY}
    assert "no settlement report payhooks reads: " in tally.summary()


def test_the_one_call_for_a_merchants_scheduler(conn, database_url, gateway_api):
    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    api.pay_out(
        Provider.RAZORPAY,
        at=int(datetime.combine(yesterday, datetime.min.time(), UTC).timestamp()) + 9 * 3600,
    )
    tally = fetch(database_url, yesterday, yesterday, environ=API_KEYS.env(url))
    assert tally.recorded[Provider.RAZORPAY].matched == 1


# --- the command --------------------------------------------------------------------------------


def test_the_command_fetches_a_range_and_lists_what_is_flagged(
    conn, database_url, gateway_api, tmp_path
):
    from tests.invoking import payhooks_command

    api, url = gateway_api
    settled, held = paid(conn, api, Provider.RAZORPAY), paid(conn, api, Provider.RAZORPAY)
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    at = datetime.combine(yesterday, datetime.min.time(), UTC) + timedelta(hours=9)
    api.pay_out(Provider.RAZORPAY, at=int(at.timestamp()), held={held.payment_id})
    conn.execute("UPDATE payhooks_payments SET applied_at = now() - interval '10 days'")
    captured = (datetime.now(INDIA) - timedelta(days=10)).date().isoformat()
    day = yesterday.isoformat()
    env = API_KEYS.env(url)
    done = payhooks_command(  # from the captures' day: a payout may be on any day since
        database_url, tmp_path, "settlements", "--from", captured, "--to", day, **env
    )
    assert done.exit_code == 0, done.output
    assert "razorpay: 1 new payout(s), 1 new line(s), 1 matched" in done.output
    assert "1 capture(s) newly flagged unsettled" in done.output
    listed = payhooks_command(database_url, tmp_path, "settlements", "--unsettled")
    assert [row["payment_id"] for row in json.loads(listed.output)] == [held.payment_id]
    assert listing.of_payments(conn, "razorpay", [settled.payment_id])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "name the days to fetch"),
        (("--from", "2026-01-05", "--to", "5 Jan"), "are days: YYYY-MM-DD"),
        (("--from", "2026-01-06", "--to", "2026-01-05"), "starts (2026-01-06) after it ends"),
        (("--from", "0001-01-01", "--to", "0001-01-02"), "before 1970"),
    ],
)
def test_the_command_refuses_a_range_it_cannot_fetch_in_one_line(
    database_url, gateway_api, tmp_path, args, said
):
    from tests.invoking import payhooks_command

    _, url = gateway_api
    done = payhooks_command(database_url, tmp_path, "settlements", *args, **API_KEYS.env(url))
    assert done.exit_code == 1
    assert said in done.output and "Traceback" not in done.output


def test_the_command_exits_1_naming_the_gateway_whose_report_failed(
    database_url, gateway_api, tmp_path
):
    from tests.invoking import payhooks_command

    api, url = gateway_api
    api.fail_next(Provider.CASHFREE, Fault(status=500))
    day = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
    done = payhooks_command(
        database_url, tmp_path, "settlements", "--from", day, "--to", day, **API_KEYS.env(url)
    )
    assert done.exit_code == 1
    assert "cashfree: answered 500" in done.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--unsettled", "--unmatched"), "--unsettled and --unmatched print one list each"),
        (("--unmatched", "--from", "2026-01-05", "--to", "2026-01-05"), "--from and --to"),
        (("--unsettled", "--to", "2026-01-05"), "--from and --to"),
        (("--catch-up", "--from", "2026-01-05", "--to", "2026-01-05"), "--catch-up"),
        (("--catch-up", "--unsettled"), "--catch-up"),
    ],
)
def test_the_command_refuses_lists_or_a_catch_up_together_or_beside_days_as_a_usage_error(
    database_url, tmp_path, args, said
):
    from tests.invoking import payhooks_command

    done = payhooks_command(database_url, tmp_path, "settlements", *args)
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith("payhooks: ") and said in done.stderr
    assert done.stdout == ""


def test_the_command_says_a_line_it_cannot_read_and_lists_it(
    conn, database_url, gateway_api, tmp_path
):
    from tests.invoking import payhooks_command

    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    at = datetime.combine(yesterday, datetime.min.time(), UTC) + timedelta(hours=9)
    made = api.pay_out(Provider.RAZORPAY, at=int(at.timestamp()))
    api.fail_next(Provider.RAZORPAY, Fault(body=unreadable_page(made)))
    day = yesterday.isoformat()
    done = payhooks_command(
        database_url, tmp_path, "settlements", "--from", day, "--to", day, **API_KEYS.env(url)
    )
    assert done.exit_code == 0, done.output
    assert "razorpay: 1 new payout(s), 1 new line(s), 1 matched" in done.stdout
    assert "1 line(s) it cannot read, kept (--unreadable lists them)" in done.stdout
    listed = payhooks_command(database_url, tmp_path, "settlements", "--unreadable")
    (row,) = json.loads(listed.stdout)
    assert row["entry_id"] == "adj_Neg1" and "amount" in row["reason"] and row["raw"]


# --- the worker's fetch ---------------------------------------------------------------------------


def fetching_worker(rig, clock=None, *, every: float = 3600.0):
    """The reference worker, fetching settlements every ``every`` seconds over the rig's
    reconciler (a failed fetch tried again at once), its days read by ``clock``."""
    from dataclasses import replace

    from payhooks.service.worker import Worker, WorkerOptions

    configured = replace(rig.settings, smtp_url="smtp://127.0.0.1:9")
    options = WorkerOptions(settlements_every_seconds=every, settlements_retry_seconds=0.0)
    worker = Worker(rig.pool, configured, options, **({"clock": clock} if clock else {}))
    worker.reconciler = rig.reconciler()
    return worker


class Clock:
    """The worker's time, moved on by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def read_through(conn) -> dict[str, date]:
    return dict(conn.execute("SELECT provider, read_through FROM payhooks_settlement_reads"))


def days_read(conn) -> dict[str, tuple[date, date]]:
    """Each gateway's days read whole: the first and the last."""
    rows = conn.execute("SELECT provider, read_from, read_through FROM payhooks_settlement_reads")
    return {provider: (first, last) for provider, first, last in rows}


def test_the_worker_reads_the_days_it_missed_since_the_last_day_read_whole(conn, database_url, rig):
    """A capture of day D paid out on D+2; the days to D+1 read whole, then no fetch for
    days (the gateway down, or the worker). The worker's next fetch reads from D+2: the
    payout is recorded, and the capture is not flagged as money missing."""
    now = datetime.now(UTC)
    buy = paid(conn, rig.api, Provider.RAZORPAY)
    captured = now - timedelta(days=6, hours=1)  # due (four days and the margin) an hour ago
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (captured,))
    rig.api.pay_out(Provider.RAZORPAY, at=int((captured + timedelta(days=2)).timestamp()))
    day = captured.astimezone(INDIA).date()
    before = fetch_once(
        connecting(database_url), credentials(rig.url), day - timedelta(days=1),
        day + timedelta(days=1),
    )  # fmt: skip
    assert before.failures == {}
    worker = fetching_worker(rig)
    try:
        assert worker.maybe_fetch_settlements() == 1  # the payout of D+2, its one line
    finally:
        worker.close()
    (entry,) = listing.of_payments(conn, "razorpay", [buy.payment_id])
    assert entry.state == "settled"
    assert listing.unsettled(conn) == []


def test_a_gateway_down_for_days_has_its_missed_days_read_when_it_answers_again(conn, rig):
    """Day D: two captures, one paid out on D+2, one the gateway keeps back. The worker's
    fetches on D+2, D+3 and D+4 fail (Razorpay answers 503); on D+5 it reads from the day
    after the last one read whole (D): the payout of D+2 is recorded, the paid capture never
    flagged, and the one kept back flagged once its cycle and margin lie on days read."""
    from payhooks.service.worker import SETTLEMENT_DAYS

    day = date(2026, 1, 5)
    paid_one, held = paid(conn, rig.api, Provider.RAZORPAY), paid(conn, rig.api, Provider.RAZORPAY)
    conn.execute(
        "UPDATE payhooks_payments SET applied_at = %s", (datetime(2026, 1, 5, 6, tzinfo=UTC),)
    )
    rig.api.pay_out(Provider.RAZORPAY, at=PAID_AT + 2 * 86_400, held={held.payment_id})
    clock = Clock(datetime(2026, 1, 6, 6, tzinfo=UTC))  # D+1, noon in India
    worker = fetching_worker(rig, clock, every=0.0)
    try:
        worker.maybe_fetch_settlements()
        assert read_through(conn)["razorpay"] == day  # D+1 is not over: read again
        for _ in range(3):  # D+2, D+3, D+4: the gateway is down
            clock.now += timedelta(days=1)
            rig.api.fail_next(Provider.RAZORPAY, Fault(status=503))
            assert worker.maybe_fetch_settlements() == 0
            assert read_through(conn)["razorpay"] == day
        for _ in range(3):  # D+5, D+6, D+7
            clock.now += timedelta(days=1)
            worker.maybe_fetch_settlements()
            today = clock.now.astimezone(INDIA).date()
            assert read_through(conn)["razorpay"] == today - timedelta(days=1)
    finally:
        worker.close()
    assert today - timedelta(days=SETTLEMENT_DAYS - 1) > day + timedelta(days=2)
    (entry,) = listing.of_payments(conn, "razorpay", [paid_one.payment_id])
    assert entry.state == "settled"
    assert [u.payment_id for u in listing.unsettled(conn)] == [held.payment_id]


def test_a_gap_longer_than_one_range_is_fetched_in_successive_ranges(conn, rig):
    first = paid(conn, rig.api, Provider.RAZORPAY)
    rig.api.pay_out(Provider.RAZORPAY, at=PAID_AT)  # 2026-01-05
    second = paid(conn, rig.api, Provider.RAZORPAY)
    rig.api.pay_out(Provider.RAZORPAY, at=PAID_AT + 40 * 86_400)  # 2026-02-14
    clock = Clock(datetime(2026, 1, 2, 6, tzinfo=UTC))
    worker = fetching_worker(rig, clock, every=0.0)
    try:
        worker.maybe_fetch_settlements()
        assert read_through(conn)["razorpay"] == date(2026, 1, 1)
        clock.now = datetime(2026, 2, 20, 6, tzinfo=UTC)  # the worker down seven weeks
        assert worker.maybe_fetch_settlements() == 2
    finally:
        worker.close()
    assert read_through(conn)["razorpay"] == date(2026, 2, 19)
    found = listing.of_payments(conn, "razorpay", [first.payment_id, second.payment_id])
    assert len(found) == 2 and all(e.state == "settled" for e in found)


def test_the_ranges_of_a_long_gap_are_at_most_the_longest_a_report_allows():
    from payhooks.reconcile.settling import fetch_ranges

    ranges = fetch_ranges(date(2026, 1, 1), date(2026, 3, 5))
    assert ranges[0][0] == date(2026, 1, 1) and ranges[-1][1] == date(2026, 3, 5)
    assert all((last - first).days + 1 <= MAX_RANGE_DAYS for first, last in ranges)
    assert all(b[0] == a[1] + timedelta(days=1) for a, b in pairwise(ranges))
    assert fetch_ranges(DAY, DAY) == [(DAY, DAY)]


def test_a_fetch_that_leaves_days_unread_keeps_the_last_day_read_whole_and_says_so(
    conn, database_url, gateway_api
):
    _, url = gateway_api
    found = credentials(url)
    fetch_once(connecting(database_url), found, DAY, DAY, now=lambda: LATER)
    assert read_through(conn)["razorpay"] == DAY
    gap = fetch_once(connecting(database_url), found, DAY + timedelta(days=3),
                     DAY + timedelta(days=3), now=lambda: LATER)  # fmt: skip
    assert read_through(conn)["razorpay"] == DAY
    assert "read whole through 2026-01-05 only" in gap.summary()
    assert "until the days from 2026-01-06 are fetched" in gap.summary()
    fetch_once(connecting(database_url), found, NEXT, DAY + timedelta(days=3), now=lambda: LATER)
    assert read_through(conn)["razorpay"] == DAY + timedelta(days=3)
    fetch_once(connecting(database_url), found, DAY, DAY, now=lambda: LATER)  # never back
    assert read_through(conn)["razorpay"] == DAY + timedelta(days=3)


def test_the_day_not_over_is_read_but_not_counted_read_whole(conn, database_url, gateway_api):
    _, url = gateway_api
    noon = datetime(2026, 1, 6, 6, tzinfo=UTC)  # 2026-01-06, 11:30 in India
    fetch_once(connecting(database_url), credentials(url), DAY, NEXT, now=lambda: noon)
    assert read_through(conn)["razorpay"] == DAY


def test_a_capture_whose_cycle_ends_after_the_days_read_is_not_flagged(
    conn, database_url, gateway_api
):
    """The report of the capture's day alone says nothing of the payout days after it."""
    api, url = gateway_api
    held = paid(conn, api, Provider.RAZORPAY)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (CAPTURED,))
    found = credentials(url)
    first = fetch_once(connecting(database_url), found, CYCLE[0], CYCLE[0], now=lambda: LATER)
    assert first.review is not None and first.review.flagged == 0
    rest = fetch_once(connecting(database_url), found, CYCLE[0], CYCLE[1], now=lambda: LATER)
    assert rest.review is not None and rest.review.flagged == 1
    assert [u.payment_id for u in listing.unsettled(conn)] == [held.payment_id]


# --- the days before the first one read --------------------------------------------------------


def test_a_first_fetch_flags_no_capture_from_before_the_days_it_read(
    conn, database_url, gateway_api
):
    """A merchant's first fetch over a few recent days: a capture of an earlier day may have
    its payout on a day never read, so it is not flagged. A fetch of days apart from those
    read changes nothing; one that meets them reads the days back, and the capture the
    gateway kept back is flagged then."""
    api, url = gateway_api
    settled, held = paid(conn, api, Provider.RAZORPAY), paid(conn, api, Provider.RAZORPAY)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (CAPTURED,))
    api.pay_out(Provider.RAZORPAY, at=PAID_AT, held={held.payment_id})  # 2026-01-05
    found = credentials(url)
    late = fetch_once(connecting(database_url), found, date(2026, 1, 15), date(2026, 1, 19),
                      now=lambda: LATER)  # fmt: skip
    assert late.review is not None and late.review.flagged == 0
    assert listing.unsettled(conn) == []
    assert days_read(conn)["razorpay"] == (date(2026, 1, 15), date(2026, 1, 19))
    apart = fetch_once(connecting(database_url), found, date(2026, 1, 1), date(2026, 1, 13),
                       now=lambda: LATER)  # fmt: skip  # 2026-01-14 left unread between
    assert apart.review is not None and apart.review.flagged == 0
    assert days_read(conn)["razorpay"] == (date(2026, 1, 15), date(2026, 1, 19))
    met = fetch_once(connecting(database_url), found, CYCLE[0], date(2026, 1, 14),
                     now=lambda: LATER)  # fmt: skip
    assert met.review is not None and met.review.flagged == 1
    assert days_read(conn)["razorpay"] == (CYCLE[0], date(2026, 1, 19))
    assert [u.payment_id for u in listing.unsettled(conn)] == [held.payment_id]
    (entry,) = listing.of_payments(conn, "razorpay", [settled.payment_id])
    assert entry.state == "settled"


def test_a_first_fetch_of_today_alone_flags_nothing(conn, database_url, gateway_api):
    """Today is not over, so no day was read whole: nothing says what was paid out."""
    api, url = gateway_api
    paid(conn, api, Provider.RAZORPAY)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (CAPTURED,))
    noon = datetime(2026, 1, 20, 6, tzinfo=UTC)
    tally = fetch_once(connecting(database_url), credentials(url), date(2026, 1, 20),
                       date(2026, 1, 20), now=lambda: noon)  # fmt: skip
    assert tally.review is not None and tally.review.flagged == 0
    assert listing.unsettled(conn) == []


def test_the_workers_first_fetch_of_a_gateway_reads_back_over_the_review_window(conn, rig):
    """No day read yet (the worker's first fetch after an upgrade, or a gateway's API
    credentials newly given): the worker reads back as far as the review looks (45 days, the
    gateway's cycle and the margin), so a capture of three weeks ago paid out since is found
    settled, not flagged, and the one the gateway kept back is flagged."""
    from payhooks.settlements.flags import REVIEW_DAYS

    settled, held = paid(conn, rig.api, Provider.RAZORPAY), paid(conn, rig.api, Provider.RAZORPAY)
    captured = datetime(2026, 2, 9, 6, tzinfo=UTC)
    conn.execute("UPDATE payhooks_payments SET applied_at = %s", (captured,))
    rig.api.pay_out(Provider.RAZORPAY, at=int((captured + timedelta(days=2)).timestamp()),
                    held={held.payment_id})  # fmt: skip
    clock = Clock(datetime(2026, 3, 1, 6, tzinfo=UTC))  # 2026-03-01 in India
    worker = fetching_worker(rig, clock)
    try:
        assert worker.maybe_fetch_settlements() == 1
    finally:
        worker.close()
    back = date(2026, 3, 1) - timedelta(days=REVIEW_DAYS + 4 + 2)  # Razorpay's cycle, 48 hours
    assert days_read(conn)["razorpay"] == (back, date(2026, 2, 28))
    (entry,) = listing.of_payments(conn, "razorpay", [settled.payment_id])
    assert entry.state == "settled"
    assert [u.payment_id for u in listing.unsettled(conn)] == [held.payment_id]


def test_the_command_catches_up_each_gateway_from_the_day_after_its_last_day_read_whole(
    conn, database_url, gateway_api, tmp_path
):
    """``--catch-up``: a gateway read whole through 40 days ago is read from the day after (in
    ranges of at most 31 days, from the earliest day a gateway needs: Cashfree, never read, is
    read back as the worker's first fetch reads it), up to today. Run again, it reads the last
    days only."""
    from payhooks.settlements import reads
    from tests.invoking import payhooks_command

    api, url = gateway_api
    today = datetime.now(INDIA).date()
    last = today - timedelta(days=40)
    reads.moved(conn, Provider.RAZORPAY, last, last, today=today)
    first = paid(conn, api, Provider.RAZORPAY)
    api.pay_out(Provider.RAZORPAY, at=int((datetime.now(UTC) - timedelta(days=35)).timestamp()))
    second = paid(conn, api, Provider.RAZORPAY)
    api.pay_out(Provider.RAZORPAY, at=int((datetime.now(UTC) - timedelta(days=5)).timestamp()))
    env = API_KEYS.env(url)
    done = payhooks_command(database_url, tmp_path, "settlements", "--catch-up", **env)
    assert done.exit_code == 0, done.output
    back = today - timedelta(days=51)  # 45 days, Cashfree's cycle of four and the 48 hours
    after = back + timedelta(days=MAX_RANGE_DAYS)
    assert done.stdout.startswith(f"settlements {back} to {after - timedelta(days=1)}:")
    assert f"settlements {after} to {today}:" in done.stdout
    found = listing.of_payments(conn, "razorpay", [first.payment_id, second.payment_id])
    assert len(found) == 2 and all(e.state == "settled" for e in found)
    yesterday = today - timedelta(days=1)
    assert days_read(conn) == {"razorpay": (back, yesterday), "cashfree": (back, yesterday)}
    again = payhooks_command(database_url, tmp_path, "settlements", "--catch-up", **env)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"settlements {today - timedelta(days=2)} to {today}:")


def test_a_failure_told_over_several_lines_is_kept_on_one():
    """A database's error spans lines (its DETAIL, its HINT): the summary, the log and the
    console's action log keep each gateway's part on its own line."""
    tally = settling.Tally(start=DAY, end=NEXT)
    tally.failed(
        Provider.RAZORPAY, 'UniqueViolation: duplicate key "t_pkey"\nDETAIL:  Key (id)=(1)'
    )
    assert tally.failures[Provider.RAZORPAY] == (
        'UniqueViolation: duplicate key "t_pkey" DETAIL: Key (id)=(1)'
    )
    assert [line for line in tally.summary().splitlines() if "DETAIL" in line] == [
        line for line in tally.summary().splitlines() if "razorpay" in line
    ]

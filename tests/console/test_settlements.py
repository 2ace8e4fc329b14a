"""The console's Settlements over real HTTP and PostgreSQL: the payouts of a range with their
totals and whether their lines add up, the captures flagged unsettled and the lines naming no
known payment, one payout's lines, the CSV of every line (guarded against formulas), a
payment's settlement on its timeline (the core's order page and the shop's cart), and the
Fetch button against the gateways' doubles over a loopback socket: recorded in the action log,
refused to a read-only operator, absent where no API credentials are set."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.gateways._settlements import Line, LineKind, Settlement, SettlementState
from payhooks.operations import operators
from payhooks.service.web import create_app
from payhooks.settlements import flags, records
from tests.conftest import serving_app
from tests.console.conftest import OPERATOR, PASSWORD, Console, csrf_of, said
from tests.console.test_console_lists import listed, shown
from tests.factories import deliver, purchase
from tests.reconcile.conftest import settings_for, sim

NOW = datetime.now(UTC)


def line(payment_id: str | None, entry_id: str, net: int, *, sid: str = "setl_P1",
         kind: LineKind = LineKind.PAYMENT) -> Line:  # fmt: skip
    return Line(provider=Provider.RAZORPAY, settlement_id=sid, entry_id=entry_id, kind=kind,
                entry_type=kind.value, payment_id=payment_id, gateway_order_id=None,
                amount_paise=abs(net) + 20, fee_paise=20, tax_paise=4, net_paise=net)  # fmt: skip


def payout(amount: int, sid: str = "setl_P1") -> Settlement:
    return Settlement(provider=Provider.RAZORPAY, settlement_id=sid, state=SettlementState.SETTLED,
                      status="processed", amount_paise=amount, fees_paise=40, tax_paise=8,
                      utr="UTRP1", settled_at=NOW - timedelta(hours=3))  # fmt: skip


@pytest.fixture
def paid(conn):
    """A capture the shop applied, paid out in a payout with a line naming no known payment
    and one that does not add up."""
    buy = purchase(conn)
    deliver(conn, buy.captured())
    records.record(conn, [payout(buy.amount_paise - 24 + 500)], [
        line(buy.payment_id, buy.payment_id, buy.amount_paise - 24),
        line("pay_stranger", "pay_stranger", 400),
    ])  # fmt: skip
    return buy


def test_the_page_lists_each_payout_with_its_totals_and_the_flags(console, conn, paid):
    late = purchase(conn)
    deliver(conn, late.captured())
    conn.execute(
        "UPDATE payhooks_payments SET applied_at = now() - interval '10 days'"
        " WHERE payment_id = %s",
        (late.payment_id,),
    )
    flags.review(conn, NOW)
    page = shown(console, "/console/settlements")
    (row,) = listed(page, "settlements")
    assert "setl_P1" in row and "UTRP1" in row and "not what was paid out" in row
    assert "1 unknown" in row
    assert "not adding up" in page and "lines name a payment" not in page
    (flagged,) = listed(page, "unsettled")
    assert late.payment_id in flagged and late.reference in flagged
    (stray,) = listed(page, "unmatched")
    assert "pay_stranger" in stray
    assert "This console does not fetch reports" in page  # no API credentials set
    home = shown(console, "/console/")
    assert "1 capture not settled in time" in home
    assert "1 settlement line naming no known payment" in home


def test_the_page_and_home_show_a_report_line_payhooks_could_not_read(console, conn, paid):
    import json

    from payhooks.gateways.razorpay import settlements

    item = {"entity_id": "adj_<b>Neg", "type": "adjustment", "amount": -2450, "settled": True,
            "settlement_id": "setl_P1", "credit": 0, "debit": 2450}  # fmt: skip
    body = {"entity": "collection", "count": 1, "items": [item]}
    records.record(conn, [], [], settlements.recon(json.dumps(body).encode()).unreadable)
    page = shown(console, "/console/settlements")
    (kept,) = listed(page, "unreadable")
    assert "setl_P1" in kept and "amount is negative: -2450" in kept
    assert "adj_&lt;b&gt;Neg" in page and "adj_<b>Neg" not in page  # the gateway's text, escaped
    assert "1 settlement line payhooks cannot read" in shown(console, "/console/")


def test_a_gateway_filter_and_a_range_leave_out_other_payouts(console, conn, paid):
    assert listed(shown(console, "/console/settlements", gateway="cashfree"), "settlements")[0]
    assert (
        "No payout in this range"
        in listed(shown(console, "/console/settlements", gateway="cashfree"), "settlements")[0]
    )
    old = (NOW - timedelta(days=60)).strftime("%Y-%m-%dT%H:%M")
    before = (NOW - timedelta(days=40)).strftime("%Y-%m-%dT%H:%M")
    answer = shown(console, "/console/settlements", **{"from": old, "to": before})
    assert "No payout in this range" in listed(answer, "settlements")[0]


def test_a_payouts_page_lists_its_lines(console, paid):
    page = shown(console, "/console/settlements/razorpay/setl_P1")
    rows = listed(page, "lines")
    assert len(rows) == 2
    # What the gateway paid out, and that its lines do not add up to it, as the list says.
    paid_out = paid.amount_paise - 24 + 500
    assert f"₹{paid_out // 100}.{paid_out % 100:02d}" in page
    assert "not what was paid out" in page
    assert any("not a payment payhooks applied" in r for r in rows)
    assert any(paid.reference in r for r in rows)  # matched: its order from the payment


def test_a_payouts_page_adds_up_every_line_not_only_those_it_lists(console, conn, monkeypatch):
    """A payout of more lines than the page lists: it added up the lines listed, beside the
    gateway's amount, which every line adds up to; it says how many it shows."""
    from payhooks.settlements import listing

    lines = [line(f"pay_{n}", f"pay_{n}", 100) for n in range(4)]
    records.record(conn, [payout(400)], lines)
    bounded = listing.lines
    monkeypatch.setattr(
        listing, "lines", lambda conn, p, s, limit=3: bounded(conn, p, s, limit=limit)
    )
    page = shown(console, "/console/settlements/razorpay/setl_P1")
    assert len(listed(page, "lines")) == 3
    assert "₹4.00" in page and "not what was paid out" not in page
    assert "the first 3 of 4" in page


def test_the_csv_holds_every_line_of_the_range_guarded_against_formulas(console, conn, paid):
    records.record(conn, [], [line(None, "=HYPERLINK(1)", -100, kind=LineKind.ADJUSTMENT)])
    answer = console.logged_in().get("/console/settlements.csv")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/csv")
    found = list(csv.DictReader(io.StringIO(answer.text.removeprefix("\ufeff"))))
    assert {r["entry_id"] for r in found} == {paid.payment_id, "pay_stranger", "'=HYPERLINK(1)"}
    mine = next(r for r in found if r["entry_id"] == paid.payment_id)
    assert mine["payment_known"] == "yes" and mine["utr"] == "UTRP1"
    assert int(mine["net_paise"]) == paid.amount_paise - 24
    assert (
        mine["net_rupees"]
        == f"{(paid.amount_paise - 24) // 100}.{(paid.amount_paise - 24) % 100:02d}"
    )
    # A debit is a number a spreadsheet adds up, not text guarded as a formula would be.
    debit = next(r for r in found if r["entry_id"] == "'=HYPERLINK(1)")
    assert (debit["net_rupees"], debit["net_paise"]) == ("-1.00", "-100")


def test_an_orders_timeline_shows_the_payout_that_settled_it(console, paid):
    page = shown(console, f"/console/orders/razorpay/{paid.reference}")
    (settled,) = listed(page, "settled")
    assert "setl_P1" in settled and "UTRP1" in settled and paid.payment_id in settled


def test_the_shops_cart_shows_its_settlement_too(console, paid):
    page = shown(console, f"/console/carts/{paid.cart_id}")
    (settled,) = listed(page, "settled")
    assert "setl_P1" in settled


# --- the Fetch button ------------------------------------------------------------------------


@pytest.fixture
def fetching(database_url, gateway_api) -> Iterator[tuple[Console, object]]:
    """The service's console with the gateways' API credentials, asking the doubles."""
    api, url = gateway_api
    with psycopg.connect(database_url, autocommit=True) as conn:
        operators.add_operator(conn, OPERATOR, PASSWORD)
        operators.add_operator(conn, "ravi", PASSWORD, read_only=True)
    app = create_app(settings_for(url), api_token="api-token", url=database_url)
    with serving_app(app) as base_url:
        yield Console(base_url=base_url, database_url=database_url, app=app), api


def fetch(client, start: str, end: str):
    page = client.get("/console/settlements").text
    form = {"csrf": csrf_of(page), "start": start, "end": end}
    return client.post("/console/settlements/fetch", data=form)


def test_the_fetch_button_records_the_payouts_and_the_action(fetching, conn):
    console, api = fetching
    buy = purchase(conn)
    api.pay(sim(buy), buy.payment_id)
    deliver(conn, buy.captured())
    yesterday = (NOW - timedelta(days=1)).date()
    api.pay_out(
        Provider.RAZORPAY,
        at=int(datetime.combine(yesterday, datetime.min.time(), UTC).timestamp()) + 9 * 3600,
    )
    client = console.logged_in()
    answer = fetch(client, yesterday.isoformat(), yesterday.isoformat())
    assert answer.status_code == 303 and said(answer).endswith("notice=fetched")
    page = client.get(answer.headers["location"]).text
    assert page.count("Fetched:") == 1 and page.count('role="status"') == 1  # said once
    (row,) = listed(page, "settlements")
    assert "1 payment" in row
    (action, result) = conn.execute(
        "SELECT action, result FROM payhooks_console_actions"
    ).fetchone()
    assert action == "fetch_settlements" and "razorpay: 1 new payout(s)" in result


def test_a_gateway_failing_is_told_and_a_bad_range_refused(fetching):
    from payhooks.sim.gateway_api import Fault

    console, api = fetching
    api.fail_next(Provider.CASHFREE, Fault(status=500))
    client = console.logged_in()
    day = (NOW - timedelta(days=1)).date().isoformat()
    failed = fetch(client, day, day)
    assert said(failed).endswith("notice=fetch_failed")
    with psycopg.connect(console.database_url) as conn:
        (result,) = conn.execute(
            "SELECT result FROM payhooks_console_actions WHERE action = 'fetch_settlements'"
        ).fetchone()
    parts = result.split(" | ")  # each gateway's part its own, the failure within cashfree's
    heading = f"settlements {day} to {day}: "
    assert parts[0].startswith(heading + "cashfree: ") and parts[1].startswith("razorpay: ")
    assert "FAILED: answered 500" in parts[0], result
    assert not any("FAILED" in part for part in parts[1:]), result
    assert parts[2].startswith("no settlement report payhooks reads:"), result
    assert " | razorpay: 0 new payout(s)" in client.get("/console/actions").text
    refused = fetch(client, "2026-01-05", "2025-01-05")
    assert said(refused).endswith("notice=no_fetch")
    for first, last in (("0001-01-01", "0001-01-02"), ("1969-12-31", "1970-01-01")):
        assert said(fetch(client, first, last)).endswith("notice=no_fetch")  # no call made


def test_a_read_only_operator_sees_no_fetch_and_is_refused_one(fetching):
    console, _ = fetching
    client = console.logged_in("ravi")
    page = client.get("/console/settlements").text
    assert 'action="/console/settlements/fetch"' not in page
    day = (NOW - timedelta(days=1)).date().isoformat()
    form = {"csrf": csrf_of(page), "start": day, "end": day}  # its own session's token
    refused = client.post("/console/settlements/fetch", data=form)
    assert refused.status_code == 403 and "read-only" in refused.text

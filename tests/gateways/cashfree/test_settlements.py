"""Cashfree's settlements: bodies in its documented shapes read (the ``SETTLEMENT_SUCCESS``
webhook, the Settlement Reconciliation answer), what is refused, and the report client against
the double over a loopback socket: every page by its cursor, a cursor answered twice an error,
an error never read as an answer."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._settlements import LineKind, SettlementState
from payhooks.gateways._status import CredentialsRefused, http_client
from payhooks.gateways.cashfree import settlements
from payhooks.gateways.cashfree.adapter import Cashfree
from payhooks.gateways.cashfree.status import RECON_LIMIT, CashfreeClient
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload
from payhooks.reconcile import settling
from payhooks.reconcile.running import connecting
from payhooks.settlements import listing
from payhooks.sim.deliveries import Purchase
from payhooks.sim.gateway_api import Fault, GatewayApi
from payhooks.sim.gateways.base import numeric_payment_id
from tests.factories import GATEWAY

DATA = Path(__file__).resolve().parents[2] / "data" / "cashfree"
SECRET = GATEWAY.keys.cashfree
IST = timezone(timedelta(hours=5, minutes=30))


def sample(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_the_settlement_success_sample_reads_as_a_settled_payout():
    found = settlements.webhook(sample("settlement_success_2023-08-01.json"))
    assert (found.settlement_id, found.state, found.status) == (
        "41927",
        SettlementState.SETTLED,
        "SUCCESS",
    )
    assert (found.amount_paise, found.fees_paise, found.tax_paise) == (244778, 4425, 797)
    assert found.utr == "1732075866437508"  # a JSON number, as in Cashfree's sample
    assert found.settled_at == datetime(2024, 11, 20, 9, 41, 8, tzinfo=IST)


@pytest.mark.parametrize(
    ("kind", "state"),
    [
        ("SETTLEMENT_INITIATED", SettlementState.PENDING),
        ("SETTLEMENT_FAILED", SettlementState.FAILED),
        ("SETTLEMENT_REVERSED", SettlementState.REVERSED),
    ],
)
def test_each_settlement_webhook_says_its_state(kind, state):
    doc = json.loads(sample("settlement_success_2023-08-01.json"))
    doc["type"] = kind
    found = settlements.webhook(json.dumps(doc).encode())
    assert found.state is state


def test_the_settlement_webhook_is_a_settlement_event_keyed_on_its_type_and_payout():
    event = Cashfree(secrets=(SECRET,)).parse(sample("settlement_success_2023-08-01.json"), {})
    assert event.kind is EventKind.SETTLEMENT
    assert event.event_id == "SETTLEMENT_SUCCESS:41927"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda s: s.pop("amount_settled"), "amount_settled is missing"),
        (lambda s: s.update(amount_settled="2447.78"), "not a JSON number"),
        (lambda s: s.update(amount_settled=2447.785), "has a fraction of a paisa: 2447.785"),
        (lambda s: s.pop("settlement_id"), "settlement_id is missing"),
    ],
)
def test_a_settlement_webhook_payhooks_cannot_record_is_malformed(change, why):
    doc = json.loads(sample("settlement_success_2023-08-01.json"))
    change(doc["data"]["settlement"])
    with pytest.raises(MalformedPayload, match=why):
        Cashfree(secrets=(SECRET,)).parse(json.dumps(doc).encode(), {})


def test_the_recon_sample_reads_its_item_as_not_settled_yet():
    """The item, in the shape of Cashfree's sample as far as it is published, names no
    settlement."""
    page = settlements.recon(sample("settlement_recon_2025-01-01.json"))
    assert page.lines == () and page.unsettled == 1 and page.cursor == "ph-recon-next-7Qm2"


def settled_sample() -> bytes:
    """That item, paid out: its settlement and payment named here."""
    doc = json.loads(sample("settlement_recon_2025-01-01.json"))
    item = doc["data"][0]
    item["settlement_details"] |= {"cf_settlement_id": "6031874", "utr": "N034525020477",
                                   "settlement_date": "2025-02-04T11:00:00+05:30"}  # fmt: skip
    item["payment_details"]["cf_payment_id"] = "4890317265104"
    return json.dumps(doc).encode()


def test_a_settled_recon_item_reads_with_cashfrees_own_figures():
    (line,) = settlements.recon(settled_sample()).lines
    assert (line.kind, line.entry_id, line.entry_type) == (LineKind.PAYMENT, "81267", "PAYMENT")
    assert (line.settlement_id, line.utr, line.payment_id) == (
        "6031874",
        "N034525020477",
        "4890317265104",
    )
    assert line.gateway_order_id == "order_4081936KfT7uQm2ZcW9pLx3RbN8vYd5Hs"
    # As in Cashfree's sample, a settlement amount equal to the event's, its charge beside:
    # recorded as stated, never computed.
    assert (line.amount_paise, line.fee_paise, line.tax_paise, line.net_paise) == (
        45000,
        900,
        0,
        45000,
    )
    assert line.occurred_at == datetime(2025, 2, 3, 10, 27, 18, tzinfo=IST)


def test_a_debit_takes_from_the_payout():
    doc = json.loads(settled_sample())
    doc["data"][0]["event_details"] |= {"event_type": "REFUND", "sale_type": "DEBIT"}
    (line,) = settlements.recon(json.dumps(doc).encode()).lines
    assert (line.kind, line.net_paise) == (LineKind.REFUND, -45000)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda e: e.update(event_amount="450.00"), "event_amount is not a JSON number"),
        (lambda e: e.update(sale_type="BOTH"), "neither CREDIT nor DEBIT"),
        (lambda e: e.pop("event_settlement_amount"), "event_settlement_amount is missing"),
        (lambda e: e.update(event_currency="USD"), "a line in USD"),
    ],
    ids=[
        "an amount as a string",
        "a sale type it does not document",
        "no settlement amount",
        "another currency",
    ],
)
def test_an_unreadable_recon_item_is_kept_with_why_and_the_others_still_read(change, why):
    doc = json.loads(settled_sample())
    good = json.loads(json.dumps(doc["data"][0]))
    good["event_details"]["event_id"] = "81268"
    change(doc["data"][0]["event_details"])
    doc["data"].append(good)
    page = settlements.recon(json.dumps(doc).encode())
    assert [line.entry_id for line in page.lines] == ["81268"]
    (kept,) = page.unreadable
    assert why in kept.reason
    assert (kept.settlement_id, kept.entry_id, kept.payment_id) == (
        "6031874",
        "81267",
        "4890317265104",
    )
    assert json.loads(kept.raw)["event_details"]["event_id"] == "81267"
    assert page.cursor == "ph-recon-next-7Qm2"  # the next page is still read


def test_an_error_entry_among_the_items_is_kept_unreadable_never_counted_unsettled():
    """An error object inside ``data`` (no event, no settlement) was counted "not settled
    yet", and the day recorded as read whole, with no trace of it (gateway API check)."""
    doc = json.loads(settled_sample())
    error = {"message": "internal error", "code": "internal_error", "type": "api_error"}
    doc["data"].append(error)
    page = settlements.recon(json.dumps(doc).encode())
    assert [line.entry_id for line in page.lines] == ["81267"] and page.unsettled == 0
    (kept,) = page.unreadable
    assert "event_details.event_id is missing" in kept.reason and json.loads(kept.raw) == error


@pytest.mark.parametrize(
    "body",
    [
        {
            "message": "authentication Failed",
            "code": "request_failed",
            "type": "authentication_error",
        },
        {"cursor": None, "limit": 10},
        {"cursor": 7, "data": []},
    ],
    ids=["an error body", "no data", "a cursor that is not a string"],
)
def test_a_recon_answer_not_in_the_documented_shape_is_never_an_empty_report(body):
    with pytest.raises(MalformedPayload):
        settlements.recon(json.dumps(body).encode())


# --- the report client against the double ------------------------------------------------------

DAY = date(2026, 1, 5)
NOW = datetime(2026, 1, 6, 6, 0, tzinfo=UTC)
PAID_AT = int(datetime(2026, 1, 5, 6, 0, tzinfo=UTC).timestamp())


def client(url: str, http, keys) -> CashfreeClient:
    found = ApiCredentials(
        provider=Provider.CASHFREE, id=keys.cashfree_client_id, secret=keys.cashfree_api_secret,
        base_url=url,
    )  # fmt: skip
    return CashfreeClient(credentials=found, http=http)


def paid(api: GatewayApi, n: int) -> list[str]:
    ids = []
    for k in range(n):
        purchase = Purchase(provider=Provider.CASHFREE, cart_id=f"c{k}", reference=f"ph{k}",
                            amount_paise=10_000 + k, items={"TEA": 1})  # fmt: skip
        payment_id = numeric_payment_id()
        api.pay(purchase, payment_id)
        ids.append(payment_id)
    return ids


def test_every_page_is_read_by_its_cursor(gateway_api):
    api, url = gateway_api
    ids = paid(api, RECON_LIMIT + 5)  # more than one page
    payout = api.pay_out(Provider.CASHFREE, at=PAID_AT)
    assert payout is not None
    with http_client(5.0) as http:
        pages = list(client(url, http, api.keys).settlement_pages(DAY, DAY))
    assert len(pages) == 2 and pages[-1].cursor is None
    lines = [line for page in pages for line in page.lines]
    assert sorted(line.payment_id for line in lines) == sorted(ids)
    assert sum(line.net_paise for line in lines) == payout.amount_paise


def test_the_range_is_indias_days(gateway_api):
    api, url = gateway_api
    paid(api, 1)
    # 20:00 UTC on the 4th is 01:30 on the 5th in India: the 5th's payout.
    api.pay_out(Provider.CASHFREE, at=int(datetime(2026, 1, 4, 20, 0, tzinfo=UTC).timestamp()))
    with http_client(5.0) as http:
        fifth = list(client(url, http, api.keys).settlement_pages(DAY, DAY))
        fourth = list(
            client(url, http, api.keys).settlement_pages(date(2026, 1, 4), date(2026, 1, 4))
        )
    assert len(fifth[0].lines) == 1 and fourth[0].lines == ()


def test_a_cursor_answered_twice_is_an_error_never_a_loop(gateway_api):
    api, url = gateway_api
    page = json.dumps(
        {"cursor": "c1", "limit": 1, "data": [json.loads(settled_sample())["data"][0]]}
    )
    api.fail_next(Provider.CASHFREE, Fault(body=page.encode()), Fault(body=page.encode()))
    with http_client(5.0) as http, pytest.raises(GatewayApiError, match="cursor twice"):
        list(client(url, http, api.keys).settlement_pages(DAY, DAY))


def test_a_page_with_an_unreadable_item_is_recorded_and_the_next_page_still_read(gateway_api):
    api, url = gateway_api
    paid(api, 3)
    payout = api.pay_out(Provider.CASHFREE, at=PAID_AT)
    assert payout is not None
    bad = json.loads(settled_sample())["data"][0]  # the first entry, its amount not rupees
    bad["settlement_details"]["cf_settlement_id"] = payout.settlement_id
    bad["payment_details"]["cf_payment_id"] = payout.entries[0].payment_id
    bad["event_details"]["event_amount"] = "not rupees"
    page = {"cursor": base64.b64encode(b"1").decode(), "limit": RECON_LIMIT, "data": [bad]}
    api.fail_next(Provider.CASHFREE, Fault(body=json.dumps(page).encode()))
    with http_client(5.0) as http:
        pages = list(client(url, http, api.keys).settlement_pages(DAY, DAY))
    assert len(pages) == 2 and not any(p.failed for p in pages)
    (kept,) = pages[0].unreadable
    assert kept.payment_id == payout.entries[0].payment_id and "event_amount" in kept.reason
    assert sorted(line.payment_id for line in pages[1].lines) == sorted(
        e.payment_id for e in payout.entries[1:]
    )


MISSING_CHARGES = {
    "no service charge": (lambda e: e.pop("event_service_charge"), "event_service_charge"),
    "a null service charge": (lambda e: e.update(event_service_charge=None),
                              "event_service_charge"),
    "no service tax": (lambda e: e.pop("event_service_tax"), "event_service_tax"),
    "a null service tax": (lambda e: e.update(event_service_tax=None), "event_service_tax"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MISSING_CHARGES))
def test_a_line_missing_its_fee_or_tax_is_kept_unreadable_never_recorded_as_none_charged(
    gateway_api, database_url, case
):
    """A recon item whose ``event_service_charge`` or ``event_service_tax`` is missing or null
    says nothing of what Cashfree charged: fetched, it is kept unreadable saying which, as
    Razorpay's line with no ``fee`` is, never recorded as a line charged 0 paise. An item
    charging 0 (``0``, ``0.0``) is recorded charged 0."""
    api, url = gateway_api
    change, field = MISSING_CHARGES[case]
    odd = json.loads(settled_sample())["data"][0]
    change(odd["event_details"])
    free = json.loads(settled_sample())["data"][0]
    free["event_details"] |= {"event_id": "81268", "event_service_charge": 0,
                              "event_service_tax": 0.0}  # fmt: skip
    page = {"cursor": None, "limit": RECON_LIMIT, "data": [odd, free]}
    api.fail_next(Provider.CASHFREE, Fault(body=json.dumps(page).encode()))
    found = {Provider.CASHFREE: ApiCredentials(provider=Provider.CASHFREE, base_url=url,
             id=api.keys.cashfree_client_id, secret=api.keys.cashfree_api_secret)}  # fmt: skip
    fetched = settling.fetch_once(connecting(database_url), found, DAY, DAY, now=lambda: NOW)
    assert not fetched.failures, fetched.summary()
    with psycopg.connect(database_url) as conn:
        read = "SELECT entry_id, fee_paise, tax_paise FROM payhooks_settlement_lines ORDER BY 1"
        lines = conn.execute(read).fetchall()
        kept = [(u.entry_id, u.reason) for u in listing.unreadable(conn)]
    assert lines == [("81268", 0, 0)]
    assert kept == [("81267", f"{field} is missing")]


@pytest.mark.parametrize(
    "fault",
    [
        Fault(status=500),
        Fault(status=429, retry_after_s=5),
        Fault(body=b'{"message": "x", "code": "api_error", "type": "api_error"}'),
    ],
    ids=["5xx", "429", "an error body answered 200"],
)
def test_an_api_error_is_an_error_never_an_empty_report(gateway_api, fault):
    api, url = gateway_api
    api.fail_next(Provider.CASHFREE, fault)
    with http_client(5.0) as http, pytest.raises(GatewayApiError):
        list(client(url, http, api.keys).settlement_pages(DAY, DAY))


def test_refused_credentials_are_told_as_such(gateway_api):
    api, url = gateway_api
    keys = api.keys.given({Provider.CASHFREE: ("cf_other", "wrong")})
    with http_client(5.0) as http, pytest.raises(CredentialsRefused):
        list(client(url, http, keys).settlement_pages(DAY, DAY))

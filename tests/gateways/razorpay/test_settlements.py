"""Razorpay's settlements: bodies in its documented shapes read (the recon report's payment,
refund, transfer and adjustment lines, the settlement entity, the ``settlement.processed``
webhook), what is refused, and the report client against the double over a loopback socket:
every page read, each payout's own figures asked for, an error never read as an answer."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._settlements import LineKind, SettlementState
from payhooks.gateways._status import CredentialsRefused, http_client
from payhooks.gateways.razorpay import settlements
from payhooks.gateways.razorpay.adapter import Razorpay
from payhooks.gateways.razorpay.status import RECON_COUNT, RazorpayClient
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload
from payhooks.sim.deliveries import Purchase
from payhooks.sim.gateway_api import Fault, GatewayApi
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.factories import GATEWAY

DATA = Path(__file__).resolve().parents[2] / "data" / "razorpay"
SECRET = GATEWAY.keys.razorpay


def sample(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_the_recon_samples_lines_read_as_razorpay_documents_them():
    page = settlements.recon(sample("settlement_recon_combined.json"))
    payment, refund, transfer, adjustment = page.lines
    assert (payment.kind, payment.entry_id, payment.payment_id) == (
        LineKind.PAYMENT,
        "pay_Pk7RtN2eVx5GhJ",
        "pay_Pk7RtN2eVx5GhJ",
    )  # a payment's own payment_id is null: its entity_id is the payment
    assert (payment.amount_paise, payment.fee_paise, payment.tax_paise, payment.net_paise) == (
        184900,
        4362,
        666,
        180538,
    )
    assert payment.gateway_order_id == "order_Pk7Qw3LmZb8YdS"
    assert payment.settlement_id == "setl_Pm4XcR8vTq2LwE" and payment.utr == "1736224214k3m9qz"
    assert payment.settled_at == datetime.fromtimestamp(1736224214, UTC)
    assert (refund.kind, refund.payment_id, refund.net_paise) == (
        LineKind.REFUND,
        "pay_Ph2WfD6rXa3NvT",
        -57500,
    )
    assert (transfer.kind, transfer.entry_type, transfer.net_paise) == (
        LineKind.ADJUSTMENT,
        "transfer",
        -60177,
    )
    assert (adjustment.kind, adjustment.payment_id, adjustment.net_paise) == (
        LineKind.ADJUSTMENT,
        None,
        2450,
    )
    assert page.unsettled == 0 and page.cursor is None


def test_a_recon_item_not_settled_yet_is_counted_not_recorded():
    doc = json.loads(sample("settlement_recon_combined.json"))
    doc["items"][0] |= {"settled": False, "settlement_id": None}
    page = settlements.recon(json.dumps(doc).encode())
    assert len(page.lines) == 3 and page.unsettled == 1


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda i: i.update(type="adjustment", amount=-2450), "amount is negative: -2450"),
        (lambda i: i.pop("fee"), "fee is missing"),
        (lambda i: i.pop("tax"), "tax is missing"),
        (lambda i: i.update(settled="yes"), "settled is not true or false"),
        # Read as paise, 600 US cents settled the payment of 184,900 paise and added to an
        # INR payout (gateway API check).
        (lambda i: i.update(currency="USD"), "a line in USD"),
    ],
    ids=[
        "a negative adjustment amount",
        "no fee",
        "no tax",
        "settled not a boolean",
        "another currency",
    ],
)
def test_an_unreadable_recon_item_is_kept_with_why_and_the_others_still_read(change, why):
    doc = json.loads(sample("settlement_recon_combined.json"))
    change(doc["items"][0])
    page = settlements.recon(json.dumps(doc).encode())
    assert [line.entry_id for line in page.lines] == [i["entity_id"] for i in doc["items"][1:]]
    (kept,) = page.unreadable
    assert why in kept.reason
    assert (kept.settlement_id, kept.entry_id) == ("setl_Pm4XcR8vTq2LwE", "pay_Pk7RtN2eVx5GhJ")
    assert json.loads(kept.raw) == doc["items"][0]  # the line as Razorpay answered it
    again = settlements.recon(json.dumps(doc).encode()).unreadable[0]
    assert again.digest == kept.digest  # the same line met again is the same line


def test_a_recon_item_that_is_not_an_object_is_kept_too():
    doc = json.loads(sample("settlement_recon_combined.json"))
    doc["items"][1] = "rfnd_Pl9CzB4uHs1KqM"
    page = settlements.recon(json.dumps(doc).encode())
    assert len(page.lines) == 3
    (kept,) = page.unreadable
    assert kept.raw == '"rfnd_Pl9CzB4uHs1KqM"' and kept.entry_id is None


def test_the_settlement_entity_sample_reads_as_a_payout():
    found = settlements.answered(sample("settlement.json"), "setl_Pm4XcR8vTq2LwE")
    assert (found.settlement_id, found.state, found.status) == (
        "setl_Pm4XcR8vTq2LwE",
        SettlementState.SETTLED,
        "processed",
    )
    assert (found.amount_paise, found.fees_paise, found.tax_paise) == (6482519, 305811, 46649)
    assert found.utr == "1736224214k3m9qz"


def test_the_settlement_webhook_is_a_settlement_event_keyed_on_its_payout():
    event = Razorpay(secrets=(SECRET,)).parse(sample("settlement_processed_webhook.json"), {})
    assert event.kind is EventKind.SETTLEMENT
    assert event.event_id == "settlement.processed:setl_Pm4XcR8vTq2LwE"
    assert event.payment_id is None and event.merchant_ref is None
    with_header = Razorpay(secrets=(SECRET,)).parse(
        sample("settlement_processed_webhook.json"), {"x-razorpay-event-id": "evt_1"}
    )
    assert with_header.event_id == "evt_1"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda e: e.pop("amount"), "amount is missing"),
        (
            lambda e: e.update(amount="6482519"),
            'amount must be an integer number of paise, not "6482519"',
        ),
        (lambda e: e.update(amount=-6482519), "amount is negative: -6482519"),
        (lambda e: e.update(amount=2**70), "amount is past what payhooks records"),
        (lambda e: e.update(status="paid"), "not documented"),
        (lambda e: e.pop("id"), "id is missing"),
    ],
)
def test_a_settlement_webhook_payhooks_cannot_record_is_malformed(change, why):
    doc = json.loads(sample("settlement_processed_webhook.json"))
    change(doc["payload"]["settlement"]["entity"])
    with pytest.raises(MalformedPayload, match=why):
        Razorpay(secrets=(SECRET,)).parse(json.dumps(doc).encode(), {})


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"code": "BAD_REQUEST_ERROR", "description": "The api key provided is invalid"}},
        {"entity": "collection", "count": 0},
        {"entity": "settlement", "items": []},
    ],
    ids=["an error body", "no items", "not a collection"],
)
def test_a_recon_answer_not_in_the_documented_shape_is_never_an_empty_report(body):
    with pytest.raises(MalformedPayload):
        settlements.recon(json.dumps(body).encode())


# --- the report client against the double ------------------------------------------------------

DAY = date(2026, 1, 5)
PAID_AT = int(datetime(2026, 1, 5, 6, 0, tzinfo=UTC).timestamp())


def client(url: str, http, keys) -> RazorpayClient:
    found = ApiCredentials(
        provider=Provider.RAZORPAY, id=keys.razorpay_key_id, secret=keys.razorpay_key_secret,
        base_url=url,
    )  # fmt: skip
    return RazorpayClient(credentials=found, http=http)


def paid(api: GatewayApi, n: int) -> list[str]:
    """``n`` payments captured at the double, each for its own order."""
    ids = []
    for k in range(n):
        purchase = Purchase(provider=Provider.RAZORPAY, cart_id=f"c{k}", reference=f"order_{k}",
                            amount_paise=10_000 + k, items={"TEA": 1})  # fmt: skip
        payment_id = razorpay_sim.new_payment_id()
        api.pay(purchase, payment_id)
        ids.append(payment_id)
    return ids


def test_every_page_of_a_day_is_read_and_each_payout_is_asked_for_its_figures(gateway_api):
    api, url = gateway_api
    ids = paid(api, RECON_COUNT + 30)  # a day longer than one page
    payout = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    assert payout is not None
    with http_client(5.0) as http:
        pages = list(client(url, http, api.keys).settlement_pages(DAY, DAY))
    lines = [line for page in pages for line in page.lines]
    assert sorted(line.payment_id for line in lines) == sorted(ids)
    assert sum(line.net_paise for line in lines) == payout.amount_paise
    (stated,) = [s for page in pages for s in page.settlements]
    assert (stated.settlement_id, stated.amount_paise, stated.utr) == (
        payout.settlement_id,
        payout.amount_paise,
        payout.utr,
    )


def test_a_day_with_no_payout_reads_as_no_lines(gateway_api):
    api, url = gateway_api
    paid(api, 2)
    api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    with http_client(5.0) as http:
        pages = list(
            client(url, http, api.keys).settlement_pages(date(2026, 1, 4), date(2026, 1, 4))
        )
    assert [page.lines for page in pages] == [()]


@pytest.mark.parametrize(
    "fault",
    [Fault(status=500), Fault(status=429, retry_after_s=5), Fault(status=503)],
    ids=["5xx", "429", "503"],
)
def test_an_outage_is_an_error_never_an_empty_report_and_stops_the_fetch(gateway_api, fault):
    api, url = gateway_api
    paid(api, 1)
    api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    api.fail_next(Provider.RAZORPAY, fault)
    with http_client(5.0) as http, pytest.raises(GatewayApiError):
        list(client(url, http, api.keys).settlement_pages(DAY, date(2026, 1, 6)))


NEXT = date(2026, 1, 6)


@pytest.mark.parametrize(
    "fault",
    [
        Fault(body=b'{"error": {"code": "SERVER_ERROR"}}'),
        Fault(body=b"<html>maintenance</html>", content_type="text/html"),
        Fault(status=400, body=b'{"error": {"code": "BAD_REQUEST_ERROR", "description": "x"}}'),
    ],
    ids=["an error body answered 200", "a proxy's page", "a 400 about that day"],
)
def test_one_days_page_it_cannot_read_is_told_and_the_next_day_still_read(gateway_api, fault):
    api, url = gateway_api
    paid(api, 1)
    api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    paid(api, 1)
    later = api.pay_out(Provider.RAZORPAY, at=PAID_AT + 86_400)
    assert later is not None
    api.fail_next(Provider.RAZORPAY, fault)
    with http_client(5.0) as http:
        pages = list(client(url, http, api.keys).settlement_pages(DAY, NEXT))
    (failed,) = [page for page in pages if page.failed]
    assert "2026-01-05" in failed.failed and failed.lines == ()
    assert [line.settlement_id for page in pages for line in page.lines] == [later.settlement_id]
    assert [s.settlement_id for page in pages for s in page.settlements] == [later.settlement_id]


def test_one_payout_whose_figures_fail_is_told_and_the_others_still_asked(gateway_api):
    api, url = gateway_api
    paid(api, 1)
    first = api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    paid(api, 1)
    second = api.pay_out(Provider.RAZORPAY, at=PAID_AT + 86_400)
    assert first is not None and second is not None
    unknown = json.dumps(
        {"error": {"code": "BAD_REQUEST_ERROR", "description": "The id provided does not exist"}}
    ).encode()
    # Two days' reports answered as usual, then the first payout's entity refused.
    api.fail_next(Provider.RAZORPAY, Fault(), Fault(), Fault(status=400, body=unknown))
    with http_client(5.0) as http:
        pages = list(client(url, http, api.keys).settlement_pages(DAY, NEXT))
    (failed,) = [page for page in pages if page.failed]
    assert first.settlement_id in failed.failed and "does not exist" in failed.failed
    assert [s.settlement_id for page in pages for s in page.settlements] == [second.settlement_id]
    assert len([line for page in pages for line in page.lines]) == 2


def test_refused_credentials_are_told_as_such(gateway_api):
    api, url = gateway_api
    keys = api.keys.given({Provider.RAZORPAY: ("rzp_test_other", "wrong")})
    with http_client(5.0) as http, pytest.raises(CredentialsRefused):
        list(client(url, http, keys).settlement_pages(DAY, DAY))

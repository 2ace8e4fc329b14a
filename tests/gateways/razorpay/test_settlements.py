"""Razorpay's settlements: its own samples read (the recon report's payment, refund, transfer
and adjustment lines, the settlement entity, the ``settlement.processed`` webhook), what is
refused, and the report client against the double over a loopback socket: every page read,
each payout's own figures asked for, an error never read as an answer."""

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
        "pay_DEXrnipqTmWVGE",
        "pay_DEXrnipqTmWVGE",
    )  # a payment's own payment_id is null: its entity_id is the payment
    assert (payment.amount_paise, payment.fee_paise, payment.tax_paise, payment.net_paise) == (
        100000,
        2900,
        0,
        97100,
    )
    assert payment.gateway_order_id == "order_DEXrnRiR3SNDHA"
    assert payment.settlement_id == "setl_DGlQ1Rj8os78Ec" and payment.utr == "1568176960vxp0rj"
    assert payment.settled_at == datetime.fromtimestamp(1568176960, UTC)
    assert (refund.kind, refund.payment_id, refund.net_paise) == (
        LineKind.REFUND,
        "pay_DEXq1pACSqFxtS",
        -242500,
    )
    assert (transfer.kind, transfer.entry_type, transfer.net_paise) == (
        LineKind.ADJUSTMENT,
        "transfer",
        -100296,
    )
    assert (adjustment.kind, adjustment.payment_id, adjustment.net_paise) == (
        LineKind.ADJUSTMENT,
        None,
        1012,
    )
    assert page.unsettled == 0 and page.cursor is None


def test_a_recon_item_not_settled_yet_is_counted_not_recorded():
    doc = json.loads(sample("settlement_recon_combined.json"))
    doc["items"][0] |= {"settled": False, "settlement_id": None}
    page = settlements.recon(json.dumps(doc).encode())
    assert len(page.lines) == 3 and page.unsettled == 1


def test_the_settlement_entity_sample_reads_as_a_payout():
    found = settlements.answered(sample("settlement.json"))
    assert (found.settlement_id, found.state, found.status) == (
        "setl_DGlQ1Rj8os78Ec",
        SettlementState.SETTLED,
        "processed",
    )
    assert (found.amount_paise, found.fees_paise, found.tax_paise) == (9973635, 471699, 42070)
    assert found.utr == "1568176960vxp0rj"


def test_the_settlement_webhook_is_a_settlement_event_keyed_on_its_payout():
    event = Razorpay(secrets=(SECRET,)).parse(sample("settlement_processed_webhook.json"), {})
    assert event.kind is EventKind.SETTLEMENT
    assert event.event_id == "settlement.processed:setl_DGlQ1Rj8os78Ec"
    assert event.payment_id is None and event.merchant_ref is None
    with_header = Razorpay(secrets=(SECRET,)).parse(
        sample("settlement_processed_webhook.json"), {"x-razorpay-event-id": "evt_1"}
    )
    assert with_header.event_id == "evt_1"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda e: e.pop("amount"), "amount is missing"),
        (lambda e: e.update(amount="9973635"), "amount is not a whole number of paise"),
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
    ("fault", "raised"),
    [
        (Fault(status=500), GatewayApiError),
        (Fault(status=429, retry_after_s=5), GatewayApiError),
        (Fault(body=b'{"error": {"code": "SERVER_ERROR"}}'), GatewayApiError),
        (Fault(body=b"<html>maintenance</html>", content_type="text/html"), GatewayApiError),
    ],
    ids=["5xx", "429", "an error body answered 200", "a proxy's page"],
)
def test_an_api_error_is_an_error_never_an_empty_report(gateway_api, fault, raised):
    api, url = gateway_api
    paid(api, 1)
    api.pay_out(Provider.RAZORPAY, at=PAID_AT)
    api.fail_next(Provider.RAZORPAY, fault)
    with http_client(5.0) as http, pytest.raises(raised):
        list(client(url, http, api.keys).settlement_pages(DAY, DAY))


def test_refused_credentials_are_told_as_such(gateway_api):
    api, url = gateway_api
    keys = api.keys.given({Provider.RAZORPAY: ("rzp_test_other", "wrong")})
    with http_client(5.0) as http, pytest.raises(CredentialsRefused):
        list(client(url, http, keys).settlement_pages(DAY, DAY))

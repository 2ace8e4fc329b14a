"""PhonePe's status client against its double over a loopback socket: the OAuth token fetched
once and kept until shortly before it expires, the order's state read as events, the gateway's
refusals (credentials, rate limits, outages); and, against a mock transport, the refund status
the double does not keep."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from starlette.applications import Starlette

from payhooks.events import EventKind, Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._reports import KEY_PREFIX, one_of
from payhooks.gateways._status import CredentialsRefused, http_client
from payhooks.gateways.phonepe import status
from payhooks.gateways.phonepe.adapter import PhonePe
from payhooks.gateways.phonepe.status import PhonePeClient, Token
from payhooks.plumbing.errors import GatewayApiError
from payhooks.sim import gateway_api
from payhooks.sim.gateway import Gateway
from payhooks.sim.gateway_api import Fault, GatewayApi, serving
from payhooks.sim.gateways import Booked
from payhooks.sim.gateways import phonepe as sim
from payhooks.sim.keys import GatewaySecrets
from tests import loopback

REFERENCE = "ph_0123456789abcdef"
AMOUNT = 24900


class Books(GatewayApi):
    """The double serving PhonePe's routes alone, whether or not the registry lists them."""

    def app(self) -> Starlette:
        return Starlette(routes=sim.routes(self))


@pytest.fixture(autouse=True)
def simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The books find PhonePe's simulator (its scripted faults, its entities) before the
    simulators' registry has its line."""
    found = gateway_api.simulator
    monkeypatch.setattr(
        gateway_api, "simulator", lambda p: sim.SIMULATOR if p is Provider.PHONEPE else found(p)
    )


@dataclass
class Rig:
    books: Books
    url: str
    asked: list[httpx.Request] = field(default_factory=list)
    now: float = field(default_factory=time.time)  # the double's tokens expire by the wall clock

    def client(self, *, client_id: str = sim.CLIENT_ID, secret: str = sim.CLIENT_SECRET):
        credentials = ApiCredentials(
            provider=Provider.PHONEPE, id=client_id, secret=secret, base_url=self.url
        )
        http = http_client(5.0)
        http.event_hooks["request"].append(self.asked.append)
        return PhonePeClient(credentials=credentials, http=http, clock=lambda: self.now)

    def tokens_fetched(self) -> int:
        return sum(r.url.path.endswith("/v1/oauth/token") for r in self.asked)

    def paid(self, payment_id: str, state: str | None = None) -> None:
        order = self.books.open_order(purchase())
        booked = Booked(order=order, payment_id=payment_id, status=state, paid_paise=None,
                        now=self.books.now)  # fmt: skip
        order.payments.append(sim.entity(booked))


def purchase():
    from payhooks.sim.deliveries import Purchase

    return Purchase(provider=Provider.PHONEPE, cart_id="cart_1", reference=REFERENCE,
                    amount_paise=AMOUNT, items={"MUG": 1})  # fmt: skip


@pytest.fixture
def rig() -> Iterator[Rig]:
    books = Books()
    with serving(books) as url:
        yield Rig(books=books, url=url)


# --- the order's state as events ---------------------------------------------------------------


def test_a_completed_order_is_reported_as_its_capture(rig):
    rig.paid("OM1", "FAILED")
    rig.paid("OM2")
    report = rig.client().report(REFERENCE)
    (found,) = report.received
    event = found.event
    assert (event.kind, event.payment_id, event.merchant_ref, event.amount_paise) == (
        EventKind.PAYMENT_CAPTURED, "OM2", REFERENCE, AMOUNT,
    )  # fmt: skip
    assert event.event_id == f"{KEY_PREFIX}:OM2:COMPLETED"
    assert (event.currency, event.bank_ref, event.unconfirmed) == ("INR", sim.bank_reference("OM2"),
                                                                   False)  # fmt: skip
    assert not report.expired


def test_every_attempt_is_asked_for(rig):
    rig.paid("OM1")
    rig.client().report(REFERENCE)
    (order_call,) = [r for r in rig.asked if "/checkout/v2/order/" in r.url.path]
    assert order_call.url.path == f"/pg/checkout/v2/order/{REFERENCE}/status"
    assert order_call.url.params["details"] == "true"
    assert order_call.headers["authorization"].startswith("O-Bearer ")


def test_a_failed_order_is_reported_failed_by_its_latest_attempt_and_final(rig):
    rig.paid("OM1", "FAILED")
    rig.paid("OM2", "FAILED")
    report = rig.client().report(REFERENCE)
    (found,) = report.received
    assert (found.event.kind, found.event.payment_id) == (EventKind.PAYMENT_FAILED, "OM2")
    assert report.expired


def test_an_order_that_failed_before_any_attempt_is_reported_by_its_own_id(rig):
    rig.books.open_order(purchase())
    rig.books.expire(purchase())
    (found,) = rig.client().report(REFERENCE).received
    assert (found.event.kind, found.event.payment_id) == (
        EventKind.PAYMENT_FAILED, sim.order_id(REFERENCE),
    )  # fmt: skip


def test_a_pending_order_reports_nothing_yet(rig):
    rig.paid("OM1", "PENDING")
    report = rig.client().report(REFERENCE)
    assert (report.received, report.expired) == ((), False)
    assert report.skipped == (f"{sim.order_id(REFERENCE)}:PENDING",)


def test_an_order_phonepe_never_heard_of_reports_nothing_and_has_not_expired(rig):
    report = rig.client().report("ph_unknown")
    assert (report.received, report.skipped, report.expired) == ((), (), False)


def test_the_callback_and_the_status_api_name_one_payment(rig):
    """What a confirmation compares: the callback's payment id is the API's."""
    for state, event in (("COMPLETED", "checkout.order.completed"),
                         ("FAILED", "checkout.order.failed")):  # fmt: skip
        books = Books()
        with serving(books) as url:
            here = Rig(books=books, url=url)
            here.paid("OM_first", "FAILED")
            here.paid("OM_last", state)
            sent = sim.delivery(Gateway(GatewaySecrets()), event, merchant_order_id=REFERENCE,
                                amount_paise=AMOUNT, transaction_id="OM_last")  # fmt: skip
            adapter = PhonePe(credentials=sim.SIMULATOR.webhook_secrets(GatewaySecrets()))
            said = adapter.parse(sent.body, sent.headers)
            (reported,) = here.client().report(REFERENCE).received
        assert said.payment_id == reported.event.payment_id == "OM_last"
        assert said.kind is reported.event.kind
        assert (said.merchant_ref, said.amount_paise) == (REFERENCE, AMOUNT)


def test_a_reconciled_order_reads_again_as_it_was_stored(rig):
    rig.paid("OM1")
    (found,) = rig.client().report(REFERENCE).received
    again = one_of(
        status.stored(found.event.event_id, json.loads(found.body)),
        Provider.PHONEPE,
        found.event.event_id,
    )
    assert again.event == found.event and again.body == found.body


# --- the token ------------------------------------------------------------------------------------


def test_the_token_is_fetched_once_and_kept(rig):
    rig.paid("OM1")
    client = rig.client()
    for _ in range(3):
        client.report(REFERENCE)
    assert rig.tokens_fetched() == 1


def test_the_token_is_replaced_shortly_before_it_expires(rig):
    rig.paid("OM1")
    client = rig.client()
    client.report(REFERENCE)
    kept = client.kept.valid(rig.now)
    assert kept is not None
    rig.now = kept.refresh_at - 1
    client.report(REFERENCE)
    assert rig.tokens_fetched() == 1
    rig.now = kept.refresh_at
    client.report(REFERENCE)
    assert rig.tokens_fetched() == 2


def test_a_kept_token_the_gateway_no_longer_takes_is_replaced_and_asked_once_more(rig):
    rig.paid("OM1")
    client = rig.client()
    client.kept.keep(Token(header="O-Bearer ended-early", refresh_at=rig.now + 3600))
    (found,) = client.report(REFERENCE).received
    assert found.event.payment_id == "OM1"
    assert rig.tokens_fetched() == 1


def test_a_fresh_token_refused_is_the_credentials(rig, monkeypatch):
    rig.paid("OM1")
    client = rig.client()
    bogus = Token(header="O-Bearer not-a-token", refresh_at=rig.now + 3600)
    monkeypatch.setattr(status, "token_of", lambda body, now: bogus)
    with pytest.raises(CredentialsRefused) as refused:
        client.report(REFERENCE)
    assert refused.value.status == 401
    assert rig.tokens_fetched() == 1


@pytest.mark.parametrize(
    "credentials",
    [{"secret": "wrong"}, {"client_id": "SOMEONE_ELSE"}, {"client_id": sim.CLIENT_ID + ":2"}],
)
def test_wrong_client_credentials_are_refused_as_credentials(rig, credentials):
    with pytest.raises(CredentialsRefused) as refused:
        rig.client(**credentials).report(REFERENCE)
    assert refused.value.status == 400
    assert "INVALID_CLIENT" in refused.value.reason
    assert "wrong" not in str(refused.value)


def test_the_token_form_is_what_phonepe_documents(rig):
    rig.client().report(REFERENCE)
    (token_call,) = [r for r in rig.asked if r.url.path.endswith("/v1/oauth/token")]
    assert token_call.url.path == "/identity-manager/v1/oauth/token"
    assert token_call.headers["content-type"] == "application/x-www-form-urlencoded"
    form = dict(httpx.QueryParams(token_call.content.decode()))
    assert form == {"client_id": sim.CLIENT_ID, "client_version": "1",
                    "client_secret": sim.CLIENT_SECRET,
                    "grant_type": "client_credentials"}  # fmt: skip


# --- the gateway's refusals ---------------------------------------------------------------------


def test_a_rate_limit_says_how_long_to_wait(rig):
    rig.paid("OM1")
    rig.books.fail_next(Provider.PHONEPE, Fault(status=429, retry_after_s=7))
    with pytest.raises(GatewayApiError) as limited:
        rig.client().report(REFERENCE)
    assert limited.value.rate_limited and limited.value.retry_after_s == 7.0
    assert not isinstance(limited.value, CredentialsRefused)


def test_an_outage_is_an_outage(rig):
    rig.books.fail_next(Provider.PHONEPE, Fault(status=503))
    with pytest.raises(GatewayApiError) as failed:
        rig.client().report(REFERENCE)
    assert failed.value.outage and "INTERNAL_SERVER_ERROR" in failed.value.reason


def test_a_403_is_the_credentials_whatever_the_token(rig):
    client = rig.client()
    client.report(REFERENCE)
    rig.books.fail_next(Provider.PHONEPE, Fault(status=403))
    with pytest.raises(CredentialsRefused):
        client.report(REFERENCE)


# --- where the calls go ------------------------------------------------------------------------


def test_production_and_sandbox_bases_reach_their_own_paths():
    assert status.endpoints("https://api.phonepe.com/apis") == (
        "https://api.phonepe.com/apis/identity-manager/v1/oauth/token",
        "https://api.phonepe.com/apis/pg",
    )
    sandbox = "https://api-preprod.phonepe.com/apis/pg-sandbox/"
    assert status.endpoints(sandbox) == (
        "https://api-preprod.phonepe.com/apis/pg-sandbox/v1/oauth/token",
        "https://api-preprod.phonepe.com/apis/pg-sandbox",
    )


@pytest.mark.parametrize(
    ("configured", "identity"),
    [
        ("M22ABC_2503", ("M22ABC_2503", "1")),
        ("M22ABC_2503:2", ("M22ABC_2503", "2")),
        ("odd:name", ("odd:name", "1")),
        (":2", (":2", "1")),
    ],
)
def test_the_client_version_is_written_after_the_client_id(configured, identity):
    assert status.client_identity(configured) == identity


# --- a refund's own status (the double keeps no refunds: a mock transport answers) -------------


def _refund_client(answers: dict[str, tuple[int, dict[str, object]]]) -> PhonePeClient:
    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/v1/oauth/token"):
            code, doc = 200, {"access_token": "t", "token_type": "O-Bearer", "issued_at": 0,
                              "expires_at": 3600}  # fmt: skip
        else:
            code, doc = answers.get(request.url.path) or (200, PAID_ORDER)
        # streamed, as the network answers: ``_status.answer`` reads the raw bytes
        return httpx.Response(code, stream=httpx.ByteStream(json.dumps(doc).encode()))

    credentials = ApiCredentials(provider=Provider.PHONEPE, id="c", secret="s",
                                 base_url="https://api.phonepe.com/apis")  # fmt: skip
    http = loopback.Client(transport=httpx.MockTransport(reply))
    return PhonePeClient(credentials=credentials, http=http, clock=lambda: 10.0)


REFUND = {
    "merchantId": "M1", "merchantRefundId": "rf_1", "originalMerchantOrderId": REFERENCE,
    "refundId": "OMR7878098045517540996", "amount": 5000, "state": "COMPLETED",
    "timestamp": 1730869961754,
    "paymentDetails": [{"transactionId": "OMR7896789", "state": "COMPLETED", "amount": 5000,
                        "timestamp": 1, "rail": {"type": "UPI", "utr": "614029768413"}}],
}  # fmt: skip
REFUND_PATH = "/apis/pg/payments/v2/refund/rf_1/status"
ORDER_STATUS_PATH = f"/apis/pg/checkout/v2/order/{REFERENCE}/status"
PAID_ORDER = {
    "orderId": "OMO2403282020198641071317", "merchantOrderId": REFERENCE, "state": "COMPLETED",
    "amount": 5000,
    "paymentDetails": [{"transactionId": "OM2403282020198651071949", "state": "COMPLETED",
                        "amount": 5000, "timestamp": 1, "paymentMode": "UPI_QR"}],
}  # fmt: skip


def test_a_completed_refund_is_reported_processed():
    (found,) = _refund_client({REFUND_PATH: (200, REFUND)}).refund("rf_1", REFERENCE).received
    event = found.event
    assert (event.kind, event.refund_id, event.refund_amount_paise, event.merchant_ref) == (
        EventKind.REFUND_PROCESSED, "rf_1", 5000, REFERENCE,
    )  # fmt: skip
    assert (event.amount_paise, event.bank_ref) == (None, "614029768413")
    assert event.event_id == f"{KEY_PREFIX}:OMR7878098045517540996:COMPLETED"
    assert event.event_type == f"{KEY_PREFIX}.refund.COMPLETED"


@pytest.mark.parametrize("state", ["PENDING", "CONFIRMED", "FAILED"])
def test_a_refund_not_completed_reports_nothing(state):
    report = _refund_client({REFUND_PATH: (200, {**REFUND, "state": state})}).refund(
        "rf_1", REFERENCE
    )
    assert (report.received, report.skipped) == ((), (f"rf_1:{state}",))
    # FAILED is final: a callback claiming the refund completed is contradicted; the others
    # are on their way, and a callback claiming it waits for them
    assert (report.contradicted, report.underway) == (state == "FAILED", state != "FAILED")


def test_a_failed_refund_of_another_order_contradicts_nothing():
    failed = {**REFUND, "state": "FAILED"}
    report = _refund_client({REFUND_PATH: (200, failed)}).refund("rf_1", "ph_another_order")
    assert (report.received, report.contradicted) == ((), False)


def test_a_reconciled_refund_reads_again_as_it_was_stored():
    (found,) = _refund_client({REFUND_PATH: (200, REFUND)}).refund("rf_1", REFERENCE).received
    again = one_of(status.stored(found.event.event_id, json.loads(found.body)), Provider.PHONEPE,
                   found.event.event_id)  # fmt: skip
    assert again.event == found.event


def test_a_refund_answer_about_another_refund_is_unreadable():
    with pytest.raises(GatewayApiError, match="another merchantRefundId"):
        _refund_client({REFUND_PATH: (200, {**REFUND, "merchantRefundId": "rf_9"})}).refund(
            "rf_1", REFERENCE
        )


def test_a_refund_answer_naming_its_refund_id_as_a_number_is_unreadable():
    """PhonePe's ``refundId`` is text (``OMR…``); written as a number, the answer does not read
    (asked again), never a ``TypeError`` the confirmation logs as its own failure."""
    odd = {**REFUND, "refundId": 7700112233}
    with pytest.raises(GatewayApiError, match="unreadable answer: refundId is not a string"):
        _refund_client({REFUND_PATH: (200, odd)}).refund("rf_1", REFERENCE)


def test_a_refund_of_another_order_than_the_callback_named_confirms_nothing():
    report = _refund_client({REFUND_PATH: (200, REFUND)}).refund("rf_1", "ph_another_order")
    assert (report.received, report.skipped) == ((), ("rf_1: a refund of another order",))


def test_a_completed_refund_names_the_payment_of_its_original_order():
    """PhonePe's refund status names no payment; the refund reached the handler
    with none, and the reference shop's handler failed on it. It is the payment of the order
    it refunds (that order's status), kept in the stored answer so a replay reads it too."""
    client = _refund_client({REFUND_PATH: (200, REFUND)})
    (found,) = client.refund("rf_1", REFERENCE).received
    assert found.event.payment_id == "OM2403282020198651071949"
    again = one_of(status.stored(found.event.event_id, json.loads(found.body)), Provider.PHONEPE,
                   found.event.event_id)  # fmt: skip
    assert again.event == found.event


def test_a_refund_of_an_order_with_no_completed_payment_names_none():
    unpaid = {**PAID_ORDER, "state": "PENDING"}
    client = _refund_client({REFUND_PATH: (200, REFUND), ORDER_STATUS_PATH: (200, unpaid)})
    (found,) = client.refund("rf_1", REFERENCE).received
    assert found.event.payment_id is None  # the handler is told none: the shop parks it


def test_a_400_naming_the_unknown_order_only_in_its_words_is_an_api_error(rig):
    """Only PhonePe's ``code`` INVALID_MERCHANT_ORDER_ID is "no such order"; the same words in
    another error's message are an error, asked again."""
    body = b'{"code":"BAD_REQUEST","message":"INVALID_MERCHANT_ORDER_ID check failed upstream"}'
    rig.books.fail_next(Provider.PHONEPE, Fault(status=400, body=body))
    with pytest.raises(GatewayApiError, match="answered 400"):
        rig.client().report("ph_never_heard")
    assert rig.client().report("ph_never_heard").received == ()  # PhonePe's own: no such order


def test_a_completed_order_naming_no_completed_attempt_is_asked_again_never_credited():
    """PhonePe gives each attempt its own state: a COMPLETED order whose attempts all failed or
    wait names no payment, so no attempt's id is credited with it (it would match no payment
    PhonePe reports later); it is an answer to ask again, as one listing no attempt at all."""
    attempts = [
        {"transactionId": "OM10a", "state": "FAILED", "amount": 5000, "timestamp": 1},
        {"transactionId": "OM10b", "state": "PENDING", "amount": 5000, "timestamp": 2},
    ]
    odd = {**PAID_ORDER, "paymentDetails": attempts}
    with pytest.raises(GatewayApiError, match="no completed attempt"):
        _refund_client({ORDER_STATUS_PATH: (200, odd)}).report(REFERENCE)


@pytest.mark.parametrize(
    ("page", "content_type", "refused"),
    [
        (b"<html><body>400 Bad Request (proxy)</body></html>", "text/html", False),
        (b'{"code":"BAD_REQUEST","message":"client_version missing"}', "application/json", False),
        (b'{"code":"INVALID_CLIENT","message":"Client Not Found"}', "application/json", True),
    ],
)
def test_only_invalid_client_at_the_token_endpoint_refuses_the_credentials(
    page, content_type, refused
):
    """A 400 from the token endpoint is the credentials' refusal only with PhonePe's own
    ``INVALID_CLIENT``: a proxy's page or another error is asked again after, never an
    operator's "credentials refused"."""

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(  # streamed, as the network answers
            400, stream=httpx.ByteStream(page), headers={"content-type": content_type}
        )

    credentials = ApiCredentials(provider=Provider.PHONEPE, id="c", secret="s",
                                 base_url="https://api.phonepe.com/apis")  # fmt: skip
    http = loopback.Client(transport=httpx.MockTransport(reply))
    client = PhonePeClient(credentials=credentials, http=http, clock=lambda: 10.0)
    with pytest.raises(GatewayApiError) as failed:
        client.report(REFERENCE)
    assert failed.value.status == 400
    assert isinstance(failed.value, CredentialsRefused) is refused

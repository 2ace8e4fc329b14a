"""Juspay's Order Status API client: the call it makes (HTTP Basic with the API key and an
empty password, ``x-merchantid``, ``version``), orders in the shape of Juspay's samples read as
payments and refunds under reconcile keys, an unknown order, refused credentials, rate limits,
and the simulated double answering the client over a loopback socket."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from payhooks.events import EventKind, Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._reports import Report, one_of
from payhooks.gateways._status import CredentialsRefused, http_client
from payhooks.gateways.juspay import status
from payhooks.plumbing.errors import GatewayApiError
from payhooks.sim.deliveries import Purchase
from payhooks.sim.gateway_api import Fault, GatewayApi, serving
from payhooks.sim.gateways import juspay as juspay_sim
from payhooks.sim.gateways.base import Booked
from tests import loopback

DATA = Path(__file__).resolve().parents[2] / "data" / "juspay"
BASE = "https://api.juspay.test"
CREDENTIALS = ApiCredentials(
    provider=Provider.JUSPAY, id="shop_merchant", secret="JP_API_KEY_123", base_url=BASE
)
Handler = Callable[[httpx.Request], httpx.Response]


def sample_order(name: str) -> dict[str, Any]:
    """A webhook's ``content.order``: the whole order, as the Order Status API answers it
    (Juspay's webhook documentation)."""
    doc = json.loads((DATA / "webhooks" / name).read_bytes(), parse_float=Decimal)
    return dict(doc["content"]["order"])


def card_order() -> bytes:
    """An Order Status answer for a card payment in the shape of Juspay's sample, its ``//``
    comments removed."""
    text = (DATA / "order-status" / "card.json").read_text()
    return re.sub(r"\s//\s[^\n]*", "", text).encode()


def encoded(doc: object) -> bytes:
    return json.dumps(doc, default=str).encode()


class Gateway:
    """A Juspay stand-in answering every call with ``respond`` and keeping what was asked."""

    def __init__(self, respond: Handler) -> None:
        self.respond = respond
        self.asked: list[httpx.Request] = []

    def report(self, reference: str) -> Report:
        def handler(request: httpx.Request) -> httpx.Response:
            self.asked.append(request)
            return self.respond(request)

        with loopback.Client(transport=httpx.MockTransport(handler), timeout=5.0) as http:
            return status.client(CREDENTIALS, http).report(reference)


def answering(body: bytes, code: int = 200, **headers: str) -> Gateway:
    return Gateway(
        lambda request: httpx.Response(code, stream=httpx.ByteStream(body), headers=headers)
    )


def not_created(order_id: str) -> dict[str, Any]:
    """Juspay's answer for an order id it never created, as its Order Status API's error table
    prints it (HTTP 400): the order's own status ``NOT_FOUND`` (id 40), the order id asked
    about, and ``error_info``; payhooks' own order id."""
    info = {"user_message": "Order Not Found", "developer_message": "Order Not Found",
            "code": "RESOURCE_NOT_FOUND", "category": "USER_ERROR"}  # fmt: skip
    return {"status": "NOT_FOUND", "error_info": info, "status_id": 40, "order_id": order_id}


OTHER_404S = [
    # Juspay's error shape, an error code read, about no order: the route, the merchant.
    {"status": "error", "error_code": "not_found", "error_message": "No payment found"},
    {"status": "error", "error_code": "invalid_request",
     "error_info": {"code": "RESOURCE_NOT_FOUND", "category": "USER_ERROR",
                    "developer_message": "Merchant not found", "user_message": "Not found"}},
    not_created("another_order"),  # Juspay's own "not created", of another order
]  # fmt: skip


def kinds(report: Report) -> list[tuple[EventKind, str]]:
    return [(r.event.kind, r.event.event_id) for r in report.received]


# --- the call ----------------------------------------------------------------------------------


def test_the_call_is_a_get_of_the_order_with_basic_auth_merchant_id_and_version():
    gateway = answering(encoded(sample_order("order_succeeded.json")))
    gateway.report("tea_ord_7101")
    (request,) = gateway.asked
    assert (request.method, str(request.url)) == ("GET", f"{BASE}/orders/tea_ord_7101")
    expected = "Basic " + base64.b64encode(b"JP_API_KEY_123:").decode()  # key, empty password
    assert request.headers["authorization"] == expected
    assert request.headers["x-merchantid"] == "shop_merchant"
    assert request.headers["version"] == "2023-06-30"
    assert "x-routing-id" not in request.headers
    assert request.content == b""


def test_the_order_id_is_one_path_segment_whatever_it_holds():
    gateway = answering(encoded(not_created("ord/1 2?x")), 400)
    assert gateway.report("ord/1 2?x") == Report()
    assert gateway.asked[0].url.raw_path == b"/orders/ord%2F1%202%3Fx"


# --- what an answer says -----------------------------------------------------------------------


def test_a_charged_order_is_its_attempt_captured_under_a_reconcile_key():
    report = answering(encoded(sample_order("order_succeeded.json"))).report("tea_ord_7101")
    (found,) = report.received
    event = found.event
    assert (event.kind, event.event_id, event.event_type) == (
        EventKind.PAYMENT_CAPTURED,
        "reconcile:teashop-tea_ord_7101-1:CHARGED",
        "reconcile.payment.CHARGED",
    )
    assert (event.payment_id, event.merchant_ref) == ("teashop-tea_ord_7101-1", "tea_ord_7101")
    assert (event.amount_paise, event.payment_amount_paise, event.currency) == (300, 300, "INR")
    assert event.unconfirmed is False  # the API's word is the confirmation
    assert report.skipped == ()


def test_a_failed_order_is_its_attempt_failed():
    report = answering(encoded(sample_order("order_failed.json"))).report("tea_ord_7144")
    assert kinds(report) == [
        (EventKind.PAYMENT_FAILED, "reconcile:teashop-tea_ord_7144-1:AUTHORIZATION_FAILED")
    ]


def test_a_card_order_is_a_capture_and_its_successful_refund():
    report = answering(card_order()).report("TS1732037461")
    payment, refund = (r.event for r in report.received)
    assert (payment.kind, payment.payment_id, payment.amount_paise) == (
        EventKind.PAYMENT_CAPTURED,
        "kettle_shop-TS1732037461-1",
        480000,
    )
    assert payment.payment_amount_paise == 500000  # effective_amount: what was paid
    assert (refund.kind, refund.event_id) == (
        EventKind.REFUND_PROCESSED,
        "reconcile:TEST1733244398:refund.SUCCESS",
    )
    assert (refund.payment_id, refund.merchant_ref) == (payment.payment_id, "TS1732037461")
    assert (refund.refund_id, refund.refund_amount_paise) == ("TEST1733244398", 500000)


def test_a_pending_refund_known_by_its_request_id_is_reported_once_it_succeeds():
    report = answering(encoded(sample_order("order_refunded.json"))).report("tea_ord_7129")
    refunds = [r.event for r in report.received if r.event.kind is EventKind.REFUND_PROCESSED]
    assert [(e.refund_id, e.refund_amount_paise) for e in refunds] == [
        ("erf_ea3803ac1023b867", 600)
    ]


def test_only_successful_refunds_are_reported_the_others_are_skipped_with_their_status():
    answer = encoded(sample_order("refund_manual_review.json"))  # amounts as strings
    report = answering(answer).report("rbkt219304457")
    assert kinds(report) == [
        (EventKind.PAYMENT_CAPTURED, "reconcile:railbook-rbkt219304457-1:CHARGED"),
        (EventKind.REFUND_PROCESSED, "reconcile:w8rbkt219304457:refund.SUCCESS"),
    ]
    assert report.received[0].event.amount_paise == 218400
    assert report.received[1].event.refund_amount_paise == 13800
    assert report.skipped == ("rbcan21930445781120:refund MANUAL_REVIEW",)


def test_a_refund_the_answer_lists_unreadably_never_hides_the_capture_or_the_other_refunds():
    """One SUCCESS refund whose amount is not rupees: that refund's trouble (unreadable, kept
    as the checkout's error), the order's capture and its readable refund reported."""
    doc = sample_order("refund_manual_review.json")
    good = next(r for r in doc["refunds"] if r["status"] == "SUCCESS")
    doc["refunds"] = [{**good, "unique_request_id": "w8bad", "amount": "abc"}, *doc["refunds"]]
    report = answering(encoded(doc)).report("rbkt219304457")
    assert kinds(report) == [
        (EventKind.PAYMENT_CAPTURED, "reconcile:railbook-rbkt219304457-1:CHARGED"),
        (EventKind.REFUND_PROCESSED, "reconcile:w8rbkt219304457:refund.SUCCESS"),
    ]
    (said,) = report.unreadable
    assert said.startswith("refund w8bad unreadable: ") and "amount" in said


def test_an_order_naming_no_currency_is_read_as_its_webhook_reads_it():
    """Juspay's webhook takes an order with no ``currency``; its status answer does too (the
    rule that a payment names its currency is Razorpay's and Cashfree's)."""
    doc = sample_order("refund_manual_review.json")
    doc.pop("currency", None)
    report = answering(encoded(doc)).report("rbkt219304457")
    assert kinds(report)[0][0] is EventKind.PAYMENT_CAPTURED
    assert report.unreadable == ()


def test_an_order_juspay_refunded_by_itself_is_left_aside_with_its_refund():
    report = answering(encoded(sample_order("auto_refund_succeeded.json"))).report("tea_ord_7133")
    assert report.received == ()
    assert report.skipped == (
        "teashop-tea_ord_7133-1:AUTO_REFUNDED",
        "ARyU7rhdKn65It07:refund SUCCESS",
    )


def test_a_state_that_carries_nothing_is_skipped():
    cod = (DATA / "order-status" / "cod.json").read_bytes()
    report = answering(cod).report("1731235153")
    assert report == Report(skipped=("teashop-1731235153-1:COD_INITIATED",))


def test_an_answer_about_another_order_is_an_api_error_never_a_decision():
    """Like PhonePe's: an order status naming another order_id says nothing of the one asked."""
    with pytest.raises(GatewayApiError, match="another order_id"):
        answering(encoded(sample_order("order_succeeded.json"))).report("another_order")


def test_a_whole_rupee_decimal_and_a_string_amount_are_exact():
    order = {**sample_order("order_succeeded.json"), "amount": "665.34"}
    order["effective_amount"] = Decimal("680.01")
    (found,) = answering(encoded(order)).report("tea_ord_7101").received
    assert (found.event.amount_paise, found.event.payment_amount_paise) == (66534, 68001)


def test_asking_again_after_a_refund_reads_the_payment_with_the_same_body():
    before = sample_order("order_succeeded.json")
    after = {
        **before,
        "refunded": True,
        "amount_refunded": 1,
        "maximum_eligible_refund_amount": 0,
        "refunds": [{"unique_request_id": "rf_1", "status": "SUCCESS", "amount": 1}],
    }
    first = answering(encoded(before)).report("tea_ord_7101").received[0]
    again = answering(encoded(after)).report("tea_ord_7101").received[0]
    assert (again.event.event_id, again.body) == (first.event.event_id, first.body)


@pytest.mark.parametrize(
    "answer", [card_order(), encoded(sample_order("refund_manual_review.json"))]
)
def test_every_reported_delivery_reads_again_from_its_stored_body(answer):
    reference = json.loads(re.sub(rb"\s//\s[^\n]*", b"", answer))["order_id"]
    for received in answering(answer).report(reference).received:
        stored = json.loads(received.body, parse_float=Decimal)
        again = one_of(status.stored(received.event.event_id, stored), Provider.JUSPAY,
                       received.event.event_id)  # fmt: skip
        assert again == received


def test_payment_and_refund_bodies_differ_so_neither_is_taken_for_the_other():
    bodies = [
        r.event.payload_sha256 for r in answering(card_order()).report("TS1732037461").received
    ]
    assert len(set(bodies)) == 2


# --- an unknown order, and the API's refusals --------------------------------------------------


def test_an_order_juspay_never_created_is_no_payment():
    """Juspay's documented answer: HTTP 400, the order's status NOT_FOUND, the id asked."""
    assert answering(encoded(not_created("ph_unknown")), 400).report("ph_unknown") == Report()


def test_the_documented_not_found_answer_under_a_404_is_no_payment_too():
    """Juspay's older reference lists a 404 "Not Found" for the order status API, its body
    unshown: the body decides, never the status."""
    assert answering(encoded(not_created("ph_unknown")), 404).report("ph_unknown") == Report()


def test_an_order_answered_not_found_is_no_payment():
    doc = {"status": "NOT_FOUND", "status_id": 40, "order_id": "ph_unknown"}
    assert answering(encoded(doc)).report("ph_unknown") == Report()


@pytest.mark.parametrize("code", [200, 400, 404])
def test_a_not_found_about_another_order_is_an_api_error_never_no_payment(code):
    with pytest.raises(GatewayApiError):
        answering(encoded(not_created("another_order")), code).report("ph_unknown")


@pytest.mark.parametrize("code", [200, 400])
@pytest.mark.parametrize(
    "doc",
    [{"status": "NOT_FOUND", "order_id": "ph_unknown"},  # no status id
     {"status": "NOT_FOUND", "status_id": 40}],  # no order id
)  # fmt: skip
def test_a_not_found_short_of_the_documented_answer_is_an_api_error(code, doc):
    with pytest.raises(GatewayApiError):
        answering(encoded(doc), code).report("ph_unknown")


@pytest.mark.parametrize("error", OTHER_404S)
def test_a_404_in_juspays_error_shape_about_anything_else_is_an_api_error(error):
    """Juspay documents a 404 for a URL it does not serve; a 404 about the merchant or a wrong
    route says nothing of the order, whatever error code it carries."""
    with pytest.raises(GatewayApiError, match="answered 404") as failed:
        answering(encoded(error), 404).report("ph_unknown")
    assert failed.value.status == 404 and not failed.value.outage


def test_juspays_error_shape_under_200_keeps_its_words():
    """docs/providers.md: payhooks shows Juspay's ``error_code: error_message: developer_message``.
    The same error under HTTP 200 was asked again as it should be, but said "order status
    answer has no order_id or status" (it has a status): Juspay's words were lost."""
    error = {"status": "error", "error_code": "internal_error",
             "error_message": "Unable to process request",
             "error_info": {"code": "INTERNAL_ERROR", "category": "SERVER_ERROR",
                            "developer_message": "Try again later"}}  # fmt: skip
    with pytest.raises(GatewayApiError) as failed:
        answering(encoded(error)).report("tea_ord_7101")
    assert failed.value.reason == (
        "answered 200 with an error (internal_error: Unable to process request: Try again later)"
    )
    assert (failed.value.status, failed.value.code) == (200, "internal_error")


@pytest.mark.parametrize("code", [401, 403])
def test_refused_credentials_pause_the_gateway_not_one_checkout(code):
    body = (DATA / "order-status" / "error-401-access_denied.json").read_bytes()
    with pytest.raises(CredentialsRefused) as refused:
        answering(body, code).report("tea_ord_7101")
    assert (refused.value.status, refused.value.provider) == (code, "juspay")
    assert "JP_API_KEY_123" not in str(refused.value)


def test_refused_credentials_keep_juspays_words():
    """Juspay's own sample of a wrong key: its ``error_code`` and ``error_info``'s developer
    message, which say what to fix (docs/operations.md: every error keeps them)."""
    body = (DATA / "order-status" / "error-401-access_denied.json").read_bytes()
    with pytest.raises(CredentialsRefused) as refused:
        answering(body, 401).report("tea_ord_7101")
    assert refused.value.reason == (
        "answered 401 (access_denied: API key not recognised; send an active API key.)"
    )


JUSPAY_ERRORS = [
    (401, {"status": "error", "error_code": "access_denied", "error_message": "Invalid API Key",
           "error_info": {"category": "USER_ERROR", "user_message": "Unauthorized.",
                          "developer_message": "Invalid API Key. Please pass a valid and "
                                               "active api key.", "code": "UNAUTHORIZED"}},
     "answered 401 (access_denied: Invalid API Key. Please pass a valid and active api key.)"),
    (400, {"status": "error", "error_code": "RESOURCE_NOT_FOUND",
           "error_info": {"code": "RESOURCE_NOT_FOUND",
                          "developer_message": "invalid merchant_id"}},
     "answered 400 (RESOURCE_NOT_FOUND: invalid merchant_id)"),
    (400, {"status": "Bad Request", "error_code": "Mandatory fields are missing",
           "error_message": "Mandatory fields are missing"},
     "answered 400 (Mandatory fields are missing)"),
    (404, {"status": "NOT_FOUND", "status_id": 40, "order_id": "ph_other",
           "error_info": {"code": "RESOURCE_NOT_FOUND", "user_message": "Order Not Found",
                          "developer_message": "Order Not Found"}},
     "answered 404 (RESOURCE_NOT_FOUND: Order Not Found)"),
    (500, {"status": "error", "error_message": "Internal Server Error"},
     "answered 500 (Internal Server Error)"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "doc", "said"), JUSPAY_ERRORS)
def test_an_api_error_keeps_juspays_own_code_and_words(code, doc, said):
    """Juspay's error shape (``error_code``, ``error_message``, ``error_info``'s
    ``developer_message`` and ``code``), each part once: never a bare "answered 401"."""
    with pytest.raises(GatewayApiError) as failed:
        answering(encoded(doc), code).report("ph_unknown")
    assert failed.value.reason == said


def test_a_rate_limit_carries_the_wait_juspay_asks_for():
    with pytest.raises(GatewayApiError) as limited:
        answering(b'{"status":"error"}', 429, **{"retry-after": "30"}).report("tea_ord_7101")
    assert limited.value.rate_limited and limited.value.retry_after_s == 30.0


def test_a_server_error_is_an_outage():
    with pytest.raises(GatewayApiError) as failed:
        answering(b"oops", 503).report("tea_ord_7101")
    assert failed.value.outage and not isinstance(failed.value, CredentialsRefused)


@pytest.mark.parametrize(
    "answer",
    [
        b"not json",
        b"[]",
        encoded({"status": "error", "error_code": "access_denied"}),  # an error in a 200
        encoded({**sample_order("order_succeeded.json"), "amount": "12abc"}),
    ],
)
def test_an_answer_that_is_not_an_order_is_an_api_error_asked_again_later(answer):
    with pytest.raises(GatewayApiError, match=r"unreadable answer|answered 200 with an error"):
        answering(answer).report("tea_ord_7101")


# --- the simulated Order Status API, over a loopback socket ------------------------------------


class JuspayBooks(GatewayApi):
    """The double's books with Juspay's routes alone (the shared double serves them once the
    simulator registry names Juspay)."""

    def app(self) -> Starlette:
        return Starlette(routes=juspay_sim.routes(self))

    def paid(self, purchase: Purchase, txn: str, state: str = "CHARGED") -> None:
        order = self.open_order(purchase)
        booked = Booked(order=order, payment_id=txn, status=state, paid_paise=None, now=self.now)
        order.payments = [juspay_sim.entity(booked)]


@pytest.fixture
def books() -> Iterator[tuple[JuspayBooks, ApiCredentials]]:
    api = JuspayBooks()
    merchant, key = juspay_sim.api_keys(api.keys)
    with serving(api) as url:
        yield api, ApiCredentials(provider=Provider.JUSPAY, id=merchant, secret=key, base_url=url)


def ask(credentials: ApiCredentials, reference: str) -> Report:
    with http_client(5.0) as http:
        return status.client(credentials, http).report(reference)


def purchase(reference: str = "ph_0123456789abcdef", paise: int = 49950) -> Purchase:
    return Purchase(provider=Provider.JUSPAY, cart_id="cart-1", reference=reference,
                    amount_paise=paise, items={"MUG-CLAY": 1})  # fmt: skip


def test_the_double_answers_a_new_order_with_nothing_to_apply(books):
    api, credentials = books
    api.open_order(purchase())
    assert ask(credentials, "ph_0123456789abcdef") == Report(skipped=("ph_0123456789abcdef:NEW",))


def test_the_double_answers_a_charged_order_as_the_client_reads_it(books):
    api, credentials = books
    txn = juspay_sim.txn_id("ph_0123456789abcdef")
    api.paid(purchase(), txn)
    (found,) = ask(credentials, "ph_0123456789abcdef").received
    assert (found.event.kind, found.event.payment_id, found.event.amount_paise) == (
        EventKind.PAYMENT_CAPTURED,
        txn,
        49950,
    )
    assert api.asked[(Provider.JUSPAY, "ph_0123456789abcdef")] == 1


def test_the_double_refuses_another_api_key_and_knows_no_other_order(books):
    _, credentials = books
    with pytest.raises(CredentialsRefused):
        ask(ApiCredentials(provider=Provider.JUSPAY, id=credentials.id, secret="wrong",
                           base_url=credentials.base_url), "ph_x")  # fmt: skip
    assert ask(credentials, "ph_never_opened") == Report()


def test_the_double_answers_an_order_it_never_created_as_juspay_documents(books):
    _, credentials = books
    with http_client(5.0) as http:
        answered = http.get(f"{credentials.base_url}/orders/ph_never_opened",
                            auth=(credentials.secret, ""),
                            headers={"x-merchantid": credentials.id})  # fmt: skip
    body = answered.json()
    info = body.pop("error_info")
    assert answered.status_code == 400 and info["code"] == "RESOURCE_NOT_FOUND"
    assert body == {"status": "NOT_FOUND", "status_id": 40, "order_id": "ph_never_opened"}


@pytest.mark.parametrize("error", OTHER_404S)
def test_a_404_about_anything_but_the_order_is_an_api_error_of_reconciliation(
    books, database_url, error
):
    """Reconciliation counts it and asks again; it never reads it as "no payment yet"."""
    import psycopg

    import payhooks
    from payhooks import Hooks
    from payhooks.reconcile.running import connecting, delivering, reconcile_once

    api, credentials = books
    api.paid(purchase(), juspay_sim.txn_id("ph_0123456789abcdef"))
    api.fail_next(Provider.JUSPAY, Fault(status=404, body=encoded(error)))
    hooks = Hooks()
    hooks.on(EventKind.PAYMENT_CAPTURED)(lambda conn, event: None)
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        payhooks.expect(conn, "juspay", "ph_0123456789abcdef", 49950, "INR", "cart-1")
        connect = connecting(database_url)
        found = {Provider.JUSPAY: credentials}
        tally = reconcile_once(connect, delivering(connect, hooks), found, after_s=0)
        (last_error,) = conn.execute("SELECT last_error FROM payhooks_reconcile").fetchone()
        assert (tally.api_errors[Provider.JUSPAY], tally.applied[Provider.JUSPAY]) == (1, 0)
        assert "answered 404" in last_error
        conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
        again = reconcile_once(connect, delivering(connect, hooks), found, after_s=0)
    assert again.applied[Provider.JUSPAY] == 1  # asked again: the payment


@pytest.mark.parametrize("error", OTHER_404S)
def test_a_callback_answered_a_404_about_anything_but_its_order_is_never_refuted(
    books, database_url, error
):
    """Past the half hour after which Juspay's silence refutes a callback, a 404 about the
    merchant or the route still leaves it waiting, with the 404 as its error."""
    row, tally = _confirmed_once(books, database_url, Fault(status=404, body=encoded(error)))
    assert tally.refuted[Provider.JUSPAY] == 0 and tally.api_errors[Provider.JUSPAY] == 1
    assert row[:2] == ("confirming", None) and "answered 404" in row[2]


@pytest.mark.parametrize(
    "answer",
    [
        Fault(status=404, body=b"<html>Not Found</html>", content_type="text/html"),
        Fault(status=404, body=b'{"status":"error"'),  # truncated
        Fault(status=404, body=b"{}"),  # no error_code: no Juspay error
    ],
)
def test_a_404_in_no_juspay_error_shape_is_an_api_error_not_no_order(books, answer):
    """A wrong base URL or a proxy answers 404 too: only Juspay's own "no such order" is one."""
    api, credentials = books
    api.paid(purchase(), juspay_sim.txn_id("ph_0123456789abcdef"))
    api.fail_next(Provider.JUSPAY, answer)
    with pytest.raises(GatewayApiError, match="answered 404"):
        ask(credentials, "ph_0123456789abcdef")
    (found,) = ask(credentials, "ph_0123456789abcdef").received  # asked again: the payment
    assert found.event.kind is EventKind.PAYMENT_CAPTURED


def test_a_callback_whose_answer_names_another_order_is_asked_again_never_refuted(
    books, database_url
):
    """An answer about another order is no word on the callback's: past the half hour after
    which silence refutes, the callback still waits, with the mismatch as its error."""
    answer = Fault(body=encoded(sample_order("order_succeeded.json")))
    row, tally = _confirmed_once(books, database_url, answer)
    assert tally.refuted[Provider.JUSPAY] == 0
    assert row[:2] == ("confirming", None) and "another order_id" in row[2]


def _confirmed_once(books, database_url, answer: Fault) -> tuple[tuple[Any, ...], Any]:
    """A capture callback of the double's paid order, then a confirmation pass an hour later
    whose first call the double answers with ``answer``: the callback's record and verdict,
    and the pass's tally."""
    import psycopg

    import payhooks
    from payhooks import Hooks
    from payhooks.events import Event, Received
    from payhooks.intake.ingest import ingest_received
    from payhooks.reconcile.confirming import confirm
    from payhooks.reconcile.passes import Tally
    from payhooks.reconcile.running import connecting, delivering

    api, credentials = books
    api.paid(purchase(), juspay_sim.txn_id("ph_0123456789abcdef"))
    api.fail_next(Provider.JUSPAY, answer)
    event = Event(
        provider=Provider.JUSPAY, kind=EventKind.PAYMENT_CAPTURED, event_type="ORDER_SUCCEEDED",
        event_id="cb-1", payment_id="txn-1", merchant_ref="ph_0123456789abcdef",
        amount_paise=49950, currency="INR", payload_sha256="cb-1", unconfirmed=True,
    )  # fmt: skip
    later = datetime.now(UTC) + timedelta(hours=1)
    with psycopg.connect(database_url, autocommit=True) as conn, http_client(5.0) as http:
        payhooks.migrate(conn)
        ingest_received(conn, Received(event=event, body=b"{}", headers={}), Hooks())
        connect = connecting(database_url)
        clients = {Provider.JUSPAY: status.client(credentials, http)}
        tally = confirm(connect, clients, delivering(connect, Hooks()), Tally(), now=lambda: later)
        row = conn.execute(
            "SELECT w.outcome, c.verdict, c.last_error FROM processed_webhooks w "
            "JOIN payhooks_confirmations c USING (provider, event_id)"
        ).fetchone()
    return row, tally

"""No refund is refused on an answer payhooks cannot read: an error under HTTP 200, a status
with no gateway's error shape (a proxy's page), truncated JSON, a code the gateway does not
document as a refusal. The intent stays open, is asked again with backoff, and is sent once;
only a documented refusal ends it ``refused``. The sender against the gateways' refund doubles
over a loopback socket, on real PostgreSQL."""

from __future__ import annotations

import pytest

from payhooks import refunds
from payhooks.events import Provider
from payhooks.sim.gateway_api import Fault
from tests.refunds.test_sending import (
    ORDER,
    PAYMENT,
    books,
    core,  # noqa: F401  (a fixture)
    due_now,
    gateway_api,  # noqa: F401  (a fixture)
    paid,
    send,
    settle,
    state,
)

HTML = b"<html><body>502 Bad Gateway</body></html>"
PASS_THROUGH = Fault()
UNREADABLE: dict[str, tuple[Provider, tuple[Fault, ...]]] = {
    "razorpay: 400 from a proxy, no error object": (
        Provider.RAZORPAY, (Fault(status=400, body=HTML, content_type="text/html"),)),
    "cashfree: 400 from a proxy, no code": (
        Provider.CASHFREE, (Fault(status=400, body=HTML, content_type="text/html"),)),
    "cashfree: 404 from a proxy, then 400": (
        Provider.CASHFREE, (Fault(status=400, body=b'{"message":"x","code":"bad",'
                                  b'"type":"invalid_request_error"}'),
                            Fault(status=404, body=HTML, content_type="text/html"))),
    "payu: a rate limit in PayU's words": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Too many requests"}'),)),
    "payu: refused under 200, no error_code": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Invalid Hash."}'),)),
    "payu: 123, pending a manual follow-up": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Request set as pending",'
                               b'"error_code":123}'),)),
    "payu: the action list refused": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Refund FAILURE","error_code":105}'),
                        Fault(body=b'{"status":0,"msg":"Too many requests"}'))),
}  # fmt: skip


def ask(conn, provider: Provider, payment_id: str | None = None):
    return refunds.request(conn, provider, payment_id or PAYMENT[provider], 49_900,
                           key="double-payment", captured_paise=49_900, reason="double payment",
                           requested_by="shop", gateway_order_id=ORDER[provider])  # fmt: skip


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_an_answer_it_cannot_read_refuses_nothing_and_the_refund_is_made_once(
    core, database_url, case
):
    conn, api, url = core
    provider, faults = UNREADABLE[case]
    paid(api, provider)
    ask(conn, provider)
    api.fail_next(provider, *faults)
    tally = send(database_url, url)
    assert tally.refused[provider] == 0 and tally.retried[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["requested"]
    assert books(api, provider) == (0, 0)
    due_now(conn)
    send(database_url, url)
    settle(conn, database_url, url)
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


def test_a_txnids_payment_payu_cannot_name_for_now_is_refunded_later_not_refused(
    core, database_url
):
    """A refund of a txnid's first payment (recorded under the txnid): verify_payment names
    its mihpayid. PayU refusing that call once (``Invalid Hash.``, as it answers a rate limit)
    is no "PayU names no payment"."""
    conn, api, url = core
    api.pay(_purchase(), PAYMENT[Provider.PAYU])
    ask(conn, Provider.PAYU, payment_id=ORDER[Provider.PAYU])
    api.fail_next(Provider.PAYU, Fault(body=b'{"status":0,"msg":"Invalid Hash."}'))
    tally = send(database_url, url)
    assert tally.refused[Provider.PAYU] == 0
    (refund,) = refunds.of_payment(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert refund.state.value == "requested" and "Invalid Hash." in (refund.last_error or "")
    due_now(conn)
    send(database_url, url)
    settle(conn, database_url, url)
    (refund,) = refunds.of_payment(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert refund.state.value == "processed"
    assert books(api, Provider.PAYU) == (1, 49_900)


def _purchase():
    from payhooks.sim.gateway import Purchase

    return Purchase(provider=Provider.PAYU, cart_id="RF-1", reference=ORDER[Provider.PAYU],
                    amount_paise=49_900, items={"TEA": 1})  # fmt: skip

"""Refunds in the shop API, over a real socket: a refund of an order's payment under the
caller's idempotency key (the same key, the same refund), never past what was captured, and a
list per order."""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.refunding import refunds
from tests.factories import purchase
from tests.integration.test_web import post


def test_a_refund_is_asked_for_once_per_key_and_listed_per_order(service, conn):
    buy = purchase(conn)
    order_id = post(service, buy.captured()).json()["order_id"]
    asked = {"amount_paise": 20_000, "idempotency_key": "ticket-4711", "reason": "one broken cup"}
    with service.client() as client:
        first = client.post(f"/api/orders/{order_id}/refunds", json=asked)
        again = client.post(f"/api/orders/{order_id}/refunds", json=asked)
        other = client.post(f"/api/orders/{order_id}/refunds", json={**asked, "amount_paise": 1})
        too_much = client.post(f"/api/orders/{order_id}/refunds",
                               json={**asked, "idempotency_key": "ticket-4712",
                                     "amount_paise": 30_000})  # fmt: skip
        listed = client.get(f"/api/orders/{order_id}/refunds").json()["refunds"]
    assert first.status_code == 201, first.text
    made = first.json()
    assert (made["state"], made["amount_paise"], made["payment_id"], made["requested_by"]) == (
        "requested", 20_000, buy.payment_id, "api",
    )  # fmt: skip
    assert again.status_code == 201 and again.json()["idempotency_key"] == made["idempotency_key"]
    assert other.status_code == 409 and other.json()["error"] == "conflict"
    assert too_much.status_code == 422
    assert "more than the 29900 paise still refundable" in too_much.json()["detail"]
    assert [r["idempotency_key"] for r in listed] == [made["idempotency_key"]]


def test_an_order_that_does_not_exist_has_no_refunds(service):
    with service.client() as client:
        asked = client.post("/api/orders/ord_none/refunds",
                            json={"amount_paise": 1, "idempotency_key": "k-1"})  # fmt: skip
        listed = client.get("/api/orders/ord_none/refunds")
    assert (asked.status_code, listed.status_code) == (404, 404)


def test_a_refund_stuck_requested_is_cancelled_with_who_and_why_and_frees_its_amount(service, conn):
    buy = purchase(conn)
    order_id = post(service, buy.captured()).json()["order_id"]
    asked = {"amount_paise": 49_900, "idempotency_key": "ticket-4711"}
    why = {"reason": "Cashfree keeps answering 500", "cancelled_by": "asha"}
    with service.client() as client:
        client.post(f"/api/orders/{order_id}/refunds", json=asked)
        cancelled = client.post(f"/api/orders/{order_id}/refunds/ticket-4711/cancel", json=why)
        again = client.post(f"/api/orders/{order_id}/refunds",
                            json={**asked, "idempotency_key": "ticket-4712"})  # fmt: skip
        conn.execute("UPDATE payhooks_refunds SET state = 'sent' WHERE state = 'requested'")
        key = again.json()["idempotency_key"]  # the intent's own key serves as well
        too_late = client.post(f"/api/orders/{order_id}/refunds/{key}/cancel", json=why)
        unknown = client.post(f"/api/orders/{order_id}/refunds/ticket-0/cancel", json=why)
        nameless = client.post(f"/api/orders/{order_id}/refunds/ticket-4711/cancel",
                               json={"reason": "no name"})  # fmt: skip
    assert cancelled.status_code == 200, cancelled.text
    done = cancelled.json()
    assert (done["state"], done["cancelled_by"], done["cancel_reason"]) == (
        "cancelled", "asha", "Cashfree keeps answering 500",
    )  # fmt: skip
    assert again.status_code == 201, again.text
    assert too_late.status_code == 409 and "only a refund not yet sent" in too_late.text
    assert (unknown.status_code, nameless.status_code) == (404, 422)
    # the key named as the key, the order as the order (it read "refund of order 'ticket-0'")
    assert unknown.json()["detail"] == f"order {order_id!r} has no refund 'ticket-0'"


def test_a_payu_orders_refund_is_accepted_naming_the_payment_payu_refunds(service, conn):
    """PayU refunds are sent: the API accepts one (201), its payment the txnid payhooks keys
    the PayU payment by, with the txnid as its order and the ``mihpayid`` PayU refunds."""
    buy = purchase(conn, Provider.PAYU)
    order_id = post(service, buy.captured()).json()["order_id"]
    asked = {"amount_paise": 20_000, "idempotency_key": "ticket-4711", "reason": "one broken cup"}
    with service.client() as client:
        made = client.post(f"/api/orders/{order_id}/refunds", json=asked)
    assert made.status_code == 201, made.text
    assert (made.json()["payment_id"], made.json()["gateway_order_id"]) == (
        buy.reference, buy.reference,
    )  # fmt: skip
    (intent,) = refunds.of_payment(conn, Provider.PAYU, buy.reference)
    assert intent.attempt_id == buy.payment_id  # PayU's mihpayid


def test_an_amount_that_is_not_a_json_integer_is_refused_and_asks_for_nothing(service, conn):
    """The defect: ``true`` was read as 1 paise and ``"499"`` as 499 paise (the core refuses a
    bool as an amount; the API read it before the core saw it)."""
    buy = purchase(conn)
    order_id = post(service, buy.captured()).json()["order_id"]
    with service.client() as client:
        answers = [
            client.post(f"/api/orders/{order_id}/refunds",
                        json={"amount_paise": amount, "idempotency_key": f"odd-{n}"})
            for n, amount in enumerate([True, "499", 499.0])
        ]  # fmt: skip
        listed = client.get(f"/api/orders/{order_id}/refunds").json()["refunds"]
    assert [a.status_code for a in answers] == [422, 422, 422]
    assert all("amount_paise" in a.text for a in answers)
    # docs/api.md: every error names its code, a request the API cannot read too (it was
    # FastAPI's {"detail": [...]} alone: a storefront branching on "error" found none)
    assert {a.json()["error"] for a in answers} == {"invalid_request"}
    assert all(a.json()["detail"][0]["loc"] == ["body", "amount_paise"] for a in answers)
    assert listed == []


def test_a_number_json_cannot_answer_with_is_refused_as_any_unreadable_field(service, conn):
    """``NaN`` and ``Infinity`` are read by Python's JSON, and FastAPI's 422 echoed them back:
    the answer could not be written, a 500 with a traceback."""
    buy = purchase(conn)
    order_id = post(service, buy.captured()).json()["order_id"]
    with service.client() as client:
        answers = [
            client.post(f"/api/orders/{order_id}/refunds", content=body,
                        headers={"content-type": "application/json"})
            for body in (b'{"amount_paise": NaN, "idempotency_key": "n"}',
                         b'{"amount_paise": -Infinity, "idempotency_key": "i"}')
        ]  # fmt: skip
    assert [(a.status_code, a.json()["error"]) for a in answers] == [(422, "invalid_request")] * 2


def test_a_body_no_parser_can_read_and_a_path_or_method_the_api_lacks_each_name_their_code(
    service, conn
):
    """docs/api.md: every error names its code. A body that is not UTF-8 or nests deeper than
    the parser goes was FastAPI's 400 ``{"detail": "There was an error parsing the body"}``,
    and an API path or method the API lacks its bare 404 and 405: a client branching on
    ``error`` found none."""
    buy = purchase(conn)
    order_id = post(service, buy.captured()).json()["order_id"]
    refunds_url = f"/api/orders/{order_id}/refunds"
    json_type = {"content-type": "application/json"}
    with service.client() as client:
        not_utf8 = client.post(refunds_url, content=b'{"amount_paise": 1, "k": "\xff"}',
                               headers=json_type)  # fmt: skip
        nested = client.post(refunds_url, content=b"[" * 5_000 + b"]" * 5_000,
                             headers=json_type)  # fmt: skip
        no_path = client.get("/api/no-such-thing")
        no_method = client.delete(refunds_url)
        listed = client.get(refunds_url).json()["refunds"]
    said = [(a.status_code, a.json().get("error")) for a in (not_utf8, nested, no_path, no_method)]
    assert said == [
        (400, "invalid_request"),
        (400, "invalid_request"),
        (404, "not_found"),
        (405, "method_not_allowed"),
    ]
    assert all(isinstance(a.json()["detail"], str) and a.json()["detail"]
               for a in (not_utf8, nested, no_path, no_method))  # fmt: skip
    assert no_method.headers["allow"]  # what the path does take, as HTTP asks
    assert listed == []


def test_a_refund_sent_before_is_cancelled_through_the_api_only_not_at_the_gateway(service, conn):
    """A refund sent once may be at the gateway, its answer lost: 409 naming why, unless the
    caller says the gateway's dashboard has no such refund (``not_at_gateway``)."""
    buy = purchase(conn)
    order_id = post(service, buy.captured()).json()["order_id"]
    asked = {"amount_paise": 20_000, "idempotency_key": "ticket-9", "reason": "broken"}
    why = {"reason": "no answer from the gateway", "cancelled_by": "asha"}
    with service.client() as client:
        assert client.post(f"/api/orders/{order_id}/refunds", json=asked).status_code == 201
        conn.execute("UPDATE payhooks_refunds SET attempts = 1")
        refused = client.post(f"/api/orders/{order_id}/refunds/ticket-9/cancel", json=why)
        done = client.post(f"/api/orders/{order_id}/refunds/ticket-9/cancel",
                           json={**why, "not_at_gateway": True})  # fmt: skip
    assert refused.status_code == 409 and "1 time(s) already" in refused.text, refused.text
    assert done.status_code == 200 and done.json()["state"] == "cancelled", done.text

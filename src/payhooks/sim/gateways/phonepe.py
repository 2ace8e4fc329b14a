"""PhonePe, simulated: PG v2 callbacks (``checkout.order.*``, an attempt failed, refunds)
under the webhook's ``Authorization`` digest, its OAuth token and order status API, and its
story in the storm. Its callbacks take effect only as the status API confirms them, so a story
whose payments the books do not hold changes nothing (``payhooks.intake.confirmations``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
import threading
import time
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payhooks.events import Provider
from payhooks.gateways.phonepe.adapter import authorization
from payhooks.gateways.phonepe.status import client_identity
from payhooks.sim import stage as judged
from payhooks.sim.deliveries import Delivery, Paid, bank_reference
from payhooks.sim.gateways.base import Booked, Simulator, guarded, retry_after
from payhooks.sim.parts import Fault, GatewayBooks, Order, Signer, StormOptions, Story
from payhooks.sim.stage import Result, Stage

# The test credentials, until ``sim/keys.py`` names its own (``phonepe``,
# ``phonepe_client_id``, ``phonepe_client_secret``): PhonePe's rules, a username of 5-20 of
# [A-Za-z0-9_] and a password of 8-20 letters and digits.
WEBHOOK_CREDENTIAL = "payhooks_demo:demo1234pass"
CLIENT_ID = "PAYHOOKS_DEMO_CLIENT"
CLIENT_SECRET = "phonepe_demo_client_secret"
MERCHANT_ID = "PAYHOOKSDEMO"
TOKEN_LIFE_S = 3600


def new_payment_id() -> str:
    """A transaction id shaped as PhonePe's: ``OM`` and 22 digits."""
    return "OM" + str(10**21 + secrets.randbelow(9 * 10**21))


def order_id(reference: str) -> str:
    """PhonePe's own id for the merchant's order (``OMO…``), the same for every callback."""
    return "OMO" + str(int(hashlib.sha256(reference.encode()).hexdigest(), 16))[-22:]


def _key(keys: object, name: str, default: str) -> str:
    value = getattr(keys, name, default)
    return value if isinstance(value, str) and value else default


# --- deliveries ------------------------------------------------------------------------------


def delivery(
    gateway: Signer,
    event: str,
    *,
    merchant_order_id: str,
    amount_paise: int,
    transaction_id: str | None = None,
    state: str | None = None,
    refund_id: str | None = None,
    refund_amount_paise: int | None = None,
) -> Delivery:
    """A PG v2 callback: ``checkout.order.completed`` (COMPLETED), ``checkout.order.failed``
    (FAILED), ``checkout.transaction.attempt.failed`` (the order still PENDING), or with
    ``refund_id`` a ``pg.refund.*`` of the order (the whole amount unless said). Its body has
    no ``type`` (deprecated; PhonePe's docs samples leave it out)."""
    stamp = gateway.now * 1000
    if refund_id is not None:
        payload = _refund(
            event, refund_id, merchant_order_id, refund_amount_paise or amount_paise, stamp
        )
    else:
        found = state or _STATES.get(event, "COMPLETED")
        attempt = attempt_of(transaction_id or new_payment_id(), amount_paise, stamp,
                             "FAILED" if found != "COMPLETED" else "COMPLETED")  # fmt: skip
        payload = _order(merchant_order_id, amount_paise, found, stamp, [attempt])
    body = json.dumps({"event": event, "payload": payload}).encode()
    credential = _key(gateway.keys, "phonepe", WEBHOOK_CREDENTIAL)
    return Delivery(
        provider=Provider.PHONEPE,
        body=body,
        headers={"content-type": "application/json", "authorization": authorization(credential)},
        label=f"phonepe {event} {refund_id or transaction_id or merchant_order_id}",
    )


def payment_delivery(gateway: Signer, paid: Paid) -> Delivery:
    """``Simulator.payment_delivery``: ``checkout.order.completed`` or ``.failed``."""
    names = {"captured": "checkout.order.completed", "failed": "checkout.order.failed"}
    return delivery(
        gateway,
        paid.event or names[paid.what],
        merchant_order_id=paid.reference,
        amount_paise=paid.amount_paise,
        transaction_id=paid.payment_id,
    )


_STATES = {
    "checkout.order.completed": "COMPLETED",
    "pg.order.completed": "COMPLETED",
    "checkout.order.failed": "FAILED",
    "pg.order.failed": "FAILED",
    "checkout.transaction.attempt.failed": "PENDING",
}


def attempt_of(transaction_id: str, amount_paise: int, stamp: int, state: str) -> dict[str, Any]:
    """One payment attempt (``paymentDetails[]``), a UPI intent; a completed one carries the
    UTR on its rail."""
    rail: dict[str, Any] = {"type": "UPI", "upiTransactionId": "YBL" + transaction_id[2:],
                            "vpa": "buyer@ybl"}  # fmt: skip
    attempt: dict[str, Any] = {
        "paymentMode": "UPI_INTENT", "transactionId": transaction_id, "timestamp": stamp,
        "amount": amount_paise, "payableAmount": amount_paise, "feeAmount": 0, "state": state,
        "rail": rail,
        "instrument": {"type": "ACCOUNT", "maskedAccountNumber": "XXXXXXXX1234",
                       "accountType": "SAVINGS"},
    }  # fmt: skip
    if state == "COMPLETED":
        rail["utr"] = bank_reference(transaction_id)
    elif state == "FAILED":
        attempt.update(errorCode="PAYMENT_ERROR", detailedErrorCode="TXN_AUTO_FAILED")
    return attempt


def _order(
    reference: str, amount_paise: int, state: str, stamp: int, attempts: list[dict[str, Any]]
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "merchantId": MERCHANT_ID, "merchantOrderId": reference, "orderId": order_id(reference),
        "state": state, "amount": amount_paise, "payableAmount": amount_paise, "feeAmount": 0,
        "expireAt": stamp + 20 * 60 * 1000, "metaInfo": {}, "paymentDetails": attempts,
    }  # fmt: skip
    if state == "FAILED":
        payload.update(errorCode="PAYMENT_ERROR", detailedErrorCode="TXN_AUTO_FAILED")
    return payload


def _refund(
    event: str, refund_id: str, reference: str, amount_paise: int, stamp: int
) -> dict[str, Any]:
    state = {"pg.refund.failed": "FAILED", "pg.refund.accepted": "CONFIRMED"}.get(
        event, "COMPLETED"
    )
    leg = attempt_of("OMR" + refund_id.encode().hex()[:20], amount_paise, stamp, state)
    return {
        "merchantId": MERCHANT_ID, "merchantRefundId": refund_id,
        "originalMerchantOrderId": reference, "refundId": leg["transactionId"],
        "amount": amount_paise, "state": state, "timestamp": stamp, "paymentDetails": [leg],
    }  # fmt: skip


# --- the status API double: OAuth token, then GET /pg/checkout/v2/order/{id}/status -----------
# Scripted faults answer the status call, never the token (fetched once an hour).


def routes(api: GatewayBooks) -> list[Route]:
    issued: set[str] = set()
    lock = threading.Lock()

    async def token(request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        if not _client_ok(api, form):
            return _invalid_client()
        value = secrets.token_urlsafe(24)
        with lock:
            issued.add(value)
        now = int(time.time())  # the client's wall clock, not the books' simulated one
        return JSONResponse({
            "access_token": value, "encrypted_access_token": value, "expires_in": None,
            "issued_at": now, "expires_at": now + TOKEN_LIFE_S,
            "session_expires_at": now + TOKEN_LIFE_S, "token_type": "O-Bearer",
        })  # fmt: skip

    def refusal(request: Request) -> Response | None:
        given = request.headers.get("authorization", "")
        with lock:
            known = given.startswith("O-Bearer ") and given[9:] in issued
        if known:
            return None
        return _error(401, "AUTHORIZATION_FAILED", "Authorization failed [message = "
                      "Please check the authorization token and try again]")  # fmt: skip

    async def status(request: Request) -> Response:
        order = api.order(Provider.PHONEPE, request.path_params["merchant_order_id"])
        if order is None:
            return _error(400, "INVALID_MERCHANT_ORDER_ID",
                          "No entry found for given merchant order id")  # fmt: skip
        every = request.query_params.get("details", "false").lower() == "true"
        return JSONResponse(answer_of(order, api.now, every=every))

    checked = guarded(api, Provider.PHONEPE, refusal, status)
    return [
        Route("/identity-manager/v1/oauth/token", token, methods=["POST"]),
        Route("/pg/checkout/v2/order/{merchant_order_id}/status", checked, methods=["GET"]),
    ]


def _client_ok(api: GatewayBooks, form: dict[str, str]) -> bool:
    keys = api.keys
    client_id, version = client_identity(_key(keys, "phonepe_client_id", CLIENT_ID))
    secret = _key(keys, "phonepe_client_secret", CLIENT_SECRET)
    return (
        form.get("grant_type") == "client_credentials"
        and form.get("client_id") == client_id
        and form.get("client_version") == version
        and hmac.compare_digest(form.get("client_secret", "").encode(), secret.encode())
    )


def answer_of(order: Order, now: int, *, every: bool) -> dict[str, Any]:
    """The order as the status API tells it: COMPLETED once an attempt completed; FAILED when
    it expired or its latest attempt failed (the double ends an order with its attempt; the
    real one waits for the order's expiry); else PENDING. ``details=false`` lists only the
    latest attempt."""
    attempts = list(order.payments)
    states = [a.get("state") for a in attempts]
    if "COMPLETED" in states:
        state = "COMPLETED"
    elif order.expired or (states and states[-1] == "FAILED"):
        state = "FAILED"
    else:
        state = "PENDING"
    listed = attempts if every else attempts[-1:]
    return _order(order.reference, order.amount_paise, state, now * 1000, listed)


def _error(status: int, code: str, message: str) -> Response:
    """PhonePe's error shape: ``{"code", "message"}``."""
    return JSONResponse({"code": code, "message": message}, status_code=status)


def _invalid_client() -> Response:
    """The token endpoint's answer to a wrong client id, version or secret (HTTP 400)."""
    return JSONResponse(
        {
            "code": "INVALID_CLIENT", "errorCode": "OIM000",
            "message": "Bad Request: Invalid Client, trackingId: sim",
            "context": {"error_description": "Client authentication failure"},
        },
        status_code=400,
    )  # fmt: skip


def fault(scripted: Fault) -> Response:
    status = scripted.status or 500
    if status == 429:
        return retry_after(_error(429, "TOO_MANY_REQUESTS", "Too many requests"), scripted)
    text = (
        "There is an error trying to process your transaction at the moment. "
        "Please try again in a while."
    )
    return retry_after(_error(status, "INTERNAL_SERVER_ERROR", text), scripted)


def entity(booked: Booked) -> dict[str, Any]:
    """One attempt of the order, in the gateway's words: COMPLETED (default), FAILED or
    PENDING."""
    amount = booked.paid_paise or booked.order.amount_paise
    return attempt_of(booked.payment_id, amount, booked.now * 1000, booked.status or "COMPLETED")


# --- the storm's story -------------------------------------------------------------------------


def story(
    told: Story, gateway: Signer, options: StormOptions, rng: random.Random
) -> list[Delivery]:
    """A failed attempt sometimes, then the order completed by another. No refunds: a refund
    callback names no payment, and the books hold none to confirm it by."""
    buy = told.purchase

    def event(name: str, transaction_id: str) -> Delivery:
        return delivery(gateway, name, merchant_order_id=buy.reference,
                        amount_paise=buy.amount_paise, transaction_id=transaction_id)  # fmt: skip

    out: list[Delivery] = []
    if rng.random() < options.failed_attempt_rate:
        out.append(event("checkout.transaction.attempt.failed", new_payment_id()))
    paid = new_payment_id()
    out.append(event("checkout.order.completed", paid))
    told.captured.append(paid)
    return out


# --- the demo's scenarios -----------------------------------------------------------------------


def confirmed(stage: Stage) -> Result:
    """PhonePe's callback twice: answered at once, applied only once its order status API
    reports the payment (the next reconciliation pass): one order."""
    buy = stage.merchant.buy(Provider.PHONEPE, {"TEA-ASSAM": 1}, judged.CUSTOMER)
    paid = stage.vouch(buy, new_payment_id())
    stage.books.pay(buy, paid)
    callback = delivery(stage.gateway, "checkout.order.completed", merchant_order_id=buy.reference,
                        amount_paise=buy.amount_paise, transaction_id=paid)  # fmt: skip
    runs = [stage.courier.deliver(callback) for _ in range(2)]
    before = len(stage.merchant.orders(buy.cart_id))
    tally = stage.reconcile()
    return judged.result(
        "PhonePe callback twice, confirmed by its API",
        runs,
        [
            judged.expect(judged.finals(*runs), ["confirming", "duplicate"]),
            (before == 0, f"{before} orders before the API confirmed the callback"),
            (tally.confirmed[Provider.PHONEPE] >= 1, f"confirmation: {tally.summary()}"),
            judged.one_order(stage, buy, paid),
        ],
    )


def forged(stage: Stage) -> Result:
    """A callback with PhonePe's very header for an order nobody paid (the header is the same
    on every callback: whoever saw one can write any body under it): nothing is ordered."""
    buy = stage.merchant.buy(Provider.PHONEPE, {"HONEY-500": 1}, judged.CUSTOMER)
    callback = delivery(stage.gateway, "checkout.order.completed", merchant_order_id=buy.reference,
                        amount_paise=buy.amount_paise)  # fmt: skip
    run = stage.courier.deliver(callback)
    stage.reconcile()
    orders = len(stage.merchant.orders(buy.cart_id))
    return judged.result(
        "PhonePe callback forged under its header",
        [run],
        [
            judged.expect(judged.finals(run), ["confirming"]),
            (orders == 0, "no order" if orders == 0 else f"{orders} orders"),
        ],
    )


SIMULATOR = Simulator(
    provider=Provider.PHONEPE,
    new_payment_id=new_payment_id,
    webhook_secrets=lambda keys: (_key(keys, "phonepe", WEBHOOK_CREDENTIAL),),
    api_keys=lambda keys: (
        _key(keys, "phonepe_client_id", CLIENT_ID),
        _key(keys, "phonepe_client_secret", CLIENT_SECRET),
    ),
    routes=routes,
    entity=entity,
    payment_key="transactionId",
    fault=fault,
    retry_schedule=(60.0, 300.0, 900.0, 3600.0),  # none published: PayU's guess
    story=story,
    scenarios=(confirmed, forged),
    payment_delivery=payment_delivery,
)

__all__ = [
    "CLIENT_ID",
    "CLIENT_SECRET",
    "SIMULATOR",
    "WEBHOOK_CREDENTIAL",
    "answer_of",
    "attempt_of",
    "delivery",
    "new_payment_id",
    "order_id",
    "routes",
]

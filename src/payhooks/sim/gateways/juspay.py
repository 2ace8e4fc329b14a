"""Juspay, simulated: order and transaction webhooks under HTTP Basic (the username and password
set in Juspay's dashboard; nothing signs the body), its Order Status API, and its story in the
storm. A Juspay payment is one attempt of the merchant's order, ``<merchant>-<order>-<n>``.

Every Juspay webhook is unconfirmed: payhooks applies what the Order Status API says, so a
story's payments must also be in the double's books (``GatewayApi.pay``) to take effect."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import re
import secrets
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payhooks.events import Provider
from payhooks.gateways.juspay.adapter import authorization
from payhooks.sim import stage as judged
from payhooks.sim.deliveries import Delivery, Paid, bank_reference
from payhooks.sim.gateways.base import Booked, Simulator, guarded, retry_after
from payhooks.sim.parts import (
    ApiKeyValues,
    Fault,
    GatewayBooks,
    Order,
    SecretValues,
    Signer,
    StormOptions,
    Story,
)
from payhooks.sim.stage import Result, Stage

MERCHANT_ID = "payhooks_demo"
WEBHOOK_CREDENTIAL = "payhooks_demo:juspay-demo-webhook-password"
API_KEY = "juspay_demo_api_key"


def webhook_credential(keys: SecretValues) -> str:
    """The ``username:password`` deliveries carry: ``GatewaySecrets.juspay`` when the keys
    name one, else the demo's."""
    return str(getattr(keys, "juspay", WEBHOOK_CREDENTIAL))


def api_keys(keys: ApiKeyValues) -> tuple[str, str]:
    """The merchant id and API key the double accepts: ``ApiKeys.juspay_merchant_id`` and
    ``juspay_api_key`` when the keys name them, else the demo's."""
    merchant = getattr(keys, "juspay_merchant_id", MERCHANT_ID)
    return str(merchant), str(getattr(keys, "juspay_api_key", API_KEY))


def new_payment_id() -> str:
    """An attempt's ``txn_id`` for an order the simulator did not name."""
    return f"{MERCHANT_ID}-ph_{secrets.token_hex(8)}-1"


def txn_id(order_id: str, attempt: int = 1) -> str:
    return f"{MERCHANT_ID}-{order_id}-{attempt}"


def _when(unix: int) -> str:
    """Juspay's timestamps: ISO-8601 UTC to the second (``2023-08-10T07:00:48Z``)."""
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- deliveries ------------------------------------------------------------------------------

_TXN_EVENTS = frozenset({"TXN_CHARGED", "TXN_FAILED"})


def delivery(
    gateway: Signer,
    event_name: str,
    *,
    order_id: str,
    txn: str,
    amount_paise: int,
    status: str = "CHARGED",
    refunds: tuple[tuple[str, int], ...] = (),
    event_id: str | None = None,
    credential: str | None = None,
) -> Delivery:
    """A Juspay webhook: ``content.order`` (``content.txn`` for TXN_CHARGED and TXN_FAILED),
    amounts in rupees as JSON numbers; ``refunds`` as (unique_request_id, paise), each
    SUCCESS. ``credential`` overrides the configured ``username:password``."""
    when = _when(gateway.now)
    if event_name in _TXN_EVENTS:
        content = {"txn": _txn(order_id=order_id, txn=txn, amount_paise=amount_paise,
                               status=status, created=when)}  # fmt: skip
    else:
        content = {"order": _order(order_id=order_id, txn=txn, amount_paise=amount_paise,
                                   status=status, created=when, refunds=refunds)}  # fmt: skip
    envelope = {
        "id": event_id or "evt_V2_" + secrets.token_hex(16),
        "event_name": event_name,
        "date_created": when,
        "content": content,
    }
    headers = {
        "content-type": "application/json",
        "authorization": authorization(credential or webhook_credential(gateway.keys)),
    }
    return Delivery(
        provider=Provider.JUSPAY,
        body=_json(envelope).encode(),
        headers=headers,
        label=f"juspay {event_name} {txn}",
    )


def payment_delivery(gateway: Signer, paid: Paid) -> Delivery:
    """``Simulator.payment_delivery``: ``ORDER_SUCCEEDED`` (CHARGED) or ``ORDER_FAILED``."""
    status = {"captured": "CHARGED", "failed": "AUTHORIZATION_FAILED"}[paid.what]
    name = paid.event or {"captured": "ORDER_SUCCEEDED", "failed": "ORDER_FAILED"}[paid.what]
    return delivery(
        gateway,
        name,
        order_id=paid.reference,
        txn=paid.payment_id,
        amount_paise=paid.amount_paise,
        status=status,
    )


def _order(
    *,
    order_id: str,
    txn: str,
    amount_paise: int,
    status: str,
    created: str,
    refunds: tuple[tuple[str, int], ...] = (),
) -> dict[str, Any]:
    """The order object, as the Order Status API answers and ``content.order`` carries it."""
    refunded = sum(paise for _, paise in refunds)
    found: dict[str, Any] = {
        "id": "ordeh_" + _digest(order_id, 32), "order_id": order_id, "merchant_id": MERCHANT_ID,
        "customer_id": "cst_demo", "customer_email": "buyer@example.com",
        "customer_phone": "9999999999", "product_id": "", "return_url": "",
        "status": status, "status_id": _STATUS_IDS.get(status, 10),
        "amount": _Rupees(amount_paise), "effective_amount": _Rupees(amount_paise),
        "amount_refunded": _Rupees(refunded), "refunded": refunded >= amount_paise,
        "currency": "INR", "date_created": created, "txn_id": txn,
        "txn_uuid": "moz" + _digest(txn, 16), "payment_method_type": "UPI",
        "payment_method": "UPI", "auth_type": "", "gateway_id": 23,
        "bank_error_code": "", "bank_error_message": "", "udf1": "", "udf2": "",
        "payment_gateway_response": _gateway_response(txn, created, status),
        "txn_detail": _txn(order_id=order_id, txn=txn, amount_paise=amount_paise,
                           status=status, created=created),
    }  # fmt: skip
    if refunds:
        found["refunds"] = [_refund(ident, paise, created) for ident, paise in refunds]
    return found


def _txn(
    *, order_id: str, txn: str, amount_paise: int, status: str, created: str
) -> dict[str, Any]:
    return {
        "txn_id": txn, "txn_uuid": "moz" + _digest(txn, 16), "order_id": order_id,
        "status": status, "status_id": _STATUS_IDS.get(status, 10),
        "txn_amount": _Rupees(amount_paise), "net_amount": _Rupees(amount_paise),
        "surcharge_amount": None, "tax_amount": None, "currency": "INR", "gateway": "RAZORPAY",
        "gateway_id": 23, "express_checkout": True, "redirect": True, "created": created,
        "error_code": "" if status == "CHARGED" else "JP_101",
        "error_message": "" if status == "CHARGED" else "Authorization failed",
        "payment_method_type": "UPI", "payment_method": "UPI",
        "payment_gateway_response": _gateway_response(txn, created, status),
    }  # fmt: skip


def _gateway_response(txn: str, created: str, status: str) -> dict[str, Any]:
    paid = status == "CHARGED"
    return {
        "txn_id": txn, "created": created, "resp_code": "captured" if paid else "FAILED",
        "resp_message": "", "auth_id_code": "NA",
        "rrn": bank_reference(txn) if paid else "NA",
        "epg_txn_id": "pay_" + secrets.token_hex(7) if paid else "NA",
    }  # fmt: skip


def _refund(unique_request_id: str, paise: int, created: str) -> dict[str, Any]:
    return {
        "id": unique_request_id, "unique_request_id": unique_request_id,
        "amount": _Rupees(paise), "status": "SUCCESS", "ref": "rfnd_" + secrets.token_hex(7),
        "created": created, "error_code": None, "error_message": "processed",
        "sent_to_gateway": True, "initiated_by": "API", "refund_source": "RAZORPAY",
        "refund_type": "STANDARD", "arn": "7" + bank_reference(unique_request_id) + "0" * 10,
    }  # fmt: skip


def _digest(text: str, length: int) -> str:
    """Juspay's own ids for an order or attempt, the same in every delivery of it."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


_STATUS_IDS = {"NEW": 10, "CHARGED": 21, "PENDING_VBV": 23, "AUTHORIZATION_FAILED": 27}


class _Rupees:
    """A rupee amount Juspay writes as a JSON number (``1``, ``8``, ``665.34``): placed as
    text by ``_json``, never through float."""

    __slots__ = ("paise",)

    def __init__(self, paise: int) -> None:
        self.paise = paise

    def text(self) -> str:
        whole, part = divmod(self.paise, 100)
        return str(whole) if part == 0 else f"{Decimal(self.paise) / 100:.2f}"


def _json(doc: object) -> str:
    text = json.dumps(doc, default=lambda o: f"@@{o.paise}@@")
    return re.sub(r'"@@(\d+)@@"', lambda m: _Rupees(int(m[1])).text(), text)


# --- the status API double: GET /orders/{order_id}, HTTP Basic (API key, empty password) -------


def routes(api: GatewayBooks) -> list[Route]:
    def refusal(request: Request) -> Response | None:
        if _authorised(request, *api_keys(api.keys)):
            return None
        return _error(401, "access_denied", "UNAUTHORIZED", "Invalid API Key. Please pass "
                      "a valid and active api key.")  # fmt: skip

    async def order_status(request: Request) -> Response:
        found = api.order(Provider.JUSPAY, request.path_params["order_id"])
        if found is None:
            return _not_created(request.path_params["order_id"])
        return Response(_json(_answer(found, api.now)), media_type="application/json")

    checked = guarded(api, Provider.JUSPAY, refusal, order_status)
    return [Route("/orders/{order_id}", checked, methods=["GET"])]


def _authorised(request: Request, merchant_id: str, api_key: str) -> bool:
    """Basic with the API key as username and an empty password (``key:``; Juspay's Node SDK
    leaves the colon out, which is taken too), and this merchant's ``x-merchantid``."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    try:
        given = base64.b64decode(token, validate=True).decode()
    except ValueError:
        return False
    same_key = hmac.compare_digest(given.removesuffix(":"), api_key)
    merchant = request.headers.get("x-merchantid", "")
    return scheme.lower() == "basic" and same_key and hmac.compare_digest(merchant, merchant_id)


def _answer(order: Order, now: int) -> dict[str, Any]:
    """The order as it stands: the attempt booked last (Juspay reports one), or NEW before any."""
    if order.payments:
        return dict(order.payments[-1])
    found = _order(order_id=order.reference, txn="", amount_paise=order.amount_paise,
                   status="NEW", created=_when(now))  # fmt: skip
    for name in ("txn_id", "txn_uuid", "txn_detail", "payment_gateway_response"):
        found.pop(name)
    return found


def _error(status: int, error_code: str, code: str, message: str) -> Response:
    """Juspay's error shape: ``{status, error_code, error_message, error_info{code, ...}}``."""
    body = {
        "status": "error", "error_code": error_code, "error_message": message,
        "error_info": {"category": "USER_ERROR" if status < 500 else "SERVER_ERROR",
                       "request_id": secrets.token_hex(8), "developer_message": message,
                       "user_message": message, "code": code},
    }  # fmt: skip
    return JSONResponse(body, status_code=status)


def _not_created(order_id: str) -> Response:
    """Juspay's answer for an order id it never created, as its Order Status API's error table
    prints it: HTTP 400, the order's own status ``NOT_FOUND`` (id 40) and its id, and
    ``error_info``. A path it does not serve is Starlette's plain 404, as Juspay's is."""
    info = {"user_message": "Order Not Found", "developer_message": "Order Not Found",
            "code": "RESOURCE_NOT_FOUND", "category": "USER_ERROR"}  # fmt: skip
    body = {"status": "NOT_FOUND", "error_info": info, "status_id": 40, "order_id": order_id}
    return JSONResponse(body, status_code=400)


def fault(scripted: Fault) -> Response:
    """Juspay documents no 429 or 5xx body: its error shape, and ``retry-after`` if scripted."""
    status = scripted.status or 500
    if status == 429:
        return retry_after(_error(429, "too_many_requests", "TOO_MANY_REQUESTS",
                                  "Too many requests"), scripted)  # fmt: skip
    return retry_after(_error(status, "internal_error", "INTERNAL_SERVER_ERROR",
                              "Something went wrong"), scripted)  # fmt: skip


def entity(booked: Booked) -> dict[str, Any]:
    """The order object as the Order Status API answers it once ``booked`` was attempted."""
    found = _order(order_id=booked.order.reference, txn=booked.payment_id,
                   amount_paise=booked.order.amount_paise, status=booked.status or "CHARGED",
                   created=_when(booked.now))  # fmt: skip
    if booked.paid_paise is not None:
        found["effective_amount"] = _Rupees(booked.paid_paise)
    return found


# --- the storm's story -------------------------------------------------------------------------


def story(
    told: Story, gateway: Signer, options: StormOptions, rng: random.Random
) -> list[Delivery]:
    """A failed first attempt now and then (TXN_FAILED), the charged attempt as ORDER_SUCCEEDED
    and, half the time, TXN_CHARGED too; sometimes a refund of it (ORDER_REFUNDED)."""
    buy = told.purchase

    def event(name: str, attempt: int, status: str = "CHARGED", **more: Any) -> Delivery:
        return delivery(gateway, name, order_id=buy.reference, txn=txn_id(buy.reference, attempt),
                        amount_paise=buy.amount_paise, status=status, **more)  # fmt: skip

    out: list[Delivery] = []
    attempt = 1
    if rng.random() < options.failed_attempt_rate:
        out.append(event("TXN_FAILED", attempt, "AUTHORIZATION_FAILED"))
        attempt += 1
    paid = txn_id(buy.reference, attempt)
    out.append(event("ORDER_SUCCEEDED", attempt))
    if rng.random() < 0.5:
        out.append(event("TXN_CHARGED", attempt))
    told.captured.append(paid)
    if rng.random() < options.refund_rate:
        partial = rng.random() < 0.5
        refund = max(1, buy.amount_paise // 2) if partial else buy.amount_paise
        out.append(event("ORDER_REFUNDED", attempt, refunds=((f"rf_{paid}", refund),)))
        (told.partly_refunded if partial else told.refunded).append(paid)
    return out


# --- the demo's scenario ------------------------------------------------------------------------


def confirmed(stage: Stage) -> Result:
    """ORDER_SUCCEEDED and TXN_CHARGED for one attempt, under Basic credentials only: answered
    at once, applied once Juspay's Order Status API reports the order charged: one order. A
    forged ORDER_SUCCEEDED under the same credentials for an unpaid order orders nothing."""
    buy = stage.merchant.buy(Provider.JUSPAY, {"MUG-CLAY": 1}, judged.CUSTOMER)
    paid = stage.vouch(buy, txn_id(buy.reference))
    stage.books.pay(buy, paid)
    unpaid = stage.merchant.buy(Provider.JUSPAY, {"TEA-ASSAM": 1}, judged.CUSTOMER)

    def event(name: str, order: str) -> Delivery:
        return delivery(stage.gateway, name, order_id=order, txn=txn_id(order),
                        amount_paise=buy.amount_paise)  # fmt: skip

    runs = [stage.courier.deliver(event(name, buy.reference))
            for name in ("ORDER_SUCCEEDED", "TXN_CHARGED")]  # fmt: skip
    forged = stage.courier.deliver(event("ORDER_SUCCEEDED", unpaid.reference))
    stage.reconcile()
    orders = len(stage.merchant.orders(unpaid.cart_id))
    return judged.result(
        "Juspay webhooks confirmed by its API; one forged",
        [*runs, forged],
        [
            judged.expect(judged.finals(*runs, forged), ["confirming"] * 3),
            (orders == 0, f"the forged webhook made {orders} orders"),
            judged.one_order(stage, buy, paid),
        ],
    )


def told_order(told: list[Delivery]) -> dict[str, Any] | None:
    """``Simulator.told_order``: of the callbacks' ``content.order`` objects CHARGED, the one
    with the most refunds (the last a story sends)."""
    orders = [json.loads(d.body).get("content", {}).get("order") for d in told]
    last = [o for o in orders if isinstance(o, dict) and o.get("status") == "CHARGED"]
    return max(last, key=lambda o: len(o.get("refunds") or [])) if last else None


SIMULATOR = Simulator(
    provider=Provider.JUSPAY,
    new_payment_id=new_payment_id,
    webhook_secrets=lambda keys: (webhook_credential(keys),),
    api_keys=api_keys,
    routes=routes,
    entity=entity,
    payment_key="txn_id",
    fault=fault,
    # Juspay publishes no schedule for Express Checkout; its UPI In-App one: 16 tries in 24 h.
    retry_schedule=(60.0, 300.0, 300.0, *(600.0,) * 5, *(3600.0,) * 5, *(21600.0,) * 3),
    story=story,
    scenarios=(confirmed,),
    payment_delivery=payment_delivery,
    told_order=told_order,
)

"""Razorpay, simulated: ``payment.*``, ``order.paid`` and ``refund.processed`` deliveries
signed with the webhook secret, its order-payments status API, and its story in the storm.
The demo's general scenarios are played on Razorpay (``sim/demo.py``)."""

from __future__ import annotations

import base64
import hmac
import json
import random
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payhooks.events import Provider
from payhooks.gateways import razorpay
from payhooks.sim import parts
from payhooks.sim.deliveries import Delivery, Disputed, Paid, bank_reference
from payhooks.sim.gateways.base import Booked, Simulator, guarded, retry_after
from payhooks.sim.parts import Fault, GatewayBooks, Signer, StormOptions, Story


def new_payment_id() -> str:
    return "pay_" + secrets.token_hex(7)


# --- deliveries ------------------------------------------------------------------------------


def delivery(
    gateway: Signer,
    event: str,
    *,
    payment_id: str,
    order_id: str,
    amount_paise: int,
    currency: str = "INR",
    refund_id: str | None = None,
    refund_amount_paise: int | None = None,
    event_id: str | None = None,
    with_event_id: bool = True,
) -> Delivery:
    """A Razorpay event; ``x-razorpay-event-id`` is new per event unless given. A refund
    is of the whole payment unless ``refund_amount_paise`` says otherwise."""
    money = {"amount": amount_paise, "currency": currency, "created_at": gateway.now}
    payload: dict[str, object] = {
        "payment": {"entity": _payment(event, payment_id, order_id, money)}
    }
    contains = ["payment"]
    if event == "order.paid":
        payload["order"] = {"entity": _order(order_id, money)}
        contains.append("order")
    if refund_id is not None:
        refunded = {**money, "amount": refund_amount_paise or amount_paise}
        payload["refund"] = {"entity": _refund(refund_id, payment_id, refunded)}
        contains.insert(0, "refund")
    envelope = _envelope(event, contains, payload, gateway.now)
    sent_as = (event_id or _new_event_id()) if with_event_id else None
    return _signed(gateway, envelope, payment_id, sent_as)


def payment_delivery(gateway: Signer, paid: Paid) -> Delivery:
    """``Simulator.payment_delivery``: ``payment.captured``, ``.authorized`` or ``.failed``."""
    names = {
        "captured": "payment.captured",
        "authorized": "payment.authorized",
        "failed": "payment.failed",
    }
    return delivery(
        gateway,
        paid.event or names[paid.what],
        payment_id=paid.payment_id,
        order_id=paid.reference,
        amount_paise=paid.amount_paise,
    )


_REFUND_EVENTS = {"pending": "refund.created", "processed": "refund.processed",
                  "failed": "refund.failed"}  # fmt: skip
"""The refund webhook Razorpay sends for a refund in each status (its ``refund.*`` events)."""


def refund_delivery(
    gateway: Signer, refund: dict[str, Any], *, payment: dict[str, Any] | None = None
) -> Delivery:
    """``Simulator.refund_delivery``: ``refund.created``, ``.processed`` or ``.failed`` by the
    refund's ``status``, its entity as the refund API made it (with the ``notes`` the call
    sent), beside the payment it refunds (``payment``: its entity as the double keeps it; else
    one of the refund's amount), its event id new."""
    money = {"amount": refund["amount"], "currency": refund.get("currency", "INR"),
             "created_at": gateway.now}  # fmt: skip
    paid = payment or _payment("payment.captured", str(refund["payment_id"]), "", money)
    event = _REFUND_EVENTS[str(refund["status"])]
    payload: dict[str, object] = {"refund": {"entity": refund}, "payment": {"entity": paid}}
    envelope = _envelope(event, ["refund", "payment"], payload, gateway.now)
    return _signed(gateway, envelope, str(refund["id"]), _new_event_id())


_DISPUTE_EVENTS = {
    "opened": ("payment.dispute.created", "open"),
    "under_review": ("payment.dispute.under_review", "under_review"),
    "action_required": ("payment.dispute.action_required", "open"),
    "won": ("payment.dispute.won", "won"),
    "lost": ("payment.dispute.lost", "lost"),
    "closed": ("payment.dispute.closed", "closed"),
}


def dispute_delivery(gateway: Signer, disputed: Disputed) -> Delivery:
    """``Simulator.dispute_delivery``: ``payment.dispute.*`` as Razorpay's documentation
    prints it (the payment disputed and the dispute's entity; ``action_required`` with the
    status still ``open``; ``amount_deducted`` the amount once lost), its event id new."""
    event, status = _DISPUTE_EVENTS[disputed.what]
    money = {"amount": disputed.amount_paise, "currency": "INR", "created_at": gateway.now}
    payment = _payment("payment.captured", disputed.payment_id, disputed.reference, money)
    payment["order_id"] = disputed.reference or None  # some of Razorpay's samples name none
    entity = {
        "id": disputed.dispute_id,
        "entity": "dispute",
        "payment_id": disputed.payment_id,
        "amount": disputed.amount_paise,
        "currency": "INR",
        "amount_deducted": disputed.amount_paise if disputed.what == "lost" else 0,
        "reason_code": "goods_or_services_not_received_or_partially_received",
        "respond_by": disputed.respond_by,
        "status": status,
        "phase": disputed.phase,
        "created_at": gateway.now,
    }
    payload: dict[str, object] = {"payment": {"entity": payment}, "dispute": {"entity": entity}}
    envelope = _envelope(event, ["payment", "dispute"], payload, disputed.reported_at)
    return _signed(gateway, envelope, disputed.dispute_id, _new_event_id())


def _envelope(
    event: str, contains: list[str], payload: dict[str, object], created_at: int
) -> dict[str, object]:
    """Razorpay's event envelope, the same around every webhook it sends."""
    return {
        "entity": "event",
        "account_id": "acc_demo",
        "event": event,
        "contains": contains,
        "payload": payload,
        "created_at": created_at,
    }


def _signed(
    gateway: Signer, envelope: dict[str, object], about: str, event_id: str | None
) -> Delivery:
    """``envelope`` as Razorpay sends every webhook: signed with the webhook secret, under
    ``event_id`` (``x-razorpay-event-id``) unless None, labelled with the id it is ``about``."""
    body = json.dumps(envelope).encode() + b"\n"
    headers = {
        "content-type": "application/json",
        "x-razorpay-signature": razorpay.sign(body, gateway.keys.razorpay),
    }
    if event_id is not None:
        headers["x-razorpay-event-id"] = event_id
    label = f"razorpay {envelope['event']} {about}"
    return Delivery(provider=Provider.RAZORPAY, body=body, headers=headers, label=label)


def _new_event_id() -> str:
    return "evt_" + secrets.token_hex(7)


def _payment(
    event: str, payment_id: str, order_id: str, money: dict[str, object]
) -> dict[str, object]:
    status = {"payment.authorized": "authorized", "payment.failed": "failed"}.get(event, "captured")
    return {
        "id": payment_id,
        "entity": "payment",
        **money,
        "status": status,
        "order_id": order_id,
        "international": False,
        "method": "upi",
        "amount_refunded": 0,
        "refund_status": None,
        "captured": status == "captured",
        "acquirer_data": {"rrn": bank_reference(payment_id)},
        "email": "buyer@example.com",
        "contact": "+919999999999",
        "notes": [],
        "fee": 2,
        "tax": 0,
        "error_code": None,
    }


def _order(order_id: str, money: dict[str, object]) -> dict[str, object]:
    return {
        "id": order_id,
        "entity": "order",
        **money,
        "amount_paid": money["amount"],
        "amount_due": 0,
        "receipt": None,
        "status": "paid",
        "attempts": 1,
        "notes": [],
    }


def _refund(refund_id: str, payment_id: str, money: dict[str, object]) -> dict[str, object]:
    return {
        "id": refund_id,
        "entity": "refund",
        **money,
        "payment_id": payment_id,
        "notes": [],
        "receipt": None,
        "status": "processed",
        "speed_processed": "normal",
        "speed_requested": "normal",
        "acquirer_data": {"arn": "7" + bank_reference(refund_id) + "0" * 10},
    }


# --- the status API double: GET /v1/orders/{id}/payments, HTTP basic auth ----------------------


def routes(api: GatewayBooks) -> list[Route]:
    async def payments(request: Request) -> Response:
        order = api.order(Provider.RAZORPAY, request.path_params["order_id"])
        return _found(None if order is None else _collection(list(order.payments)))

    async def refund(request: Request) -> Response:
        """``POST /v1/payments/{id}/refund``: idempotent under ``X-Refund-Idempotency``."""
        payment_id = request.path_params["payment_id"]
        paid = api.payment_of(Provider.RAZORPAY, payment_id)
        if paid is None:
            return _error(400, _UNKNOWN_ID)
        if paid.get("status") != "captured":
            return _error(400, "The payment status should be captured for action to be taken")
        try:
            asked = json.loads(await request.body())
        except ValueError:
            return _error(400, "The request body is not valid JSON")
        amount = asked.get("amount", paid["amount"]) if isinstance(asked, dict) else None
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            return _error(400, "The amount must be a positive integer in paise")
        key = request.headers.get("x-refund-idempotency") or f"none:{secrets.token_hex(8)}"
        if len(key) < 10:
            return _error(400, "The idempotency key must be at least 10 characters long.")

        def make(n: int) -> dict[str, Any]:
            money = {"amount": amount, "currency": paid.get("currency", "INR"),
                     "created_at": api.now}  # fmt: skip
            made = _refund(f"rfnd_{payment_id[-8:]}{n:06d}", payment_id, money)
            status = api.refund_status(Provider.RAZORPAY)
            return {**made, "notes": asked.get("notes") or [], "status": status}

        captured = int(paid["amount"])
        asked_as = parts.RefundAsked(provider=Provider.RAZORPAY, payment_id=payment_id, key=key,
                                     body=asked, amount_paise=amount,
                                     captured_paise=captured)  # fmt: skip
        made, refusal = api.refund_once(asked_as, make)
        if refusal is not None:
            return _error(400, _REFUSALS[refusal])
        late = await api.after_acting(Provider.RAZORPAY)
        return late if late is not None else JSONResponse(made)

    async def capture(request: Request) -> Response:
        """``POST /v1/payments/{id}/capture``: an authorised payment, for its whole amount."""
        payment_id = request.path_params["payment_id"]
        try:
            asked = json.loads(await request.body())
        except ValueError:
            return _error(400, "The request body is not valid JSON")
        found, refusal = api.capture_once(
            Provider.RAZORPAY, payment_id, asked.get("amount") if isinstance(asked, dict) else None
        )
        if refusal is not None:
            return _error(400, _CAPTURE_REFUSALS.get(refusal, refusal))
        late = await api.after_acting(Provider.RAZORPAY)
        return late if late is not None else JSONResponse(found)

    async def payment(request: Request) -> Response:
        """``GET /v1/payments/{id}``: the payment entity."""
        return _found(api.payment_of(Provider.RAZORPAY, request.path_params["payment_id"]))

    async def refunds_of(request: Request) -> Response:
        """``GET /v1/payments/{id}/refunds``: the payment's refunds, a collection."""
        made = api.money.refunds.get((Provider.RAZORPAY, request.path_params["payment_id"]), [])
        return JSONResponse(_collection(list(made)))

    async def refund_of(request: Request) -> Response:
        """``GET /v1/payments/{id}/refunds/{refund_id}``: one refund of the payment."""
        made = api.money.refunds.get((Provider.RAZORPAY, request.path_params["payment_id"]), [])
        return _found(next((r for r in made if r["id"] == request.path_params["refund_id"]), None))

    return [
        *settlement_routes(api),
        _route(api, "/v1/orders/{order_id}/payments", payments),
        _route(api, "/v1/payments/{payment_id}/refund", refund, "POST"),
        _route(api, "/v1/payments/{payment_id}/refunds", refunds_of),
        _route(api, "/v1/payments/{payment_id}/refunds/{refund_id}", refund_of),
        _route(api, "/v1/payments/{payment_id}/capture", capture, "POST"),
        _route(api, "/v1/payments/{payment_id}", payment),
    ]


# --- settlements: the webhook, GET /v1/settlements/recon/combined, GET /v1/settlements/{id} -----


def settlement_routes(api: GatewayBooks) -> list[Route]:
    """The settlement report as Razorpay documents it (razorpay.com/docs/api/settlements):
    ``year`` and ``month`` required, ``day`` optional, ``count`` (at most 1000) and ``skip``."""

    async def recon(request: Request) -> Response:
        asked = request.query_params
        try:
            year, month = int(asked["year"]), int(asked["month"])
            day = int(asked["day"]) if "day" in asked else None
            count, skip = int(asked.get("count", "10")), int(asked.get("skip", "0"))
        except (KeyError, ValueError):
            return _error(400, "The year and month fields are required.")
        if not 1 <= count <= 1000 or skip < 0:
            return _error(400, "The count may not be greater than 1000.")
        prefix = f"{year:04d}-{month:02d}" + (f"-{day:02d}" if day is not None else "")
        made = [p for p in api.payouts_of(Provider.RAZORPAY) if api.day_of(p).startswith(prefix)]
        items = [recon_item(p, e) for p in made for e in p.entries][skip : skip + count]
        return JSONResponse(_collection(items))

    async def settlement(request: Request) -> Response:
        found = api.payout(Provider.RAZORPAY, request.path_params["settlement_id"])
        return _found(None if found is None else settlement_entity(found))

    return [
        _route(api, "/v1/settlements/recon/combined", recon),
        _route(api, "/v1/settlements/{settlement_id}", settlement),
    ]


def settlement_entity(payout: parts.Payout) -> dict[str, object]:
    """The settlement entity: ``fees`` Razorpay's fees (their tax included, as each line's
    ``fee``), ``tax`` the tax on them."""
    return {
        "id": payout.settlement_id, "entity": "settlement", "amount": payout.amount_paise,
        "status": "processed", "fees": payout.fees_paise + payout.tax_paise,
        "tax": payout.tax_paise, "utr": payout.utr, "created_at": payout.at,
    }  # fmt: skip


def recon_item(payout: parts.Payout, entry: parts.PaidOut) -> dict[str, object]:
    """One recon item, in the fields of Razorpay's sample: a payment's ``payment_id`` is null
    (its ``entity_id`` is the payment), a refund's names its payment."""
    refund = entry.kind == "refund"
    return {
        "entity_id": entry.entry_id, "type": entry.kind,
        "debit": entry.amount_paise if refund else 0,
        "credit": 0 if refund else entry.net_paise, "amount": entry.amount_paise,
        "currency": "INR", "fee": entry.fee_paise + entry.tax_paise, "tax": entry.tax_paise,
        "on_hold": False, "settled": True, "created_at": entry.at, "settled_at": payout.at,
        "settlement_id": payout.settlement_id, "posted_at": None, "credit_type": "default",
        "description": None, "notes": "{}", "payment_id": entry.payment_id if refund else None,
        "settlement_utr": payout.utr, "order_id": entry.order_id, "order_receipt": None,
        "method": "upi", "card_network": None, "card_issuer": None, "card_type": None,
        "dispute_id": None,
    }  # fmt: skip


def settlement_delivery(gateway: Signer, payout: parts.Payout) -> Delivery:
    """``settlement.processed`` for a payout, signed, with a new event id."""
    payload: dict[str, object] = {"settlement": {"entity": settlement_entity(payout)}}
    envelope = _envelope("settlement.processed", ["settlement"], payload, payout.at)
    return _signed(gateway, envelope, payout.settlement_id, _new_event_id())


_UNKNOWN_ID = "The id provided does not exist"

_CAPTURE_REFUSALS = {
    "captured": "This payment has already been captured",
    "amount": "Capture amount must be equal to the amount authorized",
    "unknown": _UNKNOWN_ID,
    "not authorized": "The payment status should be authorized for action to be taken",
}


_REFUSALS = {
    "another body": "Different request with the same idempotency key has already been processed.",
    "fully refunded": "The payment has been fully refunded already.",
    "more than captured": "The refund amount provided is greater than amount captured.",
}
"""Razorpay's own words (razorpay.com/docs/api/refunds, docs/providers.md "Refunds")."""


def _route(
    api: GatewayBooks,
    path: str,
    answer: Callable[[Request], Awaitable[Response]],
    method: str = "GET",
) -> Route:
    """A route of the double behind Razorpay's basic auth, then the next scripted fault."""

    def refusal(request: Request) -> Response | None:
        if _basic_auth_ok(request, api.keys.razorpay_key_id, api.keys.razorpay_key_secret):
            return None
        return _error(401, "The API key provided is invalid")

    return Route(path, guarded(api, Provider.RAZORPAY, refusal, answer), methods=[method])


def _basic_auth_ok(request: Request, user: str, password: str) -> bool:
    header = request.headers.get("authorization", "")
    if not header.startswith("Basic "):
        return False
    try:
        given = base64.b64decode(header[6:]).decode()
    except ValueError:
        return False
    return hmac.compare_digest(given, f"{user}:{password}")


def _error(status: int, description: str) -> Response:
    """Razorpay's error envelope: ``{"error": {code, description, source, step, reason,
    metadata, field}}``; ``code`` is BAD_REQUEST_ERROR for 4xx, SERVER_ERROR for 5xx."""
    code = "SERVER_ERROR" if status >= 500 else "BAD_REQUEST_ERROR"
    error: dict[str, object] = {
        "code": code, "description": description, "source": "NA", "step": "NA",
        "reason": "NA", "metadata": {}, "field": None,
    }  # fmt: skip
    return JSONResponse({"error": error}, status_code=status)


def _collection(items: list[Any]) -> dict[str, object]:
    """Razorpay's list envelope, around payments, refunds and recon items alike."""
    return {"entity": "collection", "count": len(items), "items": items}


def _found(entity: object | None) -> Response:
    """The entity asked for, or Razorpay's answer to an id it does not know."""
    return _error(400, _UNKNOWN_ID) if entity is None else JSONResponse(entity)


def fault(scripted: Fault) -> Response:
    status = scripted.status or 500
    text = "Too many requests" if status == 429 else "The server encountered an error"
    return retry_after(_error(status, text), scripted)


def entity(booked: Booked) -> dict[str, Any]:
    state = booked.status or "captured"
    order, payment_id = booked.order, booked.payment_id
    return {
        "id": payment_id, "entity": "payment", "amount": order.amount_paise, "currency": "INR",
        "status": state, "order_id": order.reference, "invoice_id": None,
        "international": False, "method": "upi", "amount_refunded": 0, "refund_status": None,
        "captured": state in ("captured", "refunded"), "description": None, "card_id": None,
        "bank": None, "wallet": None, "vpa": "buyer@okbank", "email": "buyer@example.com",
        "contact": "+919999999999", "notes": [], "fee": 2, "tax": 0, "error_code": None,
        "error_description": None, "error_source": None, "error_step": None,
        "error_reason": None, "acquirer_data": {"rrn": bank_reference(payment_id)},
        "created_at": booked.now,
    }  # fmt: skip


# --- the storm's story -------------------------------------------------------------------------


def story(
    told: Story, gateway: Signer, options: StormOptions, rng: random.Random
) -> list[Delivery]:
    buy = told.purchase

    def event(
        name: str, payment_id: str, refund_id: str | None = None, refund: int | None = None
    ) -> Delivery:
        return delivery(
            gateway,
            name,
            payment_id=payment_id,
            order_id=buy.reference,
            amount_paise=buy.amount_paise,
            refund_id=refund_id,
            refund_amount_paise=refund,
        )

    out: list[Delivery] = []
    paid = new_payment_id()
    if rng.random() < options.failed_attempt_rate:
        # Half the time the failure is the same payment, authorised late (failed -> captured).
        failed = paid if rng.random() < 0.5 else new_payment_id()
        out.append(event("payment.failed", failed))
    out += [event("payment.authorized", paid), event("payment.captured", paid)]
    if rng.random() < 0.5:
        out.append(event("order.paid", paid))
    told.captured.append(paid)
    if rng.random() < options.double_payment_rate:
        second = new_payment_id()
        out.append(event("payment.captured", second))
        told.captured.append(second)
    if rng.random() < options.refund_rate:
        out = _with_refund(told, out, paid, event, rng)
    return out


def _with_refund(
    told: Story,
    out: list[Delivery],
    paid: str,
    event: Callable[..., Delivery],
    rng: random.Random,
) -> list[Delivery]:
    """A full or partial refund of ``paid``; half the time its webhook comes first, before
    every capture report (the gateway was slow to send those), on top of any reordering."""
    partial = rng.random() < 0.5
    amount = max(1, told.purchase.amount_paise // 2) if partial else None
    refund = event("refund.processed", paid, refund_id="rfnd_" + paid[4:], refund=amount)
    (told.partly_refunded if partial else told.refunded).append(paid)
    told.refunded_paise[paid] += amount or told.purchase.amount_paise
    return [refund, *out] if rng.random() < 0.5 else [*out, refund]


SIMULATOR = Simulator(
    provider=Provider.RAZORPAY,
    new_payment_id=new_payment_id,
    webhook_secrets=lambda keys: (keys.razorpay,),
    api_keys=lambda keys: (keys.razorpay_key_id, keys.razorpay_key_secret),
    routes=routes,
    entity=entity,
    payment_key="id",
    fault=fault,
    # Exponential backoff for 24 hours.
    retry_schedule=tuple(300.0 * 2**n for n in range(8)),
    story=story,
    refund_words=parts.RefundWords(
        name="status", pending="pending", processed="processed", failed="failed"
    ),
    payment_delivery=payment_delivery,
    dispute_delivery=dispute_delivery,
    refund_delivery=refund_delivery,
    captured=lambda entity: int(entity["amount"]) if entity.get("status") == "captured" else None,
    refund_id=lambda refund: str(refund["id"]),
    settlement_delivery=settlement_delivery,
)

"""Cashfree, simulated: payment webhooks in versions 2022-09-01 to 2025-01-01 signed with a
millisecond timestamp, its order and order-payments status API (amounts as two-decimal JSON
numbers), its story in the storm, and the demo's scenario of its duplicates."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import random
import re
import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payhooks.events import Provider
from payhooks.gateways import cashfree
from payhooks.gateways._settlements import INDIA
from payhooks.sim import parts
from payhooks.sim import stage as judged
from payhooks.sim.deliveries import Delivery, Disputed, Paid, bank_reference
from payhooks.sim.gateways.base import Booked, Simulator, numeric_payment_id, retry_after
from payhooks.sim.parts import Fault, GatewayBooks, Order, Signer, StormOptions, Story
from payhooks.sim.stage import Result, Stage

# --- deliveries ------------------------------------------------------------------------------


def delivery(
    gateway: Signer,
    event_type: str,
    *,
    order_id: str,
    cf_payment_id: str,
    order_amount: Decimal,
    payment_status: str = "SUCCESS",
    version: str = "2025-01-01",
    payment_amount: Decimal | None = None,
) -> Delivery:
    """A Cashfree payment webhook in the given version's shape, signed with ms timestamp."""
    paid = order_amount if payment_amount is None else payment_amount
    payment_id: object = int(cf_payment_id) if version <= "2022-09-01" else cf_payment_id
    body = _body(event_type, order_id, payment_id, payment_status, order_amount, paid)
    return _signed(gateway, body, version, f"cashfree {event_type} {cf_payment_id}")


_DISPUTE_WEBHOOKS = {
    "opened": ("DISPUTE_CREATED", "CREATED"),
    "under_review": ("DISPUTE_UPDATED", "UNDER_REVIEW"),
    "action_required": ("DISPUTE_UPDATED", "INSUFFICIENT_EVIDENCE"),
    "won": ("DISPUTE_CLOSED", "MERCHANT_WON"),
    "lost": ("DISPUTE_CLOSED", "MERCHANT_LOST"),
}
"""What each dispute state is as Cashfree sends it (its type, and the state after the phase in
``dispute_status``); Cashfree documents no dispute closed undecided."""


def dispute_delivery(
    gateway: Signer, disputed: Disputed, *, version: str = "2025-01-01"
) -> Delivery:
    """``Simulator.dispute_delivery``: ``DISPUTE_CREATED``, ``_UPDATED`` or ``_CLOSED`` as
    Cashfree's documentation prints them (``cf_payment_id`` a number in every version;
    2025-01-01 adds ``dispute_amount_currency`` and the ``x-idempotency-key`` header)."""
    event_type, state = _DISPUTE_WEBHOOKS[disputed.what]
    phase = disputed.phase.upper()
    dispute: dict[str, object] = {
        "dispute_id": disputed.dispute_id,
        "dispute_type": phase,
        "reason_code": "4855",
        "reason_description": "Goods or Services Not Provided",
        "dispute_amount": "@AMOUNT@",
        "created_at": _ist(gateway.now),
        "updated_at": _ist(disputed.reported_at),
        "respond_by": _ist(disputed.respond_by),
        "dispute_status": f"{phase}_{state}",
        "cf_dispute_remarks": "Dispute is created, please take action",
        "dispute_action_on": "MERCHANT",
    }
    if version >= "2025-01-01":
        dispute["dispute_amount_currency"] = "INR"
    order = {
        "order_id": disputed.reference,
        "order_amount": "@AMOUNT@",
        "order_currency": "INR",
        "cf_payment_id": int(disputed.payment_id),
        "payment_amount": "@AMOUNT@",
        "payment_currency": "INR",
    }
    customer = {"customer_name": "Buyer", "customer_phone": "9999999999",
                "customer_email": "buyer@example.com"}  # fmt: skip
    envelope = {
        "data": {"dispute": dispute, "order_details": order, "customer_details": customer},
        "event_time": _ist(disputed.reported_at),
        "type": event_type,
    }
    rupees = f"{Decimal(disputed.amount_paise) / 100:.2f}"
    body = json.dumps(envelope).replace('"@AMOUNT@"', rupees).encode()
    return _signed(gateway, body, version, f"cashfree {event_type} {disputed.dispute_id}")


def refund_delivery(
    gateway: Signer, refund: dict[str, Any], *, version: str = "2025-01-01"
) -> Delivery:
    """``Simulator.refund_delivery``: ``REFUND_STATUS_WEBHOOK`` about ``refund``, its entity as
    the refund API made it (``cf_refund_id``, the merchant's ``refund_id``, ``order_id``,
    ``refund_amount`` in rupees, ``refund_status``, ...: the webhook's ``data.refund``
    carries the same fields), signed as a payment webhook is."""
    envelope = {"data": {"refund": refund}, "event_time": _ist(gateway.now),
                "type": "REFUND_STATUS_WEBHOOK"}  # fmt: skip
    body = json.dumps(envelope, cls=_Rupees).encode()
    label = f"cashfree REFUND_STATUS_WEBHOOK {refund.get('cf_refund_id')}"
    return _signed(gateway, body, version, label)


def auto_refund_delivery(
    gateway: Signer, refund: dict[str, Any], *, version: str = "2025-01-01"
) -> Delivery:
    """``AUTO_REFUND_STATUS_WEBHOOK``: Cashfree's own refund of a payment (a second payment of
    a paid order, one that failed but took money), ``refund`` its ``data.auto_refund`` as
    Cashfree's "Auto-Refund Webhooks" sample prints it, signed as a payment webhook is."""
    envelope = {"data": {"auto_refund": refund}, "event_time": _ist(gateway.now),
                "type": "AUTO_REFUND_STATUS_WEBHOOK"}  # fmt: skip
    body = json.dumps(envelope, cls=_Rupees).encode()
    label = f"cashfree AUTO_REFUND_STATUS_WEBHOOK {refund.get('cf_refund_id')}"
    return _signed(gateway, body, version, label)


def _signed(gateway: Signer, body: bytes, version: str, label: str) -> Delivery:
    """``body`` signed with a millisecond timestamp, with the headers of ``version``, as a
    payment or dispute webhook's first attempt."""
    headers = {**_signature(gateway, body, version), "x-webhook-attempt": "1"}
    return Delivery(provider=Provider.CASHFREE, body=body, headers=headers, label=label)


def _signature(gateway: Signer, body: bytes, version: str) -> dict[str, str]:
    """The headers that sign ``body`` with a millisecond timestamp, as ``version`` sends them
    (2025-01-01 adds ``x-idempotency-key``)."""
    timestamp = str(gateway.now * 1000)
    headers = {
        "content-type": "application/json",
        "x-webhook-timestamp": timestamp,
        "x-webhook-signature": cashfree.sign(body, timestamp, gateway.keys.cashfree),
        "x-webhook-version": version,
    }
    if version >= "2025-01-01":
        headers["x-idempotency-key"] = base64.b64encode(hashlib.sha256(body).digest()).decode()
    return headers


def payment_delivery(gateway: Signer, paid: Paid) -> Delivery:
    """``Simulator.payment_delivery``: a payment webhook, SUCCESS or FAILED."""
    kind, status = {
        "captured": ("PAYMENT_SUCCESS_WEBHOOK", "SUCCESS"),
        "failed": ("PAYMENT_FAILED_WEBHOOK", "FAILED"),
    }[paid.what]
    return delivery(
        gateway,
        kind,
        order_id=paid.reference,
        cf_payment_id=paid.payment_id,
        order_amount=Decimal(paid.amount_paise) / 100,
        payment_status=status,
    )


def _body(
    event_type: str,
    order_id: str,
    payment_id: object,
    status: str,
    ordered: Decimal,
    paid: Decimal,
) -> bytes:
    """Amounts as Cashfree writes them (``170.00``): placed as text, never through float."""
    data = {
        "order": {
            "order_id": order_id,
            "order_amount": "@ORDER@",
            "order_currency": "INR",
            "order_tags": None,
        },
        "payment": {
            "cf_payment_id": payment_id,
            "payment_status": status,
            "payment_amount": "@PAID@",
            "payment_currency": "INR",
            "payment_message": "00::Transaction success",
            "payment_time": "2025-01-15T12:20:29+05:30",
            "bank_reference": bank_reference(str(payment_id)),
            "auth_id": None,
            "payment_method": {"upi": {"channel": "collect", "upi_id": "buyer@ybl"}},
            "payment_group": "upi",
        },
        "customer_details": {
            "customer_name": None,
            "customer_id": "c1",
            "customer_email": "buyer@example.com",
            "customer_phone": "9999999999",
        },
    }
    text = json.dumps({"data": data, "event_time": "2025-01-15T11:16:10+05:30", "type": event_type})
    return text.replace('"@ORDER@"', f"{ordered:.2f}").replace('"@PAID@"', f"{paid:.2f}").encode()


# --- the status API double: GET /pg/orders/{id} and /pg/orders/{id}/payments --------------------


def routes(api: GatewayBooks) -> list[Route]:
    async def payments(request: Request, found: Order) -> Response:
        return _raw_json(json.dumps(found.payments, cls=_Rupees))

    async def order(request: Request, found: Order) -> Response:
        return _raw_json(json.dumps(_order_body(found), cls=_Rupees))

    async def refund(request: Request) -> Response:
        """``POST /pg/orders/{order_id}/refunds``: ``refund_id`` unique per order. Under an
        ``x-idempotency-key`` header, Cashfree keeps the first result, an error included, and
        answers every later request with that key with it (docs/providers.md, "Refunds")."""
        key = request.headers.get("x-idempotency-key")
        if key is None:
            return await refund_made(request)
        kept = api.replayed.get((Provider.CASHFREE, key))
        if kept is not None:
            return Response(kept[1], status_code=kept[0], media_type="application/json")
        answered = await refund_made(request)
        api.replayed[(Provider.CASHFREE, key)] = (answered.status_code, bytes(answered.body))
        return answered

    async def make_refund(request: Request, found: Order) -> Response:
        paid = [p for p in found.payments if p["payment_status"] == "SUCCESS"]
        if not paid:
            return _not_allowed()
        try:
            asked = json.loads(await request.body(), parse_float=Decimal)
        except ValueError:
            return _error(
                400, "request body is not JSON", "request_invalid", "invalid_request_error"
            )
        refund_id = asked.get("refund_id") if isinstance(asked, dict) else None
        rupees = asked.get("refund_amount") if isinstance(asked, dict) else None
        if not isinstance(refund_id, str) or not 3 <= len(refund_id) <= 40:
            return _error(400, "refund_id : should be 3 to 40 characters", "refund_id_invalid",
                          "invalid_request_error")  # fmt: skip
        if isinstance(rupees, bool) or not isinstance(rupees, int | Decimal) or rupees <= 0:
            return _error(400, "refund_amount : invalid", "refund_amount_invalid",
                          "invalid_request_error")  # fmt: skip
        paise = int(Decimal(rupees) * 100)
        captured = _paise_of(paid[0])
        payment_id = str(paid[0]["cf_payment_id"])

        def make(n: int) -> dict[str, Any]:
            return {
                "cf_payment_id": payment_id, "cf_refund_id": f"{abs(hash(refund_id)) % 10**9}{n}",
                "refund_id": refund_id, "order_id": found.reference, "entity": "refund",
                "refund_amount": _Rupees.amount(paise), "refund_currency": "INR",
                "refund_note": asked.get("refund_note"),
                "refund_status": api.refund_status(Provider.CASHFREE),
                "refund_arn": f"RF{n:010d}", "refund_charge": 0,
                "status_description": "Refund processed", "refund_type": "MERCHANT_INITIATED",
                "refund_splits": [], "metadata": None,
                "created_at": "2025-01-15T12:30:00+05:30",
                "processed_at": "2025-01-15T12:30:05+05:30",
                "refund_mode": "STANDARD",
            }  # fmt: skip

        key = f"{found.reference}:{refund_id}"
        asked_as = {"refund_amount": str(rupees), "refund_id": refund_id}
        asking = parts.RefundAsked(provider=Provider.CASHFREE, payment_id=payment_id, key=key,
                                   body=asked_as, amount_paise=paise, captured_paise=captured,
                                   token=refund_id)  # fmt: skip
        reused = (Provider.CASHFREE, key) in api.money.by_key
        made, refusal = api.refund_once(asking, make)
        if refusal == "another body" or (reused and api.money.reuse_refused):
            return _error(400, "refund_id already exists", "refund_id_already_exists",
                          "invalid_request_error")  # fmt: skip
        if refusal == "fully refunded":
            return _not_allowed()
        if refusal is not None:
            return _error(400, "refund amount is more than the refundable amount",
                          "refund_amount_invalid", "invalid_request_error")  # fmt: skip
        late = await api.after_acting(Provider.CASHFREE)
        return late if late is not None else _raw_json(json.dumps(made, cls=_Rupees))

    async def refund_of(request: Request, found: Order) -> Response:
        """``GET /pg/orders/{order_id}/refunds/{refund_id}``; while ``money.lagging``, not yet
        readable."""
        key = (Provider.CASHFREE, f"{found.reference}:{request.path_params['refund_id']}")
        known = api.money.by_key.get(key)
        if known is None or api.money.lagging:
            return _error(404, "refund does not exist", "refund_not_found",
                          "invalid_request_error")  # fmt: skip
        return _raw_json(json.dumps(known[1], cls=_Rupees))

    refund_made = _of_order(api, make_refund)
    return [
        Route("/pg/settlement/recon", _recon(api), methods=["POST"]),
        Route("/pg/orders/{order_id}/payments", _of_order(api, payments), methods=["GET"]),
        Route("/pg/orders/{order_id}/refunds", refund, methods=["POST"]),
        Route(
            "/pg/orders/{order_id}/refunds/{refund_id}", _of_order(api, refund_of), methods=["GET"]
        ),
        Route("/pg/orders/{order_id}", _of_order(api, order), methods=["GET"]),
    ]


# --- settlements: the webhooks and POST /pg/settlement/recon ------------------------------------

_RECON_LIMIT = 1000


def _recon(api: GatewayBooks) -> Callable[[Request], Awaitable[Response]]:
    """``POST /pg/settlement/recon`` as Cashfree documents it (2025-01-01):
    ``pagination.limit`` (1 to 1000) and ``cursor`` (null for the first page),
    ``filters.start_date`` and ``end_date``; ``cursor`` is null on the last page."""

    async def recon(request: Request) -> Response:
        refused = await _authorised(api, request)
        if refused is not None:
            return refused
        try:
            asked = json.loads(await request.body())
            limit = int(asked["pagination"]["limit"])
            cursor = asked["pagination"].get("cursor")
            start = datetime.fromisoformat(asked["filters"]["start_date"])
            end = datetime.fromisoformat(asked["filters"]["end_date"])
        except (ValueError, KeyError, TypeError):
            return _error(400, "pagination and filters are required", "request_invalid",
                          "invalid_request_error")  # fmt: skip
        if not 1 <= limit <= _RECON_LIMIT:
            return _error(400, "limit should be between 1 and 1000", "request_invalid",
                          "invalid_request_error")  # fmt: skip
        skip = int(base64.b64decode(cursor)) if cursor else 0
        made = [p for p in api.payouts_of(Provider.CASHFREE)
                if start.timestamp() <= p.at <= end.timestamp()]  # fmt: skip
        items = [recon_item(p, e) for p in made for e in p.entries]
        page = items[skip : skip + limit]
        more = skip + limit < len(items)
        after = base64.b64encode(str(skip + limit).encode()).decode() if more else None
        body = {"cursor": after, "limit": limit, "data": page}
        return _raw_json(json.dumps(body, cls=_Rupees))

    return recon


def recon_item(payout: parts.Payout, entry: parts.PaidOut) -> dict[str, object]:
    """One recon item in the 2025-01-01 shape (``event_details``, ``order_details``,
    ``payment_details``, ``settlement_details``, ``refund_details``), rupees as Cashfree
    writes them; a refund is a DEBIT."""
    refund = entry.kind == "refund"
    settled = _ist(payout.at)
    return {
        "event_details": {
            "entity": "recon", "event_id": entry.entry_id,
            "event_type": "REFUND" if refund else "PAYMENT",
            "sale_type": "DEBIT" if refund else "CREDIT",
            "event_amount": _Rupees.amount(entry.amount_paise),
            "event_settlement_amount": _Rupees.amount(abs(entry.net_paise)),
            "event_service_charge": _Rupees.amount(entry.fee_paise),
            "event_service_tax": _Rupees.amount(entry.tax_paise),
            "event_status": "SUCCESS", "event_currency": "INR", "event_time": _ist(entry.at),
        },
        "order_details": {"order_id": entry.order_id, "order_currency": "INR",
                          "order_tags": None},
        "payment_details": {"cf_payment_id": entry.payment_id, "payment_currency": "INR"},
        "settlement_details": {
            "cf_settlement_id": payout.settlement_id, "utr": payout.utr,
            "settlement_date": settled, "settlement_initiated_on": settled,
            "settlement_type": "STANDARD",
        },
        "refund_details": {"refund_id": entry.entry_id if refund else None},
    }  # fmt: skip


def settlement_delivery(gateway: Signer, payout: parts.Payout) -> Delivery:
    """``SETTLEMENT_SUCCESS`` for a payout, in the documented shape, signed."""
    data = {
        "settlement": {
            "adjustment": 0, "amount_settled": _Rupees.amount(payout.amount_paise),
            "payment_amount": _Rupees.amount(sum(e.amount_paise for e in payout.entries
                                                 if e.kind == "payment")),
            "service_charge": _Rupees.amount(payout.fees_paise),
            "service_tax": _Rupees.amount(payout.tax_paise), "settled_on": _ist(payout.at),
            "settlement_type": "STANDARD",
            "settlement_amount": _Rupees.amount(payout.amount_paise),
            "settlement_id": int(payout.settlement_id),
            "settlement_initiated_on": _ist(payout.at), "status": "SUCCESS",
            "utr": payout.utr, "settlement_charge": 0, "settlement_tax": 0, "remarks": None,
        }
    }  # fmt: skip
    event = {"data": data, "event_time": _ist(payout.at), "type": "SETTLEMENT_SUCCESS"}
    body = json.dumps(event, cls=_Rupees).encode()
    headers = _signature(gateway, body, "2025-01-01")
    return Delivery(provider=Provider.CASHFREE, body=body, headers=headers,
                    label=f"cashfree SETTLEMENT_SUCCESS {payout.settlement_id}")  # fmt: skip


def _ist(at: int) -> str:
    """A Unix time as Cashfree writes times: India's, with its offset."""
    return datetime.fromtimestamp(at, UTC).astimezone(INDIA).isoformat(timespec="seconds")


def _paise_of(payment: dict[str, Any]) -> int:
    amount = str(payment["payment_amount"])
    matched = re.fullmatch(r"@@(\d+)@@", amount)
    return int(matched[1]) if matched else int(Decimal(amount) * 100)


def _order_body(order: Order) -> dict[str, object]:
    paid = any(p["payment_status"] == "SUCCESS" for p in order.payments)
    status = "PAID" if paid else "EXPIRED" if order.expired else "ACTIVE"
    return {
        "cf_order_id": str(abs(hash(order.reference)) % 10**10),
        "order_id": order.reference,
        "entity": "order",
        "order_currency": "INR",
        "order_amount": _Rupees.amount(order.amount_paise),
        "order_status": status,
    }


def _of_order(
    api: GatewayBooks, answer: Callable[[Request, Order], Awaitable[Response]]
) -> Callable[[Request], Awaitable[Response]]:
    """A route about the order its path names: ``answer`` given that order, behind what every
    route answers first (``_authorised``) and Cashfree's 404 for an order it does not know."""

    @functools.wraps(answer)
    async def route(request: Request) -> Response:
        refused = await _authorised(api, request)
        if refused is not None:
            return refused
        order = api.order(Provider.CASHFREE, request.path_params["order_id"])
        if order is None:
            return _error(404, "order not found", "order_not_found", "invalid_request_error")
        return await answer(request, order)

    return route


async def _authorised(api: GatewayBooks, request: Request) -> Response | None:
    """What every route answers first: no API version, wrong credentials, or the next
    scripted fault."""
    headers = request.headers
    if not headers.get("x-api-version"):
        return _error(400, "x-api-version missing", "request_invalid", "invalid_request_error")
    given = (headers.get("x-client-id", ""), headers.get("x-client-secret", ""))
    wanted = (api.keys.cashfree_client_id, api.keys.cashfree_api_secret)
    if not all(hmac.compare_digest(a, b) for a, b in zip(given, wanted, strict=True)):
        return _error(401, "authentication Failed", "request_failed", "authentication_error")
    return await api.fault(Provider.CASHFREE)


def _not_allowed() -> Response:
    """Cashfree's 409 to a refund of an order not PAID, more than six months old or refunded
    in full already (docs/providers.md, source [C4])."""
    return _error(409, "refund is not allowed for this order", "refund_not_allowed",
                  "invalid_request_error")  # fmt: skip


def _error(status: int, message: str, code: str, kind: str) -> Response:
    """Cashfree's error shape: ``{message, code, type}`` (``type`` one of
    invalid_request_error, authentication_error, rate_limit_error, api_error)."""
    return JSONResponse({"message": message, "code": code, "type": kind}, status_code=status)


def fault(scripted: Fault) -> Response:
    status = scripted.status or 500
    if status == 429:
        response = _error(429, "Too many requests", "request_failed", "rate_limit_error")
        if scripted.retry_after_date:  # the standard header's date form
            return retry_after(response, scripted)
        response.headers["x-ratelimit-retry"] = str(scripted.retry_after_s or 0)
        return response
    if status in (401, 403):
        return _error(status, "authentication Failed", "authentication_failed",
                      "authentication_error")  # fmt: skip
    if status < 500:  # a request of the merchant's at fault, as Cashfree's 4xx say
        return _error(status, "request failed", "request_failed", "invalid_request_error")
    return _error(status, "internal server error", "internal_error", "api_error")


def entity(booked: Booked) -> dict[str, Any]:
    state = booked.status or "SUCCESS"
    order, payment_id = booked.order, booked.payment_id
    rupees = _Rupees.amount(order.amount_paise)
    found = {
        "cf_payment_id": payment_id, "order_id": order.reference, "entity": "payment",
        "is_captured": state == "SUCCESS", "order_amount": rupees, "order_currency": "INR",
        "payment_group": "upi", "payment_currency": "INR", "payment_amount": rupees,
        "payment_time": "2025-01-15T12:20:29+05:30",
        "payment_completion_time": "2025-01-15T12:20:41+05:30", "payment_status": state,
        "payment_message": "00::Transaction success",
        "bank_reference": bank_reference(payment_id),
        "auth_id": None, "authorization": None,
        "payment_method": {"upi": {"channel": "collect", "upi_id": "buyer@ybl"}},
    }  # fmt: skip
    if booked.paid_paise is not None:
        found["payment_amount"] = _Rupees.amount(booked.paid_paise)
    return found


class _Rupees(json.JSONEncoder):
    """Cashfree writes rupee amounts as JSON numbers with two decimals (``170.00``)."""

    @staticmethod
    def amount(paise: int) -> str:
        return f"@@{paise}@@"

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        return re.sub(r'"@@(\d+)@@"', lambda m: f"{Decimal(int(m[1])) / 100:.2f}", text)


def _raw_json(text: str, status: int = 200) -> Response:
    return Response(text, status_code=status, media_type="application/json")


# --- the storm's story and the demo's scenario ---------------------------------------------------


def story(
    told: Story, gateway: Signer, options: StormOptions, rng: random.Random
) -> list[Delivery]:
    buy = told.purchase
    version = rng.choice(["2022-09-01", "2023-08-01", "2025-01-01"])
    amount = Decimal(buy.amount_paise) / 100

    def event(kind: str, payment_id: str, status: str) -> Delivery:
        return delivery(
            gateway,
            kind,
            order_id=buy.reference,
            cf_payment_id=payment_id,
            order_amount=amount,
            payment_status=status,
            version=version,
        )

    out: list[Delivery] = []
    if rng.random() < options.failed_attempt_rate:
        out.append(event("PAYMENT_FAILED_WEBHOOK", numeric_payment_id(), "FAILED"))
    paid = numeric_payment_id()
    out.append(event("PAYMENT_SUCCESS_WEBHOOK", paid, "SUCCESS"))
    told.captured.append(paid)
    if rng.random() < options.double_payment_rate:
        second = numeric_payment_id()
        out.append(event("PAYMENT_SUCCESS_WEBHOOK", second, "SUCCESS"))
        told.captured.append(second)
    return out


def duplicates(stage: Stage) -> Result:
    """The same success from notify_url and the dashboard, then in the 2022 version."""
    buy = stage.merchant.buy(Provider.CASHFREE, {"TEA-ASSAM": 3}, judged.CUSTOMER)
    pay = stage.vouch(buy, numeric_payment_id())
    rupees = Decimal(buy.amount_paise) / 100
    notify, legacy = (
        delivery(stage.gateway, "PAYMENT_SUCCESS_WEBHOOK", order_id=buy.reference,
                 cf_payment_id=pay, order_amount=rupees, version=version)
        for version in ("2025-01-01", "2022-09-01")
    )  # fmt: skip
    runs = [stage.courier.deliver(d) for d in (notify, notify, legacy)]
    return judged.result(
        "Cashfree: notify_url, dashboard, v2022",
        runs,
        [
            judged.expect(judged.finals(*runs), ["processed", "duplicate", "processed"]),
            judged.one_order(stage, buy, pay),
        ],
    )


SIMULATOR = Simulator(
    provider=Provider.CASHFREE,
    new_payment_id=numeric_payment_id,
    webhook_secrets=lambda keys: (keys.cashfree,),
    api_keys=lambda keys: (keys.cashfree_client_id, keys.cashfree_api_secret),
    routes=routes,
    entity=entity,
    payment_key="cf_payment_id",
    fault=fault,
    retry_schedule=(120.0, 600.0, 1800.0),  # the default policy: 2, 10 and 30 minutes
    story=story,
    scenarios=(duplicates,),
    refund_words=parts.RefundWords(
        name="refund_status", pending="PENDING", processed="SUCCESS", failed="CANCELLED"
    ),
    payment_delivery=payment_delivery,
    dispute_delivery=dispute_delivery,
    refund_delivery=refund_delivery,
    captured=lambda entity: (
        _paise_of(entity) if entity.get("payment_status") == "SUCCESS" else None
    ),
    refund_id=lambda refund: str(refund["cf_refund_id"]),
    new_settlement_id=lambda: str(10**6 + secrets.randbelow(9 * 10**6)),
    settlement_delivery=settlement_delivery,
)

"""A local double of each gateway's status API, answering as the documented API does
(docs/providers.md, "Status APIs used by reconciliation"): Razorpay's order payments, Cashfree's
order payments and order, PayU's ``verify_payment``, each with its own authentication, its own
error shapes, and, on demand, 429s, 5xx and slow answers. It serves over HTTP on a loopback
port, so reconciliation and the gateways' own SDK clients talk to it as to the real thing.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payhooks.events import Provider
from payhooks.sim.gateway import Purchase, bank_reference


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeys:
    """The API credentials the double accepts (never webhook secrets)."""

    razorpay_key_id: str = "rzp_test_demo_key"
    razorpay_key_secret: str = "rzp_demo_key_secret"
    cashfree_client_id: str = "cf_demo_client_id"
    cashfree_api_secret: str = "cfsk_demo_api_secret"
    payu_key: str = "gtKFFx"
    payu_salt: str = "eCwWELxi"

    def env(self, base_url: str) -> dict[str, str]:
        """The environment a payhooks worker needs to ask this double."""
        return {
            "PAYHOOKS_RAZORPAY_KEY_ID": self.razorpay_key_id,
            "PAYHOOKS_RAZORPAY_KEY_SECRET": self.razorpay_key_secret,
            "PAYHOOKS_RAZORPAY_API_URL": base_url,
            "PAYHOOKS_CASHFREE_CLIENT_ID": self.cashfree_client_id,
            "PAYHOOKS_CASHFREE_API_SECRET": self.cashfree_api_secret,
            "PAYHOOKS_CASHFREE_API_URL": base_url,
            "PAYHOOKS_PAYU_API_KEY": self.payu_key,
            "PAYHOOKS_PAYU_API_SALT": self.payu_salt,
            "PAYHOOKS_PAYU_API_URL": base_url,
        }


@dataclass(slots=True, kw_only=True)
class Order:
    provider: Provider
    reference: str
    amount_paise: int
    expired: bool = False
    payments: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One scripted answer: an HTTP status (429, 500, 503...) or a delay before answering."""

    status: int | None = None
    delay_s: float = 0.0
    retry_after_s: int | None = None


class GatewayApi:
    """The gateways' books: orders and their payments, and the faults to play next."""

    def __init__(self, keys: ApiKeys | None = None, *, now: int = 1_767_225_600) -> None:
        self.keys = keys or ApiKeys()
        self.now = now
        self._orders: dict[tuple[Provider, str], Order] = {}
        self._faults: dict[Provider, deque[Fault]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.asked: Counter[tuple[Provider, str]] = Counter()

    # --- the merchant's and the customer's side -------------------------------------------

    def open_order(self, purchase: Purchase) -> Order:
        """The merchant created this order at the gateway (Razorpay's create-order call,
        Cashfree's order, PayU's txnid)."""
        key = (purchase.provider, purchase.reference)
        with self._lock:
            if key not in self._orders:
                self._orders[key] = Order(
                    provider=purchase.provider,
                    reference=purchase.reference,
                    amount_paise=purchase.amount_paise,
                )
            return self._orders[key]

    def pay(
        self,
        purchase: Purchase,
        payment_id: str,
        status: str | None = None,
        *,
        payment_amount_paise: int | None = None,
    ) -> None:
        """A payment the gateway records for the order, in the gateway's own status words
        (default: the captured or successful one). ``payment_amount_paise``: what Cashfree
        reports paid, when it is not the order amount (an offer, a service fee)."""
        order = self.open_order(purchase)
        entity = _ENTITIES[purchase.provider](self, order, payment_id, status)
        if payment_amount_paise is not None and purchase.provider is Provider.CASHFREE:
            entity["payment_amount"] = _Rupees.amount(payment_amount_paise)
        with self._lock:
            order.payments = [p for p in order.payments if _id_of(p) != payment_id] + [entity]

    def expire(self, purchase: Purchase) -> None:
        self.open_order(purchase).expired = True

    def fail_next(self, provider: Provider, *faults: Fault) -> None:
        """Answer the next calls for ``provider`` with these faults, in order."""
        with self._lock:
            self._faults[provider].extend(faults)

    # --- the API side ---------------------------------------------------------------------

    def _order(self, provider: Provider, reference: str) -> Order | None:
        with self._lock:
            self.asked[(provider, reference)] += 1
            return self._orders.get((provider, reference))

    async def _fault(self, provider: Provider) -> Response | None:
        with self._lock:
            fault = self._faults[provider].popleft() if self._faults[provider] else None
        if fault is None:
            return None
        if fault.delay_s:
            import anyio

            await anyio.sleep(fault.delay_s)
        if fault.status is None:
            return None
        return _ERRORS[provider](fault)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/orders/{order_id}/payments", self._razorpay, methods=["GET"]),
                Route("/pg/orders/{order_id}/payments", self._cashfree_payments, methods=["GET"]),
                Route("/pg/orders/{order_id}", self._cashfree_order, methods=["GET"]),
                Route("/merchant/postservice.php", self._payu, methods=["POST"]),
            ]
        )

    async def _razorpay(self, request: Request) -> Response:
        if not _basic_auth_ok(request, self.keys.razorpay_key_id, self.keys.razorpay_key_secret):
            return _razorpay_error(401, "The API key provided is invalid")
        fault = await self._fault(Provider.RAZORPAY)
        if fault is not None:
            return fault
        order = self._order(Provider.RAZORPAY, request.path_params["order_id"])
        if order is None:
            return _razorpay_error(400, "The id provided does not exist")
        items = list(order.payments)
        return JSONResponse({"entity": "collection", "count": len(items), "items": items})

    async def _cashfree_payments(self, request: Request) -> Response:
        order, refused = await self._cashfree(request)
        if refused is not None:
            return refused
        assert order is not None
        return _raw_json(json.dumps(order.payments, cls=_Rupees))

    async def _cashfree_order(self, request: Request) -> Response:
        order, refused = await self._cashfree(request)
        if refused is not None:
            return refused
        assert order is not None
        paid = any(p["payment_status"] == "SUCCESS" for p in order.payments)
        status = "PAID" if paid else "EXPIRED" if order.expired else "ACTIVE"
        body = {
            "cf_order_id": str(abs(hash(order.reference)) % 10**10),
            "order_id": order.reference,
            "entity": "order",
            "order_currency": "INR",
            "order_amount": _Rupees.amount(order.amount_paise),
            "order_status": status,
        }
        return _raw_json(json.dumps(body, cls=_Rupees))

    async def _cashfree(self, request: Request) -> tuple[Order | None, Response | None]:
        headers = request.headers
        if not headers.get("x-api-version"):
            return None, _cashfree_error(400, "x-api-version missing", "request_invalid",
                                         "invalid_request_error")  # fmt: skip
        given = (headers.get("x-client-id", ""), headers.get("x-client-secret", ""))
        wanted = (self.keys.cashfree_client_id, self.keys.cashfree_api_secret)
        if not all(hmac.compare_digest(a, b) for a, b in zip(given, wanted, strict=True)):
            return None, _cashfree_error(401, "authentication Failed", "request_failed",
                                         "authentication_error")  # fmt: skip
        fault = await self._fault(Provider.CASHFREE)
        if fault is not None:
            return None, fault
        order = self._order(Provider.CASHFREE, request.path_params["order_id"])
        if order is None:
            return None, _cashfree_error(404, "order not found", "order_not_found",
                                         "invalid_request_error")  # fmt: skip
        return order, None

    async def _payu(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        fields = {name: form.get(name, "") for name in ("key", "command", "var1", "hash")}
        if request.query_params.get("form") != "2" or fields["command"] != "verify_payment":
            return JSONResponse({"status": 0, "msg": "Invalid command"})
        expected = hashlib.sha512(
            f"{self.keys.payu_key}|verify_payment|{fields['var1']}|{self.keys.payu_salt}".encode()
        ).hexdigest()
        if fields["key"] != self.keys.payu_key or not hmac.compare_digest(expected, fields["hash"]):
            return JSONResponse({"status": 0, "msg": "Invalid Hash."})
        fault = await self._fault(Provider.PAYU)
        if fault is not None:
            return fault
        txnids = fields["var1"].split("|")
        details = {t: self._payu_details(t) for t in txnids}
        found = sum(1 for d in details.values() if d.get("status") != "Not Found")
        return JSONResponse({
            "status": 1 if found else 0,
            "msg": f"{found} out of {len(txnids)} Transactions Fetched Successfully",
            "transaction_details": details,
        })  # fmt: skip

    def _payu_details(self, txnid: str) -> dict[str, Any]:
        order = self._order(Provider.PAYU, txnid)
        if order is None or not order.payments:
            return {"mihpayid": "Not Found", "status": "Not Found"}
        return dict(order.payments[-1])


def _basic_auth_ok(request: Request, user: str, password: str) -> bool:
    import base64

    header = request.headers.get("authorization", "")
    if not header.startswith("Basic "):
        return False
    try:
        given = base64.b64decode(header[6:]).decode()
    except ValueError:
        return False
    return hmac.compare_digest(given, f"{user}:{password}")


def _razorpay_error(status: int, description: str) -> Response:
    """Razorpay's error envelope: ``{"error": {code, description, source, step, reason,
    metadata, field}}``; ``code`` is BAD_REQUEST_ERROR for 4xx, SERVER_ERROR for 5xx."""
    code = "SERVER_ERROR" if status >= 500 else "BAD_REQUEST_ERROR"
    error: dict[str, object] = {
        "code": code, "description": description, "source": "NA", "step": "NA",
        "reason": "NA", "metadata": {}, "field": None,
    }  # fmt: skip
    return JSONResponse({"error": error}, status_code=status)


def _cashfree_error(status: int, message: str, code: str, kind: str) -> Response:
    """Cashfree's error shape: ``{message, code, type}`` (``type`` one of
    invalid_request_error, authentication_error, rate_limit_error, api_error)."""
    return JSONResponse({"message": message, "code": code, "type": kind}, status_code=status)


def _razorpay_fault(fault: Fault) -> Response:
    status = fault.status or 500
    text = "Too many requests" if status == 429 else "The server encountered an error"
    response = _razorpay_error(status, text)
    if fault.retry_after_s is not None:
        response.headers["retry-after"] = str(fault.retry_after_s)
    return response


def _cashfree_fault(fault: Fault) -> Response:
    status = fault.status or 500
    if status == 429:
        response = _cashfree_error(429, "Too many requests", "request_failed", "rate_limit_error")
        response.headers["x-ratelimit-retry"] = str(fault.retry_after_s or 0)
        return response
    return _cashfree_error(status, "internal server error", "internal_error", "api_error")


def _payu_fault(fault: Fault) -> Response:
    """PayU documents no error body for its post service; a bare status and text."""
    response = Response("Service Unavailable", status_code=fault.status or 503)
    if fault.retry_after_s is not None:
        response.headers["retry-after"] = str(fault.retry_after_s)
    return response


_ERRORS = {
    Provider.RAZORPAY: _razorpay_fault,
    Provider.CASHFREE: _cashfree_fault,
    Provider.PAYU: _payu_fault,
}


def _razorpay_entity(
    api: GatewayApi, order: Order, payment_id: str, status: str | None
) -> dict[str, Any]:
    state = status or "captured"
    return {
        "id": payment_id, "entity": "payment", "amount": order.amount_paise, "currency": "INR",
        "status": state, "order_id": order.reference, "invoice_id": None,
        "international": False, "method": "upi", "amount_refunded": 0, "refund_status": None,
        "captured": state in ("captured", "refunded"), "description": None, "card_id": None,
        "bank": None, "wallet": None, "vpa": "buyer@okbank", "email": "buyer@example.com",
        "contact": "+919999999999", "notes": [], "fee": 2, "tax": 0, "error_code": None,
        "error_description": None, "error_source": None, "error_step": None,
        "error_reason": None, "acquirer_data": {"rrn": bank_reference(payment_id)},
        "created_at": api.now,
    }  # fmt: skip


def _cashfree_entity(
    api: GatewayApi, order: Order, payment_id: str, status: str | None
) -> dict[str, Any]:
    state = status or "SUCCESS"
    rupees = _Rupees.amount(order.amount_paise)
    return {
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


def _payu_entity(
    api: GatewayApi, order: Order, payment_id: str, status: str | None
) -> dict[str, Any]:
    state = status or "success"
    amount = f"{Decimal(order.amount_paise) / 100:.2f}"
    return {
        "mihpayid": payment_id, "request_id": "", "bank_ref_num": bank_reference(payment_id),
        "amt": amount,
        "transaction_amount": amount, "txnid": order.reference, "additional_charges": "0.00",
        "productinfo": "payhooks demo", "firstname": "Asha", "bankcode": "UPI",
        "udf1": "", "udf2": "", "udf3": "", "udf4": "", "udf5": "", "field2": "",
        "field9": "No Error", "error_code": "E000", "addedon": "2026-03-04 14:46:14",
        "payment_source": "payu", "card_type": "", "error_Message": "NO ERROR",
        "net_amount_debit": amount, "disc": "0.00", "mode": "UPI", "PG_TYPE": "UPI-PG",
        "card_no": "", "name_on_card": "", "status": state,
        "unmappedstatus": {"success": "captured", "failure": "failed"}.get(state, state),
        "Merchant_UTR": None, "Settled_At": "0000-00-00 00:00:00",
    }  # fmt: skip


_ENTITIES = {
    Provider.RAZORPAY: _razorpay_entity,
    Provider.CASHFREE: _cashfree_entity,
    Provider.PAYU: _payu_entity,
}


def _id_of(entity: dict[str, Any]) -> str:
    return str(entity.get("id") or entity.get("cf_payment_id") or entity.get("mihpayid"))


class _Rupees(json.JSONEncoder):
    """Cashfree writes rupee amounts as JSON numbers with two decimals (``170.00``)."""

    @staticmethod
    def amount(paise: int) -> str:
        return f"@@{paise}@@"

    def encode(self, o: Any) -> str:
        import re

        text = super().encode(o)
        return re.sub(r'"@@(\d+)@@"', lambda m: f"{Decimal(int(m[1])) / 100:.2f}", text)


def _raw_json(text: str, status: int = 200) -> Response:
    return Response(text, status_code=status, media_type="application/json")


@contextlib.contextmanager
def serving(api: GatewayApi, *, port: int = 0) -> Iterator[str]:
    """The double under uvicorn on a loopback port (a free one by default), until the block
    ends. Loopback only: it holds test credentials and answers anyone who asks."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(api.app(), log_config=None, log_level="error", access_log=False)
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="payhooks-gateway-api", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        if not server.started:
            raise RuntimeError("the gateway API double did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


__all__ = ["ApiKeys", "Fault", "GatewayApi", "Order", "serving"]

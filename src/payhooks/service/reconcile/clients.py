"""One small client per gateway status API (docs/providers.md, "Status APIs used by
reconciliation"). Every failure becomes a ``GatewayApiError``, translated here and nowhere
else; secrets go in headers or a hash, never in a log line or an error."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar
from urllib.parse import quote

import httpx

from payhooks.errors import GatewayApiError, MalformedPayload
from payhooks.events import EventKind, Provider
from payhooks.service.config import ApiCredentials
from payhooks.service.reconcile import payments
from payhooks.service.reconcile.payments import Report

CASHFREE_API_VERSION = "2025-01-01"
PAYU_COMMAND = "verify_payment"
MAX_RETRY_AFTER_S = 3600.0
T = TypeVar("T")


class StatusClient(Protocol):
    """Asks one gateway what became of one checkout."""

    provider: Provider

    def report(self, reference: str) -> Report: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RazorpayClient:
    """``GET /v1/orders/{order_id}/payments`` with HTTP Basic (key id, key secret)."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = Provider.RAZORPAY

    def report(self, reference: str) -> Report:
        url = f"{self.credentials.base_url}/v1/orders/{quote(reference, safe='')}/payments"
        auth = (self.credentials.id, self.credentials.secret)
        body = _answer(self.provider, lambda: self.http.get(url, auth=auth))
        return _parsed(self.provider, lambda: payments.razorpay(reference, body))


@dataclass(frozen=True, slots=True, kw_only=True)
class CashfreeClient:
    """``GET /pg/orders/{order_id}/payments`` with ``x-client-id``, ``x-client-secret`` and
    ``x-api-version``; when no payment succeeded, ``GET /pg/orders/{order_id}`` for expiry."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = Provider.CASHFREE

    def report(self, reference: str) -> Report:
        order = f"{self.credentials.base_url}/pg/orders/{quote(reference, safe='')}"
        body = _answer(self.provider, lambda: self.http.get(f"{order}/payments", headers=self._h))
        found = _parsed(self.provider, lambda: payments.cashfree(reference, body))
        if any(r.event.kind is EventKind.PAYMENT_CAPTURED for r in found.received):
            return found
        order_body = _answer(self.provider, lambda: self.http.get(order, headers=self._h))
        expired = _parsed(self.provider, lambda: payments.cashfree_order_expired(order_body))
        return Report(received=found.received, skipped=found.skipped, expired=expired)

    @property
    def _h(self) -> dict[str, str]:
        return {
            "x-client-id": self.credentials.id,
            "x-client-secret": self.credentials.secret,
            "x-api-version": CASHFREE_API_VERSION,
            "accept": "application/json",
        }


def payu_hash(key: str, command: str, var1: str, salt: str) -> str:
    """``sha512(key|command|var1|salt)``, lowercase hex: the hash of PayU's post service."""
    return hashlib.sha512(f"{key}|{command}|{var1}|{salt}".encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class PayUClient:
    """``verify_payment`` on ``/merchant/postservice.php?form=2``: a form with the merchant
    key, the command, ``var1`` (the txnid) and their hash with the salt."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = Provider.PAYU

    def report(self, reference: str) -> Report:
        url = f"{self.credentials.base_url}/merchant/postservice.php"
        key, salt = self.credentials.id, self.credentials.secret
        form = {
            "key": key,
            "command": PAYU_COMMAND,
            "var1": reference,
            "hash": payu_hash(key, PAYU_COMMAND, reference, salt),
        }
        body = _answer(self.provider, lambda: self.http.post(url, params={"form": "2"}, data=form))
        return _parsed(self.provider, lambda: payments.payu(reference, body))


def client(credentials: ApiCredentials, http: httpx.Client) -> StatusClient:
    if credentials.provider is Provider.RAZORPAY:
        return RazorpayClient(credentials=credentials, http=http)
    if credentials.provider is Provider.CASHFREE:
        return CashfreeClient(credentials=credentials, http=http)
    return PayUClient(credentials=credentials, http=http)


def clients(
    credentials: Mapping[Provider, ApiCredentials], http: httpx.Client
) -> dict[Provider, StatusClient]:
    return {provider: client(found, http) for provider, found in credentials.items()}


def http_client(timeout_s: float) -> httpx.Client:
    """One client for every gateway: bounded connect and read, no redirects followed."""
    return httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False)


def _answer(provider: Provider, send: Callable[[], httpx.Response]) -> bytes:
    """The body of a 2xx answer; anything else is a ``GatewayApiError`` saying why."""
    try:
        response = send()
    except httpx.TimeoutException as exc:
        raise GatewayApiError(provider.value, "timed out") from exc
    except httpx.HTTPError as exc:
        raise GatewayApiError(provider.value, f"no answer ({type(exc).__name__})") from exc
    if 200 <= response.status_code < 300:
        return response.content
    raise GatewayApiError(
        provider.value,
        f"answered {response.status_code}{_detail(response)}",
        status=response.status_code,
        retry_after_s=retry_after(response.headers),
    )


def retry_after(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` in seconds, or Cashfree's ``x-ratelimit-retry``; None when neither
    is a plain number (an HTTP date is not worth parsing here: the backoff applies)."""
    for name in ("retry-after", "x-ratelimit-retry"):
        value = headers.get(name, "").strip()
        if value.isdecimal():
            return min(float(value), MAX_RETRY_AFTER_S)
    return None


def _detail(response: httpx.Response) -> str:
    """The gateway's own error code, when its error shape has one (never the whole body)."""
    try:
        doc = response.json()
    except ValueError:
        return ""
    if isinstance(doc, dict):
        error = doc.get("error")
        code = error.get("code") if isinstance(error, dict) else doc.get("code")
        if isinstance(code, str) and code.isprintable() and len(code) <= 64:
            return f" ({code})"
    return ""


def _parsed(provider: Provider, read: Callable[[], T]) -> T:
    """An answer that is not the documented shape is an API failure too: asked again later."""
    try:
        return read()
    except MalformedPayload as exc:
        raise GatewayApiError(provider.value, f"unreadable answer: {exc.reason}") from exc

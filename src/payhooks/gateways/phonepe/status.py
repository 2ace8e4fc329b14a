"""PhonePe's status API, for reconciliation and for confirming its callbacks: an OAuth token
(client credentials, kept until shortly before it expires), then ``GET
/checkout/v2/order/{merchantOrderId}/status?details=true`` with ``Authorization: O-Bearer
<token>``, read as events; a refund's own status for a refund callback. Needs httpx (an extra).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from payhooks.events import EventKind, Provider, Received, storable
from payhooks.gateways._common import naming, text_field
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._reports import KEY_PREFIX, Report, canonical, read_json, received, text
from payhooks.gateways._status import CredentialsRefused, answer, parsed
from payhooks.gateways.phonepe.adapter import (
    COMPLETED,
    FAILED_STATES,
    bank_reference,
    latest_attempt,
    paise,
)
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload

TOKEN_PATH = "/v1/oauth/token"
ORDER_PATH = "/checkout/v2/order/{}/status"
REFUND_PATH = "/payments/v2/refund/{}/status"
PAID_FIELD = "payhooksPaidBy"
"""Where a stored refund answer keeps the payment of its original order (payhooks' own field:
PhonePe's answer has none)."""
SANDBOX = "/pg-sandbox"
"""The sandbox serves OAuth and orders under one base; production splits them."""
REFRESH_MARGIN_S = 60.0
"""A token is replaced this long before its ``expires_at`` (PhonePe's advice), or at half its
life when that is sooner."""
UNKNOWN_ORDER = "INVALID_MERCHANT_ORDER_ID"
TOKEN_REFUSED = frozenset({401, 403})
"""Statuses of the token endpoint that refuse the credentials whatever the body."""
CLIENT_REFUSED = "INVALID_CLIENT"
"""The token endpoint's code for a wrong client id or secret, under a 400: a 400 without it
(a proxy's page, another error) is no word on the credentials."""
_P = Provider.PHONEPE


@dataclass(frozen=True, slots=True, kw_only=True)
class Token:
    """An OAuth access token, as the header it is sent in, and when to fetch another."""

    header: str = field(repr=False)
    """``O-Bearer <access_token>`` (``token_type``, a space, the token)."""
    refresh_at: float
    """Unix seconds after which a new one is fetched."""


class _Kept:
    """The client's token, shared by the threads a worker asks from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token: Token | None = None

    def valid(self, now: float) -> Token | None:
        with self._lock:
            token = self._token
        return token if token is not None and now < token.refresh_at else None

    def keep(self, token: Token) -> None:
        with self._lock:
            self._token = token

    def drop(self, token: Token) -> None:
        with self._lock:
            if self._token is token:
                self._token = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PhonePeClient:
    """Asks about one order: a token (``POST`` form ``client_id``, ``client_version``,
    ``client_secret``, ``grant_type=client_credentials``), then the order's status. A 401
    with a kept token fetches a new one and asks once more (PhonePe can end a token early);
    a fresh token refused is the credentials (``CredentialsRefused``)."""

    credentials: ApiCredentials
    http: httpx.Client
    clock: Callable[[], float] = time.time
    kept: _Kept = field(default_factory=_Kept, repr=False, compare=False)
    provider = _P

    def report(self, reference: str) -> Report:
        """The order's status with its attempts; an unknown order is none."""
        url = self._pg + ORDER_PATH.format(quote(reference, safe=""))
        try:
            body = self._get(url, {"details": "true"})
        except GatewayApiError as exc:
            if unknown_order(exc):
                return Report()
            raise
        return parsed(self.provider, lambda: order_status(reference, body))

    def refund(
        self,
        merchant_refund_id: str,
        order_id: str,
        *,
        claimed_paise: int | None = None,
        asked: Callable[[str], int | None] | None = None,
    ) -> Report:
        """A refund's status, by the merchant's ``merchantRefundId``: the order status lists
        no refunds, so a refund callback is confirmed here. A refund of another order than
        ``order_id``, the one the callback named, confirms nothing. ``claimed_paise``, what
        the callback claimed, is not compared: PhonePe's refund status names the refund's
        own ``amount``, which is applied whatever the callback said (its own figure is kept
        beside it: docs/providers.md, "Confirmed, with other figures"); ``asked`` is not
        needed for that (payhooks sends PhonePe no refunds)."""
        url = self._pg + REFUND_PATH.format(quote(merchant_refund_id, safe=""))
        body = self._get(url, {})
        found = parsed(self.provider, lambda: refund_status(merchant_refund_id, body))
        if any(r.event.merchant_ref != order_id for r in found.received):
            return Report(skipped=(f"{merchant_refund_id}: a refund of another order",))
        if not found.received:
            state, of_order = parsed(self.provider, lambda: refund_state(merchant_refund_id, body))
            if of_order != order_id:  # one naming no order, or another, says nothing of this
                return found
            return dataclasses.replace(
                found, contradicted=state == REFUND_FAILED, underway=state in REFUND_UNDERWAY
            )
        paid = self._paid(order_id)
        return parsed(self.provider, lambda: refund_status(merchant_refund_id, body, paid))

    def _paid(self, order_id: str) -> str | None:
        """The payment a refund of ``order_id`` returns: the order's one completed attempt
        (its status), None when it has none or more than one (the handler is told none)."""
        captured = {
            r.event.payment_id
            for r in self.report(order_id).received
            if r.event.kind is EventKind.PAYMENT_CAPTURED
        }
        return captured.pop() if len(captured) == 1 else None

    def _get(self, url: str, params: Mapping[str, str]) -> bytes:
        token, fresh = self._token()
        try:
            return self._ask(url, params, token)
        except CredentialsRefused as exc:
            if fresh or exc.status != 401:
                raise
        self.kept.drop(token)
        return self._ask(url, params, self._token()[0])

    def _ask(self, url: str, params: Mapping[str, str], token: Token) -> bytes:
        headers = {"authorization": token.header, "accept": "application/json"}
        return answer(self.provider, self.http, "GET", url, params=params, headers=headers)

    def _token(self) -> tuple[Token, bool]:
        """The kept token while it is good, else a new one (and whether it is new)."""
        kept = self.kept.valid(self.clock())
        if kept is not None:
            return kept, False
        fetched = self._fetch()
        self.kept.keep(fetched)
        return fetched, True

    def _fetch(self) -> Token:
        client_id, version = client_identity(self.credentials.id)
        form = {
            "client_id": client_id,
            "client_version": version,
            "client_secret": self.credentials.secret,
            "grant_type": "client_credentials",
        }
        try:
            body = answer(
                self.provider, self.http, "POST", self._oauth, data=form,
                headers={"accept": "application/json"},
            )  # fmt: skip
        except GatewayApiError as exc:
            refused = exc.status in TOKEN_REFUSED or (
                exc.status == 400 and exc.code == CLIENT_REFUSED
            )
            if refused and not isinstance(exc, CredentialsRefused):
                raise CredentialsRefused(
                    self.provider.value, f"token refused: {exc.reason}", status=exc.status
                ) from exc
            raise
        now = self.clock()
        return parsed(self.provider, lambda: token_of(body, now))

    @property
    def _oauth(self) -> str:
        return endpoints(self.credentials.base_url)[0]

    @property
    def _pg(self) -> str:
        return endpoints(self.credentials.base_url)[1]


def client(credentials: ApiCredentials, http: httpx.Client) -> PhonePeClient:
    """The status client for these credentials, over ``http``."""
    return PhonePeClient(credentials=credentials, http=http)


def endpoints(base_url: str) -> tuple[str, str]:
    """The token URL and the PG base under ``base_url``: production's
    ``https://api.phonepe.com/apis`` holds ``/identity-manager`` and ``/pg``; the sandbox's
    ``https://api-preprod.phonepe.com/apis/pg-sandbox`` holds both itself."""
    base = base_url.rstrip("/")
    if base.endswith(SANDBOX):
        return base + TOKEN_PATH, base
    return base + "/identity-manager" + TOKEN_PATH, base + "/pg"


def client_identity(ident: str) -> tuple[str, str]:
    """``client_id`` and ``client_version`` from the configured id: ``client_id:2`` is version
    2, a plain ``client_id`` version 1 (the sandbox's; production's is in PhonePe's email)."""
    client_id, colon, version = ident.rpartition(":")
    if colon and client_id and version.isascii() and version.isdigit():
        return client_id, version
    return ident, "1"


def token_of(body: bytes, now: float) -> Token:
    """``{"access_token", "token_type": "O-Bearer", "issued_at", "expires_at", ...}``, times
    in unix seconds. A token with no readable expiry serves the call it was fetched for."""
    doc = read_json(_P, body)
    access = text(_P, doc, "access_token")
    kind = doc.get("token_type") if isinstance(doc.get("token_type"), str) else None
    expires, issued = _seconds(doc.get("expires_at")), _seconds(doc.get("issued_at"))
    if expires is None and _seconds(doc.get("expires_in")) is not None:
        expires = now + float(doc["expires_in"])
    if expires is None:
        return Token(header=f"{kind or 'O-Bearer'} {access}", refresh_at=now)
    margin = REFRESH_MARGIN_S if issued is None else min(REFRESH_MARGIN_S, (expires - issued) / 2)
    return Token(header=f"{kind or 'O-Bearer'} {access}", refresh_at=expires - margin)


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else None


def unknown_order(exc: GatewayApiError) -> bool:
    """PhonePe's answer for an order it never heard of: ``{"code":
    "INVALID_MERCHANT_ORDER_ID", "message": "No entry found for given merchant order id"}``
    (400 per PhonePe's integration skill; 404 taken too). Nothing paid: no payment to report."""
    return exc.status in (400, 404) and exc.code == UNKNOWN_ORDER


_KINDS: Mapping[str, EventKind] = {
    COMPLETED: EventKind.PAYMENT_CAPTURED,
    **{state: EventKind.PAYMENT_FAILED for state in FAILED_STATES},
}


def order_status(reference: str, body: bytes) -> Report:
    """The order: ``state`` COMPLETED is a capture by its completed attempt's
    ``transactionId``; FAILED a failure of its latest attempt (the order itself when none was
    made), and final: PhonePe's terminal states are COMPLETED and FAILED, so no payment can
    come for it any more (``expired``). PENDING (or CREATED) reports nothing yet."""
    doc = _answer(body, "order", "merchantOrderId", reference)
    state = text(_P, doc, "state")
    kind = _KINDS.get(state)
    if kind is None:
        return Report(skipped=(f"{doc.get('orderId') or reference}:{state}",))
    attempt = latest_attempt(doc.get("paymentDetails"), state)
    if state == COMPLETED and attempt is not None and attempt.get("state") != COMPLETED:
        # The order's word without an attempt's: never credited to one PhonePe says did not
        # complete (its id would name no payment); asked again, as for no attempt at all.
        raise MalformedPayload(_P, "a COMPLETED order lists no completed attempt")
    if attempt is not None:
        payment_id = text(_P, attempt, "transactionId")
    elif kind is EventKind.PAYMENT_FAILED:
        payment_id = text(_P, doc, "orderId")
    else:
        raise MalformedPayload(_P, "a COMPLETED order lists no paymentDetails")
    amount = paise(doc.get("amount"), "amount", strict=True)
    if amount is None:
        raise MalformedPayload(_P, "order amount is missing")
    entity = {**doc, "merchantOrderId": reference}  # read again by ``stored``
    event = received(
        _P, entity, kind=kind, status=state, payment_id=payment_id, merchant_ref=reference,
        amount_paise=amount, currency=doc.get("currency") or "INR",
        bank_ref=bank_reference(attempt),
    )  # fmt: skip
    return Report(received=(event,), expired=kind is EventKind.PAYMENT_FAILED)


def _answer(body: bytes, what: str, name: str, asked: str) -> dict[str, Any]:
    """The status API's answer about the ``what`` asked for: an object naming that one as
    ``name``, or naming none."""
    doc = read_json(_P, body)
    if not isinstance(doc, dict):
        raise MalformedPayload(_P, f"{what} status answer is not an object")
    naming(doc, name, asked, what=f"{what} status", provider=_P)
    return doc


def refund_status(merchant_refund_id: str, body: bytes, paid: str | None = None) -> Report:
    """``GET /payments/v2/refund/{merchantRefundId}/status``: COMPLETED is the refund
    processed, keyed on PhonePe's ``refundId`` (``OMR…``, never a payment's ``OM…`` id);
    PENDING, CONFIRMED and FAILED report nothing. The answer names no payment: ``paid``, the
    original order's payment (its own status), is kept in the stored answer as
    ``PAID_FIELD`` so a replay reads the same refund. A ``refundId`` that is not text (a
    number, a list) does not read."""
    doc = _answer(body, "refund", "merchantRefundId", merchant_refund_id)
    state = text(_P, doc, "state")
    if state != COMPLETED:
        return Report(skipped=(f"{merchant_refund_id}:{state}",))
    refund_id = text_field(doc.get("refundId"), "refundId", strict=True, provider=_P)
    amount = paise(doc.get("amount"), "amount", strict=True)
    if amount is None:
        raise MalformedPayload(_P, "refund amount is missing")
    entity = {**doc, "merchantRefundId": merchant_refund_id}
    paid = paid if paid is not None else doc.get(PAID_FIELD)
    if paid is not None:
        entity[PAID_FIELD] = paid
    found = received(
        _P, entity, kind=EventKind.REFUND_PROCESSED, status=state,
        payment_id=refund_id or merchant_refund_id,
        merchant_ref=text(_P, doc, "originalMerchantOrderId"), amount_paise=amount,
        currency=doc.get("currency") or "INR",
        bank_ref=bank_reference(latest_attempt(doc.get("paymentDetails"), state)),
    )  # fmt: skip
    named = str(paid) if isinstance(paid, str) and paid else None
    return Report(received=(_as_refund(found, merchant_refund_id, amount, named),))


REFUND_FAILED = "FAILED"
"""A refund's final failure (``pg.refund.failed``): never made under its ``merchantRefundId``
again."""
REFUND_UNDERWAY = frozenset({"PENDING", "CONFIRMED"})
"""A refund's states on its way to COMPLETED or FAILED."""


def refund_state(merchant_refund_id: str, body: bytes) -> tuple[object, object]:
    """A refund's ``state`` and the order it refunds (``originalMerchantOrderId``), as
    written: what a refund not COMPLETED says of a callback claiming it."""
    doc = _answer(body, "refund", "merchantRefundId", merchant_refund_id)
    return doc.get("state"), doc.get("originalMerchantOrderId")


def _as_refund(found: Received, merchant_refund_id: str, amount: int, paid: str | None) -> Received:
    """``received`` builds a payment's event; a refund carries the refund's id and amount,
    and the payment of its original order (``paid``: PhonePe's refund status names none)."""
    event = dataclasses.replace(
        found.event,
        event_type=f"{KEY_PREFIX}.refund.{COMPLETED}",
        payment_id=paid,
        amount_paise=None,
        refund_id=merchant_refund_id,
        refund_amount_paise=amount,
    )
    return dataclasses.replace(found, event=storable(event))


def stored(event_id: str, entity: dict[str, Any]) -> Report:
    """A stored order (or refund) answer, read as the answer it came in."""
    if "merchantRefundId" in entity:
        return refund_status(str(entity["merchantRefundId"]), canonical(entity))
    return order_status(str(entity.get("merchantOrderId")), canonical(entity))


__all__ = [
    "PhonePeClient",
    "Token",
    "client",
    "client_identity",
    "endpoints",
    "order_status",
    "refund_status",
    "stored",
    "token_of",
    "unknown_order",
]

"""Razorpay's status API, for reconciliation: ``GET /v1/orders/{order_id}/payments`` with
HTTP Basic (key id, key secret), and its answer read as events. Needs httpx (an extra)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import quote

import httpx

from payhooks.events import EventKind, Provider, Received
from payhooks.gateways import _reports
from payhooks.gateways._common import child, named, naming, reference
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._refunds import Refund, RefundRefused, Sent, failed_refund, same_amount
from payhooks.gateways._reports import Report, canonical, read_json, received, text
from payhooks.gateways._settlements import Page, days
from payhooks.gateways._status import (
    MAX_PAGES,
    CredentialsRefused,
    answer,
    error_answer,
    listed,
    parsed,
)
from payhooks.gateways.razorpay import settlements
from payhooks.gateways.razorpay.adapter import KEY_NOTE
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload

_P = Provider.RAZORPAY
_KINDS: Mapping[str, EventKind] = {
    "authorized": EventKind.PAYMENT_AUTHORIZED,
    "captured": EventKind.PAYMENT_CAPTURED,
    "failed": EventKind.PAYMENT_FAILED,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RazorpayClient:
    """``GET /v1/orders/{order_id}/payments`` with HTTP Basic (key id, key secret)."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = _P

    def send_refund(self, refund: Refund) -> Sent:
        """Asks Razorpay to refund, under the intent's idempotency key."""
        return send_refund(self, refund)

    def refund_status(self, refund: Refund) -> Sent:
        """``GET /v1/payments/{id}/refunds/{refund_id}``: the refund entity as it is now."""
        payment = self._payment_url(refund.payment_id)
        made = quote(refund.gateway_refund_id or "", safe="")
        body = answer(_P, self.http, "GET", f"{payment}/refunds/{made}", auth=self._auth)
        return parsed(_P, lambda: _sent(read_json(_P, body), refund))

    def capture(self, payment_id: str, amount_paise: int, currency: str) -> Report:
        """``POST /v1/payments/{id}/capture`` with the amount and currency authorised: the
        captured payment, as reconciliation reads one (under its key, so it takes effect once
        with its webhook). Capturing is idempotent in effect: a payment already captured
        (another worker, the dashboard) is read with ``GET /v1/payments/{id}`` instead. A 400
        otherwise (another amount, a payment no longer authorised) is Razorpay's refusal."""
        payment = self._payment_url(payment_id)
        auth = self._auth
        asked = {"amount": amount_paise, "currency": currency}
        try:
            body = answer(_P, self.http, "POST", f"{payment}/capture", auth=auth, json=asked)
        except GatewayApiError as exc:
            if exc.status != 400 or ALREADY_CAPTURED not in exc.reason:
                raise
            body = answer(_P, self.http, "GET", payment, auth=auth)
        return parsed(_P, lambda: captured(_named_payment(read_json(_P, body), payment_id)))

    def settlement_pages(self, start: date, end: date) -> Iterator[Page]:
        """``GET /v1/settlements/recon/combined?year=&month=&day=`` for each day, a page of
        ``RECON_COUNT`` items at a time (``count`` and ``skip``) until one lists fewer; then
        ``GET /v1/settlements/{id}`` for each payout the lines named, for its own figures.
        A day's page or a payout's figures that cannot be read (an answer not in the
        documented shape, a 4xx about that one) is a page saying so, and the other days and
        payouts are still asked for; an outage (429, 5xx, no answer) or refused credentials
        stop the report there."""
        named: dict[str, None] = {}
        for day in days(start, end):
            for page in self._recon(day):
                found = [x.settlement_id for x in page.lines]
                found += [x.settlement_id for x in page.unreadable if x.settlement_id is not None]
                named.update(dict.fromkeys(found))
                yield page
        for settlement_id in named:
            yield self._payout(settlement_id)

    def _payout(self, settlement_id: str) -> Page:
        url = f"{self.credentials.base_url}/v1/settlements/{quote(settlement_id, safe='')}"
        try:
            body = answer(_P, self.http, "GET", url, auth=self._auth)
            return Page(settlements=(settlements.answered(body, settlement_id),))
        except (GatewayApiError, MalformedPayload) as exc:
            return Page(failed=_passed_over(exc, f"settlement {settlement_id}"))

    def _recon(self, day: date) -> Iterator[Page]:
        url = f"{self.credentials.base_url}/v1/settlements/recon/combined"
        skip = 0
        for _ in range(MAX_PAGES):
            asked = {"year": str(day.year), "month": f"{day.month:02d}", "day": f"{day.day:02d}",
                     "count": str(RECON_COUNT), "skip": str(skip)}  # fmt: skip
            try:
                page = settlements.recon(
                    answer(_P, self.http, "GET", url, auth=self._auth, params=asked)
                )
            except (GatewayApiError, MalformedPayload) as exc:
                yield Page(failed=_passed_over(exc, f"the recon report of {day}"))
                return
            yield page
            listed = len(page.lines) + len(page.unreadable) + page.unsettled
            if listed < RECON_COUNT:
                return
            skip += listed
        yield Page(failed=f"the recon report of {day} runs past {MAX_PAGES} pages")

    @property
    def _auth(self) -> tuple[str, str]:
        """HTTP Basic, as every call is made: the key id and the key secret."""
        return (self.credentials.id, self.credentials.secret)

    def _payment_url(self, payment_id: str) -> str:
        """``/v1/payments/{id}``, where a payment's capture and refunds are asked for."""
        return f"{self.credentials.base_url}/v1/payments/{quote(payment_id, safe='')}"

    def report(self, reference: str) -> Report:
        """The order's payments."""
        url = f"{self.credentials.base_url}/v1/orders/{quote(reference, safe='')}/payments"
        body = answer(self.provider, self.http, "GET", url, auth=self._auth)
        return parsed(self.provider, lambda: payments(reference, body))


def _passed_over(exc: GatewayApiError | MalformedPayload, what: str) -> str:
    """Why one part of the report could not be read, for a page that says so; an outage or
    refused credentials are raised instead: every other call would fail the same way."""
    if isinstance(exc, MalformedPayload):
        return f"{what}: unreadable answer: {exc.reason}"
    if exc.outage or isinstance(exc, CredentialsRefused):
        raise exc
    return f"{what}: {exc.reason}"


ALREADY_CAPTURED = "This payment has already been captured"
"""Razorpay's words for a capture of a captured payment (razorpay/razorpay-mcp-server,
``pkg/razorpay/payments_test.go``; docs/providers.md "Captures")."""


def captured(entity: object) -> Report:
    """A payment entity after its capture: delivered as reconciliation delivers a payment."""
    if not isinstance(entity, dict):
        raise MalformedPayload(_P, "payment answer is not an object")
    status, payment_id, order_id = _identify(entity, "")
    kind = _KINDS.get(status)
    if kind is not EventKind.PAYMENT_CAPTURED or not isinstance(order_id, str):
        return Report(skipped=(f"{payment_id}:{status}",))
    return Report(received=(_received(entity, order_id, kind, status, payment_id),))


RECON_COUNT = 100
"""Recon items asked for per call (``count``); a page with fewer is the day's last."""
REFUND_HEADER = "X-Refund-Idempotency"
REFUSAL_CODE = "BAD_REQUEST_ERROR"
"""Razorpay's ``error.code`` on a 400 that refuses a refund (docs/providers.md, "Refunds"); a
400 in no such shape (a proxy's page) is an error, asked again."""
MAX_LISTED = 100
"""Refunds listed per call (Razorpay's ``count``, 10 by default, at most 100): more than a
payment ever has (each is at least a paisa of it)."""
UNKNOWN_ID = "The id provided does not exist"
NOT_ABOUT_THE_REFUND = (
    UNKNOWN_ID,  # and Razorpay's newer "... or access is unauthorised": the keys' account
    "Access Denied",  # the account's IP allow-list
    "The requested URL was not found on the server",  # no such route: the base URL
)
"""The beginnings of Razorpay's ``BAD_REQUEST_ERROR`` descriptions for what is wrong on
payhooks' side of the API, not the refund: errors, asked again until mended, never refusals."""
KEY_TAKEN = "Different request with the same idempotency key has already been processed."
"""Razorpay's words for another body under a key it took (razorpay.com/docs/api/refunds/
normal-refunds-idempotent; docs/providers.md, "Refunds")."""


def send_refund(client: RazorpayClient, refund: Refund) -> Sent:
    """``POST /v1/payments/{id}/refund`` with the intent's key in ``X-Refund-Idempotency`` and
    in the refund's notes, the same body every time (Razorpay refunds a key once; a different
    body under it is refused). A retry first looks for the refund among the payment's
    (``GET /v1/payments/{id}/refunds``, by the note), so an answer lost after Razorpay acted
    never depends on how Razorpay answers a key it has seen. A 400 in Razorpay's error shape
    (``BAD_REQUEST_ERROR``: more than captured, not captured, refunded already) is its
    refusal, unless it speaks of payhooks' side of the API (``NOT_ABOUT_THE_REFUND``: the
    payment id unknown to the keys' account, the host refused, no such route) or that a request
    under the key was processed already (``_key_taken``: the refund is looked for, and when
    not listed yet, asked again); any other answer is an error, asked again."""
    payment = client._payment_url(refund.payment_id)
    auth = client._auth
    if refund.attempts > 1 and (found := _listed(client, refund)) is not None:
        return found
    asked = {"amount": refund.amount_paise, "notes": {KEY_NOTE: refund.idempotency_key}}
    errors: list[bytes] = []

    def kept(status: int, body: bytes) -> bool:  # asked of a non-2xx answer only
        errors.append(body)
        return False

    try:
        body = answer(_P, client.http, "POST", f"{payment}/refund", auth=auth, json=asked,
                      headers={REFUND_HEADER: refund.idempotency_key}, taken=kept)  # fmt: skip
    except GatewayApiError as exc:
        if exc.status != 400 or exc.code != REFUSAL_CODE or _not_about_the_refund(errors[-1]):
            raise
        if _key_taken(errors[-1]):
            if (found := _listed(client, refund)) is not None:
                return found
            raise
        raise RefundRefused(_P.value, exc.reason, status=400, code=exc.code) from exc
    return parsed(_P, lambda: _sent(read_json(_P, body), refund))


def _listed(client: RazorpayClient, refund: Refund) -> Sent | None:
    """``GET /v1/payments/{id}/refunds``: the refund made under the intent's key (its note),
    or None when none is listed."""
    url = f"{client._payment_url(refund.payment_id)}/refunds"
    body = answer(_P, client.http, "GET", url, auth=client._auth,
                  params={"count": str(MAX_LISTED)})  # fmt: skip
    return parsed(_P, lambda: _named(body, refund))


def _not_about_the_refund(body: bytes) -> bool:
    """Razorpay's 400 for the payment unknown to the account the keys name (another account's
    keys, test keys for a live payment), payhooks' host outside the account's allow-list, or a
    path it has no route for (a base URL ending in ``/v1``): none says anything of the refund,
    so an error, never its refusal."""
    said = child(error_answer(body), "error", "description")
    return isinstance(said, str) and said.startswith(NOT_ABOUT_THE_REFUND)


def _key_taken(body: bytes) -> bool:
    """Razorpay's 400 for a key it processed a request under already (``KEY_TAKEN``): a
    refund under the key may be made, so it is never a refusal of it. payhooks sends one
    body per key, so the answer is not expected; when it comes, the refund is looked for."""
    return child(error_answer(body), "error", "description") == KEY_TAKEN


def _named(body: bytes, refund: Refund) -> Sent | None:
    doc = read_json(_P, body)
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise MalformedPayload(_P, "refunds answer has no items list")
    for entity in items:
        if child(entity, "notes", KEY_NOTE) == refund.idempotency_key:
            return _sent(entity, refund)
    return None


def _sent(entity: object, refund: Refund) -> Sent:
    """A refund entity of ``refund``'s payment (and, once made, its own ``id``) for its amount
    (``amount``, integer paise): ``id`` (``rfnd_…``), ``status`` pending, processed or failed."""
    naming(entity, "payment_id", refund.payment_id, what="refund", provider=_P)
    if refund.gateway_refund_id is not None:
        naming(entity, "id", refund.gateway_refund_id, what="refund", provider=_P)
    if (amount := child(entity, "amount")) is not None:  # left out: not checked, as an id
        same_amount(
            refund, _paise(amount, "refund"), provider=_P, currency=child(entity, "currency")
        )
    status = text(_P, entity, "status")
    if status == "failed":
        named(entity, "payment_id", refund.payment_id, what="refund", provider=_P)
        raise failed_refund(_P, "Razorpay's refund failed", child(entity, "id"))
    return Sent(gateway_refund_id=text(_P, entity, "id"), processed=status == "processed")


def _paise(amount: object, what: str) -> int:
    """Razorpay's amounts are integer paise: anything else is malformed."""
    if isinstance(amount, bool) or not isinstance(amount, int):
        raise MalformedPayload(_P, f"{what} amount is not paise")
    return amount


def _named_payment(entity: object, payment_id: str) -> object:
    """The payment entity asked about (``id``), never another's."""
    naming(entity, "id", payment_id, what="payment", provider=_P)
    return entity


def client(credentials: ApiCredentials, http: httpx.Client) -> RazorpayClient:
    """The status client for these credentials, over ``http``."""
    return RazorpayClient(credentials=credentials, http=http)


def payments(order_id: str, body: bytes) -> Report:
    """``GET /v1/orders/{id}/payments``: a collection whose ``items`` are payment entities,
    amounts in integer paise. A ``refunded`` payment is left aside: its refund comes with the
    refund webhook, and a capture alone would place an order for money given back."""
    doc = read_json(_P, body)
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise MalformedPayload(_P, "payments answer has no items list")
    return listed(items, order_id, _KINDS, _identify, _received, id_field="id")


def _identify(entity: Any, order_id: str) -> tuple[str, str, object]:
    return text(_P, entity, "status"), text(_P, entity, "id"), entity.get("order_id")


def _received(
    entity: Mapping[str, Any], order_id: str, kind: EventKind, status: str, payment_id: str
) -> Received:
    amount = _paise(entity.get("amount"), f"payment {payment_id}")
    return received(
        _P, entity, kind=kind, status=status, payment_id=payment_id,
        merchant_ref=order_id, amount_paise=amount,
        currency=_reports.named_currency(_P, kind, payment_id, entity.get("currency")),
        bank_ref=reference(
            child(entity, "acquirer_data", "rrn"),
            child(entity, "acquirer_data", "bank_transaction_id"),
        ),
    )  # fmt: skip


def stored(event_id: str, entity: dict[str, Any]) -> Report:
    """A stored payment entity, read as the answer it came in."""
    return payments(str(entity.get("order_id")), canonical({"items": [entity]}))


__all__ = ["RazorpayClient", "client", "payments", "send_refund", "stored"]

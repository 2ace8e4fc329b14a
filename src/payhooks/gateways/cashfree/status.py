"""Cashfree's status API, for reconciliation: an order's payments, and the order itself for
its expiry, read as events. Needs httpx (an extra)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from functools import partial
from typing import Any
from urllib.parse import quote

import httpx

from payhooks.events import EventKind, Provider, Received
from payhooks.gateways import _reports
from payhooks.gateways._common import child, named, naming, reference, text_field
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._refunds import (
    Refund,
    RefundIncomplete,
    RefundRefused,
    Sent,
    failed_refund,
    same_amount,
    standing,
)
from payhooks.gateways._reports import Report, canonical, read_json, received, rupees, text
from payhooks.gateways._settlements import INDIA, Page
from payhooks.gateways._status import MAX_PAGES, answer, error_answer, listed, parsed
from payhooks.gateways.cashfree import settlements
from payhooks.gateways.cashfree.adapter import HELD, compared_paise, held
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload

API_VERSION = "2025-01-01"
EXPIRED = frozenset({"EXPIRED", "TERMINATED"})
_P = Provider.CASHFREE
# The webhook acts on SUCCESS (capture, or a pre-authorisation's hold: HELD), PENDING (late
# authorisation) and the failed and user-dropped webhooks; the API's other states
# (NOT_ATTEMPTED, VOID, CANCELLED) carry nothing.
_KINDS: Mapping[str, EventKind] = {
    "SUCCESS": EventKind.PAYMENT_CAPTURED,
    HELD: EventKind.PAYMENT_AUTHORIZED,
    "PENDING": EventKind.PAYMENT_PENDING,
    "FAILED": EventKind.PAYMENT_FAILED,
    "USER_DROPPED": EventKind.PAYMENT_FAILED,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CashfreeClient:
    """``GET /pg/orders/{order_id}/payments`` with ``x-client-id``, ``x-client-secret`` and
    ``x-api-version``; when no payment succeeded, ``GET /pg/orders/{order_id}`` for expiry."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = _P

    def report(self, reference: str) -> Report:
        """The order's payments; when none is captured, also whether the order
        expired."""
        order = f"{self.credentials.base_url}/pg/orders/{quote(reference, safe='')}"
        body = answer(self.provider, self.http, "GET", f"{order}/payments", headers=self._h)
        found = parsed(self.provider, lambda: payments(reference, body))
        if any(r.event.kind is EventKind.PAYMENT_CAPTURED for r in found.received):
            return found
        order_body = answer(self.provider, self.http, "GET", order, headers=self._h)
        expired = parsed(self.provider, lambda: order_expired(order_body, reference))
        return replace(found, expired=expired)  # what it could not read too

    def settlement_pages(self, start: date, end: date) -> Iterator[Page]:
        """``POST /pg/settlement/recon`` for India's days ``start`` to ``end``, ``RECON_LIMIT``
        items a page, each next page from the ``cursor`` the last answered, until one
        answers none or an empty page; a cursor answered twice is an error, never a loop."""
        url = f"{self.credentials.base_url}/pg/settlement/recon"
        filters = {"start_date": _utc(start, time.min), "end_date": _utc(end, time(23, 59, 59))}
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            asked = {"pagination": {"limit": RECON_LIMIT, "cursor": cursor}, "filters": filters}
            body = answer(_P, self.http, "POST", url, headers=self._h, json=asked)
            page = parsed(_P, partial(settlements.recon, body))
            yield page
            if page.cursor is None or not (page.lines or page.unreadable or page.unsettled):
                return
            if page.cursor in seen:
                raise GatewayApiError(_P.value, "the recon report answered a cursor twice")
            seen.add(cursor := page.cursor)
        raise GatewayApiError(_P.value, f"the recon report runs past {MAX_PAGES} pages")

    def send_refund(self, refund: Refund) -> Sent:
        """``POST /pg/orders/{order_id}/refunds`` with the intent's key as ``refund_id``
        (Cashfree's, unique per order: asked again, it never refunds twice). A retry first
        reads ``GET /pg/orders/{order_id}/refunds/{refund_id}`` (``refund_unknown``: not made
        yet), so an answer lost after Cashfree acted never depends on how it answers a known
        id. A 400 or 422 in Cashfree's error shape whose ``type`` is ``invalid_request_error``
        is its refusal, and so is a 409 ``refund_not_allowed`` (``refused``; ``_unmade`` says
        when it stands); a 404 is not,
        whatever its code (``order_not_found`` says the order is unknown to the account the
        credentials name, nothing of the refund), nor another 409 (a request in progress):
        asked again.

        No ``x-idempotency-key`` header: Cashfree keeps the first result under one, a 500
        included, and answers it to every later request with that key, so one 500 would stop
        the refund for good. ``refund_id`` is already the key Cashfree refunds once under."""
        if refund.gateway_order_id is None:
            raise RefundIncomplete(
                _P.value, "Cashfree refunds under the order: the intent names none"
            )
        order = f"{self.credentials.base_url}/pg/orders/{quote(refund.gateway_order_id, safe='')}"
        if refund.attempts > 1 and (made := self._refund_made(order, refund)) is not None:
            return made
        asked = {
            "refund_amount": refund.amount_paise / 100,  # rupees: two decimals are exact here
            "refund_id": refund.idempotency_key,
            "refund_note": _note(refund.reason),
        }
        try:
            body = answer(self.provider, self.http, "POST", f"{order}/refunds", headers=self._h,
                          json=asked)  # fmt: skip
        except GatewayApiError as exc:
            if not refused(exc):
                raise  # a 4xx in no Cashfree error shape (a proxy's page) refuses nothing
            made = self._refund_made(order, refund)  # refused, or already made under the id?
            if made is not None:
                return made
            raise _unmade(refund, exc) from exc
        return parsed(self.provider, lambda: _refunded(read_json(_P, body), refund))

    def refund_status(self, refund: Refund) -> Sent:
        """``GET /pg/orders/{order_id}/refunds/{refund_id}``: the refund as it is now."""
        named = quote(refund.gateway_order_id or "", safe="")
        made = self._refund_made(f"{self.credentials.base_url}/pg/orders/{named}", refund)
        if made is None:
            raise GatewayApiError(_P.value, "Cashfree knows no refund under the intent's id")
        return made

    def _refund_made(self, order: str, refund: Refund) -> Sent | None:
        """``GET /pg/orders/{order_id}/refunds/{refund_id}``: the refund Cashfree made under
        the intent's id, or None on Cashfree's answer for a refund id it does not know
        (``refund_unknown``); any other 404 (the order, the route, the app id) is an error."""
        unknown: list[bool] = []

        def taken(status: int, body: bytes) -> bool:  # asked of a non-2xx answer only
            unknown.append(refund_unknown(status, body))
            return unknown[-1]

        body = answer(self.provider, self.http, "GET",
                      f"{order}/refunds/{quote(refund.idempotency_key, safe='')}",
                      headers=self._h, taken=taken)  # fmt: skip
        if unknown and unknown[-1]:
            return None
        return parsed(self.provider, lambda: _refunded(read_json(_P, body), refund))

    @property
    def _h(self) -> dict[str, str]:
        return {
            "x-client-id": self.credentials.id,
            "x-client-secret": self.credentials.secret,
            "x-api-version": API_VERSION,
            "accept": "application/json",
        }


REFUSING = frozenset({400, 422})
NOT_ALLOWED = "refund_not_allowed"
"""Cashfree's 409 to a refund of an order not PAID, more than six months old or refunded in
full already (docs/providers.md, source [C4])."""
REFUND_ID_EXISTS = "refund_id_already_exists"
"""Cashfree's 400 to a ``refund_id`` it holds a refund under (docs/providers.md, source [C4]):
the refund exists."""
REFUND_NOT_FOUND = "refund_not_found"
REQUEST_AT_FAULT = "invalid_request_error"
"""The ``type`` of an error about the request asked: a 400 or 422 of it is a refusal."""
NOT_FOUND_TYPE = REQUEST_AT_FAULT
"""The ``type`` of Cashfree's 404 error body (its SDK's ``ApiError404``, the one type)."""
RECON_LIMIT = 1000
"""Recon items asked for per call: Cashfree's most (``pagination.limit``, 10 by default)."""


def refund_unknown(status: int, body: bytes) -> bool:
    """Cashfree's answer for a refund id it does not know under an order it knows: a 404 in
    its error shape with ``code`` ``refund_not_found`` and ``type`` ``invalid_request_error``.
    Nothing else is "no refund": a 404 ``order_not_found`` (credentials of another account),
    one about a route or an API version, or one whose body does not read is an error."""
    if status != 404:
        return False
    doc = error_answer(body)
    return (
        doc is not None
        and doc.get("code") == REFUND_NOT_FOUND
        and doc.get("type") == NOT_FOUND_TYPE
    )


def _note(reason: str) -> str:
    """The intent's reason as ``refund_note``, which Cashfree takes at 3 to 100 characters
    (``cashfree-pg``'s ``OrderCreateRefundRequest``): cut at 100; a reason shorter than 3
    (the intent takes one from 1) padded with spaces to 3, so it is not refused for its
    length. Any other reason goes as asked, with no space added."""
    return reason[:100].ljust(3)  # Cashfree refuses a note under 3: only such a one is padded


def refused(exc: GatewayApiError) -> bool:
    """A refusal in Cashfree's error shape (a ``code`` read): a 400 or 422 whose ``type`` says
    the request is at fault (``invalid_request_error``), or a 409 ``refund_not_allowed``. Any
    other 409 (a request in progress), and a 400 or 422 of another type (its server failing,
    a rate limit, the credentials: nothing about the refund), is asked again."""
    if exc.code is None:
        return False
    if exc.status in REFUSING:
        return exc.kind == REQUEST_AT_FAULT
    return exc.status == 409 and exc.code == NOT_ALLOWED


def _unmade(refund: Refund, exc: GatewayApiError) -> GatewayApiError:
    """Cashfree's refusal of a refund its lookup does not show (``refund_not_found``), as the
    sender takes it. ``refund_id_already_exists`` says the refund is made: never a refusal,
    asked again (the lookup first) until the lookup shows it. Any other refusal stands as
    ``standing`` says (right after a lost answer, only once asked again)."""
    if exc.code == REFUND_ID_EXISTS:
        said = f"{exc.reason}: made under the intent's refund_id, not yet readable"
        return GatewayApiError(_P.value, said, status=exc.status, code=exc.code)
    return standing(refund, RefundRefused(_P.value, exc.reason, status=exc.status, code=exc.code))


def _utc(day: date, at: time) -> str:
    """A moment of one of India's days as the recon filters take it: ``2025-01-16T18:30:00Z``."""
    return datetime.combine(day, at, INDIA).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refunded(entity: object, refund: Refund) -> Sent:
    """A refund entity of ``refund`` (its ``refund_id``, the intent's key, under its order):
    ``cf_refund_id``, ``refund_status`` SUCCESS once refunded, PENDING or ONHOLD on its way,
    CANCELLED or FAILED never."""
    naming(entity, "refund_id", refund.idempotency_key, what="refund", provider=_P)
    naming(entity, "order_id", refund.gateway_order_id or "", what="refund", provider=_P)
    if (amount := child(entity, "refund_amount")) is not None:  # left out: not checked
        paise = rupees(_P, amount, "refund_amount")
        same_amount(refund, paise, provider=_P, currency=child(entity, "refund_currency"))
    status = text(_P, entity, "refund_status")
    raw = entity.get("cf_refund_id") if isinstance(entity, dict) else None
    if status in {"CANCELLED", "FAILED"}:
        named(entity, "refund_id", refund.idempotency_key, what="refund", provider=_P)
        raise failed_refund(_P, f"Cashfree's refund is {status}", raw)
    refund_id = str(raw) if isinstance(raw, int) else text(_P, entity, "cf_refund_id")
    return Sent(gateway_refund_id=refund_id, processed=status == "SUCCESS")


def client(credentials: ApiCredentials, http: httpx.Client) -> CashfreeClient:
    """The status client for these credentials, over ``http``."""
    return CashfreeClient(credentials=credentials, http=http)


def payments(order_id: str, body: bytes) -> Report:
    """``GET /pg/orders/{id}/payments``: a JSON array of payment entities, amounts in rupees
    (JSON numbers, read exactly); ``cf_payment_id`` a string (an integer in older versions)."""
    doc = read_json(_P, body)
    if not isinstance(doc, list):
        raise MalformedPayload(_P, "payments answer is not a list")
    return listed(doc, order_id, _KINDS, _identify, _received, id_field="cf_payment_id")


def _identify(entity: Any, order_id: str) -> tuple[str, str, object]:
    """A payment that names no order is the order's asked about. A SUCCESS that is a
    pre-authorisation's hold (``adapter.held``) reads ``HELD``: an authorisation, under a
    key of its own, so the capture reported later is applied."""
    status = text(_P, entity, "payment_status")
    if status == "SUCCESS" and held(entity):
        status = HELD
    raw_id = entity.get("cf_payment_id")
    payment_id = str(raw_id) if isinstance(raw_id, int) else text(_P, entity, "cf_payment_id")
    return status, payment_id, entity.get("order_id", order_id)


def _received(
    entity: Mapping[str, Any], order_id: str, kind: EventKind, status: str, payment_id: str
) -> Received:
    ordered = entity.get("order_amount", entity.get("payment_amount"))
    paid = entity.get("payment_amount")
    if paid is None and kind.pays:  # never read as paid in full, as the webhook is not
        raise MalformedPayload(_P, "payment_amount is missing")
    paid_paise = None if paid is None else rupees(_P, paid, "payment_amount")
    compared = compared_paise(
        rupees(_P, ordered, "order_amount"),
        paid_paise,
        entity.get("payment_offers"),
        entity.get("payment_surcharge"),
    )
    assert compared is not None  # the order amount was read
    return received(
        _P, entity, kind=kind, status=status, payment_id=payment_id,
        merchant_ref=order_id, amount_paise=compared, payment_amount_paise=paid_paise,
        currency=_reports.named_currency(
            _P, kind, payment_id, entity.get("order_currency") or entity.get("payment_currency")
        ),
        bank_ref=reference(entity.get("bank_reference")),
    )  # fmt: skip


def order_expired(body: bytes, order_id: str) -> bool:
    """``GET /pg/orders/{id}``: the order's ``order_status``; EXPIRED or TERMINATED means no
    payment can come for it any more. An answer about another order says nothing of it, nor
    does an ``order_status`` that is not text (a list, an object: unreadable)."""
    doc = read_json(_P, body)
    naming(doc, "order_id", order_id, what="order", provider=_P)
    said = doc.get("order_status") if isinstance(doc, dict) else None
    return text_field(said, "order_status", strict=True, provider=_P) in EXPIRED


def stored(event_id: str, entity: dict[str, Any]) -> Report:
    """A stored payment entity, read as the answer it came in."""
    return payments(str(entity.get("order_id")), canonical([entity]))


__all__ = ["API_VERSION", "CashfreeClient", "client", "order_expired", "payments", "stored"]

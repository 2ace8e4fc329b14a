"""Juspay's Order Status API, for reconciliation and for confirming its webhooks:
``GET /orders/{order_id}`` with HTTP Basic (the API key, an empty password), and its answer
read as events. Needs httpx (an extra)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any
from urllib.parse import quote

import httpx

from payhooks.events import EventKind, Provider, Received, storable
from payhooks.gateways._common import naming, require
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._reports import (
    KEY_PREFIX,
    Report,
    canonical,
    key,
    printable,
    read_json,
    received,
)
from payhooks.gateways._status import answer, error_answer, error_under_200, parsed
from payhooks.gateways.juspay.adapter import (
    CHARGED,
    Said,
    order,
    refund_of,
    successes,
)
from payhooks.plumbing.errors import MalformedPayload

API_VERSION = "2023-06-30"
"""The ``version`` header: the date of the response shape asked for (HDFC SmartGateway's
sample request sends this one; Juspay's docs ask for a YYYY-MM-DD date)."""
NOT_FOUND = "NOT_FOUND"
NOT_FOUND_ID = 40
NOT_FOUND_CODE = "RESOURCE_NOT_FOUND"
NOT_CREATED = frozenset({400, 404})
"""The statuses Juspay's answer for an order it never created comes under: 400 in its Order
Status API's error table, 404 ("Not Found", its body unshown) in its older reference. Under
either, only that answer's body is one (``not_created``); Juspay documents a 404 for a URL it
does not serve, and any other 4xx (the merchant, the route) is an error, asked again."""
REFUND_STATUS = "refund.SUCCESS"
_P = Provider.JUSPAY
# What changes on an order as it is refunded: left out of a payment's stored entity, so asking
# again after a refund reads the same payment, not one with another body under its key.
_REFUND_FIELDS = frozenset(
    {"refunds", "amount_refunded", "refunded", "maximum_eligible_refund_amount"}
)
# What a refund's stored entity keeps of its order: enough to read it again as that refund.
_REFUND_CONTEXT = ("id", "order_id", "merchant_id", "status", "amount", "effective_amount",
                   "currency", "txn_id", "txn_uuid")  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class JuspayClient:
    """``GET /orders/{order_id}`` with HTTP Basic (API key, empty password: ``key:`` encoded,
    as documented), ``x-merchantid`` and ``version``. No ``x-routing-id``: Juspay asks for the
    one the merchant sent at order creation (its customer id), which payhooks does not know."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = _P

    def report(self, reference: str) -> Report:
        """The order's status; Juspay's documented answer for an order it never created is
        no order, whatever else a 4xx says is an API error."""
        url = f"{self.credentials.base_url}/orders/{quote(reference, safe='')}"
        auth = (self.credentials.secret, "")
        body = answer(self.provider, self.http, "GET", url, auth=auth, headers=self._h,
                      taken=partial(_not_created_answer, reference))  # fmt: skip
        return parsed(self.provider, lambda: order_report(reference, body))

    @property
    def _h(self) -> dict[str, str]:
        return {
            "x-merchantid": self.credentials.id,
            "version": API_VERSION,
            "content-type": "application/x-www-form-urlencoded",  # as Juspay's samples send
            "accept": "application/json",
        }


def client(credentials: ApiCredentials, http: httpx.Client) -> JuspayClient:
    """The status client for these credentials, over ``http``."""
    return JuspayClient(credentials=credentials, http=http)


def not_created(order_id: str, doc: object, *, error: bool = False) -> bool:
    """Juspay's answer for an order id it never created: the order's status ``NOT_FOUND``
    (status id 40, "order id is not created at Juspay"), naming the order asked about; as an
    ``error`` (a 4xx), with its ``error_info.code`` ``RESOURCE_NOT_FOUND`` too, as the Order
    Status API's error table prints it. Nothing else is "no order": a ``RESOURCE_NOT_FOUND``
    alone may be about the merchant (Juspay's list of codes names the merchant id first)."""
    if not isinstance(doc, dict):
        return False
    named = (doc.get("status"), doc.get("status_id"), doc.get("order_id"))
    if named != (NOT_FOUND, NOT_FOUND_ID, order_id):
        return False
    info = doc.get("error_info")
    return not error or (isinstance(info, dict) and info.get("code") == NOT_FOUND_CODE)


def _not_created_answer(order_id: str, status: int, body: bytes) -> bool:
    """``answer``'s ``taken``: a 4xx that is Juspay's answer for an order it never created."""
    if status not in NOT_CREATED:
        return False
    return not_created(order_id, error_answer(body), error=True)


def order_report(order_id: str, body: bytes) -> Report:
    """The order object (the webhook's ``content.order`` is the same): the one attempt it names
    (the one deciding its status) as a payment when that status is one the webhook acts on,
    and, when it is CHARGED, each refund whose status is SUCCESS. Juspay's answer for an order
    it never created (``not_created``) is no order; a ``NOT_FOUND`` short of it, or an answer
    about another order id, is unreadable (an error, asked again later, never a decision); a
    state that carries nothing (NEW, STARTED, AUTO_REFUNDED...) is skipped."""
    doc = read_json(_P, body)
    if not isinstance(doc, dict):
        raise MalformedPayload(_P, "order status answer is not an object")
    status = doc.get("status")
    if not_created(order_id, doc):
        return Report()
    if status == NOT_FOUND:
        raise MalformedPayload(_P, "a NOT_FOUND answer that is not Juspay's for this order_id")
    if status == "error" and "order_id" not in doc:  # its error shape, under 200
        raise error_under_200(_P, body)
    if not isinstance(doc.get("order_id"), str) or not isinstance(status, str):
        raise MalformedPayload(_P, "order status answer has no order_id or status")
    naming(doc, "order_id", order_id, what="order status", provider=_P)
    said = order(doc, "order")
    found: list[Received] = []
    skipped: list[str] = []
    if said.kind is EventKind.OTHER:
        skipped.append(f"{said.payment_id or order_id}:{status}")
    else:
        found.append(_payment(doc, said))
    unreadable: list[str] = []
    for refund in successes(doc.get("refunds")) if status == CHARGED else ():
        try:
            found.append(_refund(doc, said, refund))
        except MalformedPayload as exc:  # this refund's trouble: never the others' or the capture's
            named = printable(str(refund.get("unique_request_id") or refund.get("id") or ""), 80)
            unreadable.append(f"refund {named or '?'} unreadable: {exc.reason}")
    skipped += _refunds_left(doc, status)
    return Report(received=tuple(found), skipped=tuple(skipped), unreadable=tuple(unreadable))


def _payment(doc: Mapping[str, Any], said: Said) -> Received:
    assert said.status and said.order_id and said.payment_id and said.amount is not None
    entity = {name: value for name, value in doc.items() if name not in _REFUND_FIELDS}
    return received(
        _P, entity, kind=said.kind, status=said.status, payment_id=said.payment_id,
        merchant_ref=said.order_id, amount_paise=said.amount, currency=said.currency,
        payment_amount_paise=said.paid, bank_ref=said.bank_ref,
    )  # fmt: skip


def _refund(doc: Mapping[str, Any], payment: Said, refund: dict[str, object]) -> Received:
    """A successful refund of the order's payment, under ``reconcile:<refund id>:refund.SUCCESS``;
    its stored body is the refund with what it needs of its order, never the whole order
    (whose body is the payment's)."""
    said = refund_of(payment, refund, strict=True)
    require({"refund id": said.refund_id, "refund amount": said.refund_amount}, provider=_P)
    assert said.refund_id is not None
    entity = {name: doc[name] for name in _REFUND_CONTEXT if name in doc}
    body = canonical({**entity, "refunds": [refund]})
    event = replace(said, kind=EventKind.REFUND_PROCESSED).event(
        event_type=f"{KEY_PREFIX}.{REFUND_STATUS}",
        event_id=key(said.refund_id, REFUND_STATUS),
        body=body,
        unconfirmed=False,
    )
    return Received(event=storable(event), body=body, headers={})


def _refunds_left(doc: Mapping[str, Any], status: str) -> list[str]:
    """Refunds not reported, as ``refund id:refund <status>``: not (yet) successful, or of an
    order that is not CHARGED (an auto-refunded one is Juspay's own doing)."""
    refunds = doc.get("refunds")
    left: list[str] = []
    for refund in refunds if isinstance(refunds, list) else ():
        if not isinstance(refund, dict):
            continue
        state = refund.get("status")
        if status != CHARGED or state != "SUCCESS":
            ident = refund.get("unique_request_id") or refund.get("id")
            left.append(f"{ident}:refund {state}")
    return left


def stored(event_id: str, entity: dict[str, Any]) -> Report:
    """A stored payment or refund entity, read as the answer it came in."""
    return order_report(str(entity.get("order_id")), canonical(entity))


__all__ = ["API_VERSION", "JuspayClient", "client", "not_created", "order_report", "stored"]

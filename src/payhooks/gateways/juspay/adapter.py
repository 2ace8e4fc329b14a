"""Juspay webhooks (Express Checkout, HyperCheckout, HDFC SmartGateway): HTTP Basic with the
username and password the merchant set in Juspay's dashboard, a JSON body nothing signs, and
amounts in rupees. The credential proves who sent a body, never what it says, so every event
is ``unconfirmed``: it takes effect as Juspay's Order Status API confirms it
(``payhooks.intake.confirmations``)."""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from payhooks.events import Event, EventKind, Provider, is_text
from payhooks.gateways import _common
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

AUTHORIZATION_HEADER = "authorization"
# Read, never kept (``_adapter.UNKEPT_HEADERS``): it holds the webhook password itself.
_HEADERS_READ: tuple[str, ...] = (AUTHORIZATION_HEADER,)
_P = Provider.JUSPAY

CHARGED = "CHARGED"
SUCCESS = "SUCCESS"
ORDER_REFUNDED = "ORDER_REFUNDED"
STATUS_KINDS: Mapping[str, EventKind] = {
    CHARGED: EventKind.PAYMENT_CAPTURED,
    "AUTHORIZED": EventKind.PAYMENT_AUTHORIZED,
    "AUTHORIZATION_FAILED": EventKind.PAYMENT_FAILED,
    "AUTHENTICATION_FAILED": EventKind.PAYMENT_FAILED,
    "JUSPAY_DECLINED": EventKind.PAYMENT_FAILED,
    "PENDING_VBV": EventKind.PAYMENT_PENDING,
    "AUTHORIZING": EventKind.PAYMENT_PENDING,
}
"""An order's (or a transaction's) ``status`` and what it means; any other is ``OTHER``."""

# Events whose content's status decides the kind: the order's, or the transaction's.
_ORDER_EVENTS = frozenset({"ORDER_SUCCEEDED", "ORDER_FAILED", "ORDER_AUTHORIZED", "TXN_CREATED"})
_TXN_EVENTS = frozenset({"TXN_CHARGED", "TXN_FAILED"})

_EVENT_ID = re.compile(r"[!-9;-~]{1,128}")  # printable ASCII, no space, no ':'
_RUPEES = re.compile(r"[0-9]+(\.[0-9]+)?")
_NOT_A_REFERENCE = "NA"  # what Juspay writes in an empty rrn or epg_txn_id


def authorization(credential: str) -> str:
    """The ``Authorization`` value Juspay sends for ``username:password`` (tests, the
    simulated gateway): Basic, base64 of its UTF-8 bytes."""
    return "Basic " + base64.b64encode(credential.encode("utf-8")).decode("ascii")


@dataclass(frozen=True, slots=True, kw_only=True)
class Juspay(_common.CredentialsAdapter):
    """Several credentials are accepted while one is rotated out of Juspay's dashboard; each
    is ``username:password`` (split at the first ':': a password may hold more)."""

    provider = _P
    headers_read = _HEADERS_READ
    missing = "Juspay needs at least one webhook credential"
    malformed = (
        "each Juspay webhook credential is username:password as set in Juspay's "
        "dashboard (Settings, Webhooks), both non-empty"
    )

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """The Basic credentials against each configured one, in constant time."""
        username, password = basic_credentials(_common.header_value(headers, AUTHORIZATION_HEADER))
        found = False
        for credential in self.credentials:
            user, _, secret = credential.encode("utf-8").partition(b":")
            same_user = hmac.compare_digest(user, username)
            found |= same_user & hmac.compare_digest(secret, password)
        if not found:
            raise SignatureMismatch(_P, "Basic credentials match no configured credential")

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event:
        """A webhook as an unconfirmed ``Event``: it takes effect once the Order Status
        API confirms it."""
        doc = _common.load_json_object(body, provider=_P)
        event_type = _common.event_name(doc.get("event_name"), "event_name", provider=_P)
        said = _read(event_type, doc.get("content"))
        key = delivery_key(_event_id(doc.get("id")), said, event_type, body)
        return said.event(event_type=event_type, event_id=key, body=body, unconfirmed=True)


def basic_credentials(value: str | None) -> tuple[bytes, bytes]:
    """The username and password of a ``Basic`` header, as UTF-8 bytes: the scheme in any
    case, canonical base64 only, split at the first ':'. Anything else is unauthenticated."""
    if not value or not value.strip():
        raise SignatureMismatch(_P, "Authorization header missing")
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "basic":
        raise SignatureMismatch(_P, "Authorization is not Basic")
    token = token.strip()
    if not token:
        raise SignatureMismatch(_P, "Basic credentials missing")
    decoded = _base64(token)
    try:
        decoded.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SignatureMismatch(_P, "Basic credentials are not UTF-8") from exc
    username, colon, password = decoded.partition(b":")
    if not colon:
        raise SignatureMismatch(_P, "Basic credentials hold no ':' between username and password")
    return username, password


def _base64(token: str) -> bytes:
    """Standard base64 exactly as an encoder writes it: no other character, padding as due,
    and nothing that decodes the same but encodes otherwise."""
    if not token.isascii():
        raise SignatureMismatch(_P, "Basic credentials are not base64")
    try:
        decoded = base64.b64decode(token, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SignatureMismatch(_P, "Basic credentials are not base64") from exc
    if base64.b64encode(decoded).decode("ascii") != token:
        raise SignatureMismatch(_P, "Basic credentials are not canonical base64")
    return decoded


def delivery_key(event_id: str, said: Said, event_type: str, body: bytes) -> str:
    """The envelope's ``id``, and for an event payhooks asks Juspay's API about, the order it
    asks about (and a refund's id): ``<id>:<order_id>[:<refund id>]``. Nothing signs the body,
    so a key of the id alone could be taken by a callback naming another order under a real
    event's id, and the real one would be answered as its copy and never confirmed. A part
    holding a ':' (ambiguous): the body's hash. No key takes a key space payhooks mints."""
    if said.kind is EventKind.OTHER or said.order_id is None:
        return _common.unreserved(_P, event_id)
    refund = (said.refund_id,) if said.kind is EventKind.REFUND_PROCESSED else ()
    key = _common.plain_key(event_id, said.order_id, *refund) or _common.body_key(event_type, body)
    return _common.unreserved(_P, key)


def _event_id(value: object) -> str:
    """The envelope's ``id`` (``evt_V2_`` and 32 hex digits): a short id of printable ASCII,
    never holding a ':'."""
    if value is None or value == "":
        raise MalformedPayload(_P, "id is missing")
    if not isinstance(value, str):
        raise MalformedPayload(_P, "id is not a string")
    if _EVENT_ID.fullmatch(value) is None:
        raise MalformedPayload(
            _P, "id is not a short id (up to 128 printable ASCII characters, no space or ':')"
        )
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Said:
    """What one order (or transaction, or refund) says, every field optional until the event
    kind requires it."""

    kind: EventKind = EventKind.OTHER
    status: str | None = None
    order_id: str | None = None
    payment_id: str | None = None
    amount: int | None = None
    paid: int | None = None
    currency: str | None = None
    refund_id: str | None = None
    refund_amount: int | None = None
    bank_ref: str | None = None

    def event(self, *, event_type: str, event_id: str, body: bytes, unconfirmed: bool) -> Event:
        """The event it makes, a webhook's (``unconfirmed``) or the status API's."""
        return Event(
            provider=_P,
            kind=self.kind,
            event_type=event_type,
            event_id=event_id,
            payment_id=self.payment_id,
            merchant_ref=self.order_id,
            amount_paise=self.amount,
            payment_amount_paise=self.paid,
            currency=self.currency,
            refund_id=self.refund_id,
            refund_amount_paise=self.refund_amount,
            bank_ref=self.bank_ref,
            payload_sha256=_common.sha256_hex(body),
            unconfirmed=unconfirmed,
        )


def _read(event_type: str, content: object) -> Said:
    """The event's content read by what its name promises: an order or transaction whose
    status decides the kind, an order's newest successful refund, or, for any other event
    (mandates, notifications, names Juspay adds), whatever order it carries, as ``OTHER``."""
    if event_type in _ORDER_EVENTS:
        return order(_common.child(content, "order"), "content.order")
    if event_type in _TXN_EVENTS:
        return transaction(_common.child(content, "txn"))
    if event_type == ORDER_REFUNDED:
        return refunded(_common.child(content, "order"))
    if isinstance(_common.child(content, "order"), dict):
        return order(_common.child(content, "order"), "content.order", acts=False)
    if isinstance(_common.child(content, "txn"), dict):
        return transaction(_common.child(content, "txn"), acts=False)
    return Said()


def order(entity: object, where: str, *, acts: bool = True) -> Said:
    """An order as the Order Status API returns it (the webhook's ``content.order`` is that
    object). ``amount`` is the order's, compared with the cart; ``effective_amount`` what the
    customer paid when a surcharge or an offer changed it. ``acts``: its status decides the
    kind (else ``OTHER``, every field lenient)."""
    kind, status = _kind(entity, f"{where}.status", acts=acts)
    strict = kind is not EventKind.OTHER
    amount = paise(_common.child(entity, "amount"), "amount", strict=strict)
    paid = paise(_common.child(entity, "effective_amount"), "effective_amount", strict=False)
    return _attempt(entity, kind, status, amount=amount, paid=paid, needed=("amount", amount))


def transaction(entity: object, *, acts: bool = True) -> Said:
    """``content.txn`` (TXN_CHARGED, TXN_FAILED): one attempt. Its ``net_amount`` is the
    order's amount, ``txn_amount`` what was charged (a surcharge and its tax on top)."""
    kind, status = _kind(entity, "content.txn.status", acts=acts)
    strict = kind is not EventKind.OTHER
    charged = paise(_common.child(entity, "txn_amount"), "txn_amount", strict=strict)
    net = paise(_common.child(entity, "net_amount"), "net_amount", strict=False)
    amount = net if net is not None else charged
    return _attempt(
        entity, kind, status, amount=amount, paid=charged, needed=("txn_amount", charged)
    )


def _kind(entity: object, where: str, *, acts: bool) -> tuple[EventKind, str | None]:
    """The kind an order's or a transaction's status makes (``OTHER`` unless it ``acts``),
    and that status."""
    status = _status(_common.child(entity, "status"), where, decides=acts)
    return STATUS_KINDS.get(status or "", EventKind.OTHER) if acts else EventKind.OTHER, status


def _attempt(
    entity: object,
    kind: EventKind,
    status: str | None,
    *,
    amount: int | None,
    paid: int | None,
    needed: tuple[str, int | None],
) -> Said:
    """An order or a transaction, its amounts read: the fields both carry alike. An event
    payhooks acts on needs its order, its attempt and ``needed`` (the amount it compares)."""
    strict = kind is not EventKind.OTHER
    said = Said(
        kind=kind,
        status=status,
        order_id=_id(_common.child(entity, "order_id"), "order_id", strict=strict),
        payment_id=_payment_id(entity, strict=strict),
        amount=amount,
        paid=paid,
        currency=_common.text_field(
            _common.child(entity, "currency"), "currency", strict=strict, provider=_P
        ),
        bank_ref=bank_reference(_common.child(entity, "payment_gateway_response")),
    )
    if strict:
        name, value = needed
        _common.require(
            {"order_id": said.order_id, "txn_id": said.payment_id, name: value}, provider=_P
        )
    return said


def refunded(entity: object) -> Said:
    """ORDER_REFUNDED: the order with its ``refunds[]``; the event is about the newest refund
    whose status is SUCCESS (none: ``OTHER``). The order's status stays CHARGED after a
    merchant's refund, and ``refunded`` means refunded in full only, so neither is read."""
    refund = newest_success(_common.child(entity, "refunds"))
    if refund is None:
        return order(entity, "content.order", acts=False)
    payment = order(entity, "content.order", acts=False)
    said = refund_of(payment, refund, strict=True)
    _common.require(
        {
            "order_id": said.order_id,
            "txn_id": said.payment_id,
            "refund unique_request_id": said.refund_id,
            "refund amount": said.refund_amount,
        },
        provider=_P,
    )
    return said


def refund_of(payment: Said, refund: Mapping[str, object], *, strict: bool) -> Said:
    """One entry of an order's ``refunds[]``, of the order's payment: its id is the merchant's
    ``unique_request_id`` (``id`` is null while a refund is pending), else Juspay's ``id``."""
    return replace(
        payment,
        kind=EventKind.REFUND_PROCESSED,
        status=SUCCESS,
        refund_id=_id(
            refund.get("unique_request_id") or refund.get("id"), "refund id", strict=strict
        ),
        refund_amount=paise(refund.get("amount"), "refund amount", strict=strict),
        bank_ref=_common.reference(_meaningful(refund.get("arn"))),  # on the customer's statement
    )


def newest_success(refunds: object) -> Mapping[str, object] | None:
    """The SUCCESS refund created last (``created`` is ISO-8601 UTC; on a tie, or without it,
    the later in the list)."""
    found: list[tuple[str, int, dict[str, object]]] = []
    for index, refund in enumerate(refunds if isinstance(refunds, list) else ()):
        if isinstance(refund, dict) and refund.get("status") == SUCCESS:
            created = refund.get("created")
            found.append((created if isinstance(created, str) else "", index, refund))
    return max(found, key=lambda entry: entry[:2])[2] if found else None


def successes(refunds: object) -> list[dict[str, object]]:
    """Every refund of ``refunds[]`` whose status is SUCCESS, in the list's order."""
    listed = refunds if isinstance(refunds, list) else []
    return [r for r in listed if isinstance(r, dict) and r.get("status") == SUCCESS]


def paise(value: object, field: str, *, strict: bool) -> int | None:
    """Rupees to exact paise: a JSON number (parsed as Decimal, never a float) or, as some of
    Juspay's samples write it, a plain numeric string (``"1551"``, ``"665.34"``). Missing,
    null or empty is None."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and _RUPEES.fullmatch(value) is None:
        problem = f"{field} is not a rupee amount: {_common.shown(value)}"
        _common.refuse(problem, strict=strict, provider=_P)
        return None
    if isinstance(value, float):  # never from load_json_object; refused rather than rounded
        _common.refuse(f"{field} is not exact", strict=strict, provider=_P)
        return None
    return _common.optional_paise(value, field, strict=strict, provider=_P)


def bank_reference(response: object) -> str | None:
    """The reference on the customer's statement, from ``payment_gateway_response``: the RRN,
    else the gateway's own transaction id, else the authorisation code. For search only."""
    names = ("rrn", "epg_txn_id", "auth_id_code")
    return _common.reference(*(_meaningful(_common.child(response, name)) for name in names))


def _meaningful(value: object) -> object:
    return None if value == _NOT_A_REFERENCE else value


def _payment_id(entity: object, *, strict: bool) -> str | None:
    """The attempt's id: ``txn_id`` (``<merchant>-<order>-<n>``), else ``txn_uuid``. The
    webhooks and the Order Status API name it alike, so both find one payment."""
    return _id(_common.child(entity, "txn_id"), "txn_id", strict=strict) or _id(
        _common.child(entity, "txn_uuid"), "txn_uuid", strict=strict
    )


def _id(value: object, field: str, *, strict: bool) -> str | None:
    """An id Juspay writes as a string; a whole number (type drift, as its samples show for
    amounts) is read as the same string."""
    return _common.id_field(value, field, strict=strict, provider=_P)


def _status(value: object, field: str, *, decides: bool) -> str | None:
    """Where the status decides the kind, one missing or not text is malformed; elsewhere it
    is left out, like any odd field of an event nothing acts on."""
    if isinstance(value, str) and value and is_text(value):
        return value
    _common.refuse(f"{field} is missing or not a string", strict=decides, provider=_P)
    return None


__all__ = [
    "AUTHORIZATION_HEADER",
    "STATUS_KINDS",
    "Juspay",
    "Said",
    "authorization",
    "bank_reference",
    "basic_credentials",
    "newest_success",
    "order",
    "paise",
    "refund_of",
    "successes",
]

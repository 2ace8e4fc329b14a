"""PayU India payment posts, a form whose ``hash`` field is a salted SHA-512 of some fields,
and its refund callbacks, JSON that nothing signs (docs/providers.md, "PayU")."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qsl, unquote, urlencode

from payhooks.events import Event, EventKind, Provider
from payhooks.gateways import _common
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch, UnsignedChargeback

_HEADERS_READ: tuple[str, ...] = ()
_P = Provider.PAYU

# Reverse order of the request hash; the udf10..udf6 slots are empty unless they were sent.
_HASHED_FIELDS = (
    "status",
    *(f"udf{n}" for n in range(10, 0, -1)),
    "email",
    "firstname",
    "productinfo",
    "amount",
    "txnid",
    "key",
)

_VERIFIED_FIELDS = (*_HASHED_FIELDS, "additionalCharges")

_KINDS: Mapping[str, EventKind] = {
    "success": EventKind.PAYMENT_CAPTURED,
    "failure": EventKind.PAYMENT_FAILED,
    "pending": EventKind.PAYMENT_PENDING,
}

UNMAPPED_FIELD = "unmappedstatus"
AUTH = "auth"
HELD = "AUTHORIZED"
"""The status part of the key of a success PayU reports only authorised (a post's
``<txnid>:AUTHORIZED``, reconciliation's ``reconcile:<txnid>:AUTHORIZED``), so the capture
reported after it (``<txnid>:success``) is never its duplicate. No ``status`` PayU writes, and
no key of another attempt (``<txnid>:success:<mihpayid>``) has two parts."""

_RUPEES = re.compile(r"[0-9]+(\.[0-9]+)?")

# A real PayU post is a few KB (about 60 fields; udf1..udf10 hold up to 255 characters each).
# The form is parsed before its hash can be checked, so what an unauthenticated sender can
# make us parse is bounded here, in bytes and in fields.
MAX_BODY_BYTES = 32 * 1024
MAX_FIELDS = 200
MAX_NAME_CHARS = 64

CHARGEBACK_EVENT = "dispute"
CHARGEBACK_REFUSED = (
    "a chargeback notice (event: dispute) carries nothing payhooks can authenticate: no hash, "
    "no merchant key; answer chargebacks in PayU's dashboard (docs/providers.md, 'Disputes')"
)
"""PayU's chargeback webhook (``{"type": "payments", "event": "dispute", "cb_id", "txn_id",
"cb_status", ...}``) is JSON that nothing signs and that names the merchant only by its PayU id
(``mid``): anyone could send one. It is refused as unauthenticated (``UnsignedChargeback``, 401
``unsigned_chargeback``), saying so, rather than recorded as a dispute a forger chose; and it is
counted as what it is, not as a forged signature."""

REFUND_ACTION = "refund"
REFUND_SUCCESS = "success"
REFUND_KEY_SUFFIX = "refund."
"""A refund callback's key is ``<txnid>:<request_id>:refund.<status>``: no payment post's
key (``<txnid>:<status>``, its status hashed) nor a resent post's (``<txnid>:success:<mihpayid>``)
ends so. The txnid is in it, though unsigned: a forged callback naming another order under a
real refund's request id takes a key of its own, never the one PayU's own callback will."""


def reverse_hash(fields: Mapping[str, str], salt: str) -> str:
    """The ``hash`` PayU posts back: SALT|status|udf10..udf1|email|...|txnid|key, SHA-512.

    Values are used exactly as posted (``10`` and ``10.00`` hash differently); PayU's own
    Python SDK leaves ``status`` out, which its docs contradict, so it is not followed here.
    """
    parts = [salt, *(fields.get(name, "") for name in _HASHED_FIELDS)]
    additional = fields.get("additionalCharges", "")
    if additional:
        parts.insert(0, additional)
    return hashlib.sha512("|".join(parts).encode("utf-8")).hexdigest()


def encode(fields: Mapping[str, str] | Sequence[tuple[str, str]]) -> bytes:
    """A form body as PayU posts it, for tests and the demo gateway."""
    return urlencode(fields).encode("ascii")


def decode_form(body: bytes) -> dict[str, str]:
    """The posted fields; anything ambiguous about what was hashed is a bad signature.

    Nothing is proven before the hash matches, so undecodable bytes (including a
    percent-escape that is not UTF-8, which would otherwise become U+FFFD) and a field
    posted twice are rejected as unauthenticated rather than as malformed.
    """
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, errors="strict", max_num_fields=MAX_FIELDS)
    except UnicodeDecodeError as exc:
        raise SignatureMismatch(_P, "form body is not UTF-8") from exc
    except ValueError as exc:  # parse_qsl's "Max number of fields exceeded"
        raise SignatureMismatch(_P, f"form has more than {MAX_FIELDS} fields") from exc
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise SignatureMismatch(_P, f"form field {name!r} is posted more than once")
        fields[name] = value
    return fields


def _unquote(text: str) -> str:
    """One name or value exactly as ``parse_qsl`` decodes it."""
    return unquote(text.replace("+", " "), errors="strict")


def _raw_fields(body: bytes) -> dict[str, str]:
    """The form's names, decoded, each with its value still escaped: the same split as
    ``parse_qsl``, with the same refusals as ``decode_form``, but the cost of decoding a value
    is paid only for the few fields the hash covers (unquoting is the slow part of a form)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SignatureMismatch(_P, "form body is not UTF-8") from exc
    if text.count("&") >= MAX_FIELDS:
        raise SignatureMismatch(_P, f"form has more than {MAX_FIELDS} fields")
    fields: dict[str, str] = {}
    for pair in text.split("&"):
        if pair:
            raw_name, _, raw_value = pair.partition("=")
            name = _decoded(raw_name[: MAX_NAME_CHARS * 3 + 1])
            if len(name) > MAX_NAME_CHARS:
                raise SignatureMismatch(_P, f"a form field name is over {MAX_NAME_CHARS} chars")
            if name in fields:
                raise SignatureMismatch(_P, f"form field {name!r} is posted more than once")
            fields[name] = raw_value
    return fields


def _decoded(text: str) -> str:
    try:
        return _unquote(text)
    except UnicodeDecodeError as exc:
        raise SignatureMismatch(_P, "form field is not UTF-8") from exc


@dataclass(frozen=True, slots=True, kw_only=True)
class PayU:
    """PayU signs inside the form, with a salt rather than an HMAC key; all salts are tried."""

    provider = _P
    headers_read = _HEADERS_READ
    max_body_bytes = MAX_BODY_BYTES
    merchant_key: str
    salts: tuple[str, ...] = field(repr=False)  # never in a log or an error report

    def __post_init__(self) -> None:
        if self.merchant_key == "":
            raise ValueError("PayU needs the merchant key")
        _common.require_secrets(self.salts, "PayU needs at least one non-empty salt")

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """A post for another merchant key, or without a hash, is refused like a bad signature.

        Only the names and the hashed values are decoded before the hash matches. A JSON body
        is PayU's only as a refund callback for the configured key: nothing signs it, so what
        it says takes effect only as PayU's ``check_action_status`` confirms it (``parse``
        marks it unconfirmed)."""
        if is_refund_callback(body):
            doc = _refund_doc(body)
            if doc.get("event") == CHARGEBACK_EVENT:
                raise UnsignedChargeback(_P, CHARGEBACK_REFUSED)
            given = doc.get("key")
            if not isinstance(given, str) or not hmac.compare_digest(
                given.encode("utf-8", "surrogatepass"), self.merchant_key.encode()
            ):
                raise SignatureMismatch(_P, "refund callback: key is not the configured key")
            if doc.get("action") != REFUND_ACTION:
                raise SignatureMismatch(
                    _P, "a JSON post is PayU's only as a refund callback (action: refund)"
                )
            return
        raw = _raw_fields(body)
        if _decoded(raw.get("key", "")) != self.merchant_key:
            raise SignatureMismatch(_P, "key is not the configured merchant key")
        received = _decoded(raw.get("hash", ""))
        if not received:
            raise SignatureMismatch(_P, "hash missing")
        hashed = {name: _decoded(raw[name]) for name in _VERIFIED_FIELDS if name in raw}
        expected = [reverse_hash(hashed, salt) for salt in self.salts]
        _common.matches_any(expected, received, provider=_P)

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event:
        """A payment post (form fields) or a refund callback (JSON) as an ``Event``."""
        if is_refund_callback(body):
            return _refund(body)
        fields = _read_fields(body)
        status = fields.get("status", "")
        if status == "":
            raise MalformedPayload(_P, "status is missing")
        kind, key_status = kind_of(status, fields.get(UNMAPPED_FIELD))
        event_type = f"payment.{status}"
        merchant_ref = fields.get("txnid") or None
        amount = _amount(fields.get("amount"), strict=kind is not EventKind.OTHER)
        if kind is not EventKind.OTHER:
            _common.require({"txnid": merchant_ref, "amount": amount}, provider=_P)
        # Keys and identity come only from hashed fields: mihpayid is not hashed, so a customer
        # could resend their own signed post under the mihpayid PayU gives the next payment.
        key = _common.delivery_key(merchant_ref, key_status)
        return replace(
            _of_txnid(body, kind=kind, event_type=event_type, txnid=merchant_ref, key=key),
            amount_paise=amount,
            # Not hashed: shown to help find the payment, never used to identify it.
            bank_ref=_common.reference(*(fields.get(name) for name in _REFERENCES)),
            attempt_id=attempt(fields.get(ATTEMPT_FIELD)) if kind is not EventKind.OTHER else None,
        )


def _of_txnid(
    body: bytes, *, kind: EventKind, event_type: str, txnid: str | None, key: str | None
) -> Event:
    """What a payment post and a refund callback say alike: the payment is the merchant's
    txnid (PayU's own ``mihpayid`` is never its identity), in rupees, keyed on ``key`` or,
    lacking one, on the body."""
    return Event(
        provider=_P,
        kind=kind,
        event_type=event_type,
        event_id=_common.unreserved(_P, key or _common.body_key(event_type, body)),
        payment_id=txnid,
        merchant_ref=txnid,
        currency="INR",
        payload_sha256=_common.sha256_hex(body),
    )


def kind_of(status: str, unmapped: object) -> tuple[EventKind, str]:
    """A payment's kind from PayU's ``status`` (the state PayU says to map an order on), and
    the status part of its key. ``unmappedstatus`` refines one: ``auth`` under success is a
    payment the bank authorised and debited that PayU has not captured, an authorisation
    (``PAYMENT_AUTHORIZED``, keyed ``HELD``), never a capture [docs: payment state
    explanations]. Every other word under success (``captured``, or none: a post of an
    integration that sends none) is a capture, as the signed status says. The same rule for a
    post and for the status API's answers. PayU writes its states in more than one case
    (``success`` in its answers, ``Success`` in its state table): compared in any, and keyed
    in PayU's usual one, so that one state is one key however it was written; a status none
    of PayU's is ``OTHER``, keyed as written."""
    word = status.lower()
    kind = _KINDS.get(word, EventKind.OTHER)
    if kind is EventKind.PAYMENT_CAPTURED and held(unmapped):
        return EventKind.PAYMENT_AUTHORIZED, HELD
    return kind, word if kind is not EventKind.OTHER else status


def known(status: str) -> bool:
    """Whether ``status`` is one of PayU's payment states (``success``, ``failure``,
    ``pending``), in any case."""
    return status.lower() in _KINDS


def held(unmapped: object) -> bool:
    """``unmappedstatus`` saying ``auth``, in any case. It is outside a post's hash: a
    customer can write it into their own signed post, which then claims less than it did (an
    authorisation), or out of one, which then reads as the capture PayU's status says
    (docs/providers.md, "PayU's payment states")."""
    return isinstance(unmapped, str) and unmapped.strip().lower() == AUTH


def is_refund_callback(body: bytes) -> bool:
    """A JSON object: a form PayU posts never starts with ``{`` (it would be escaped)."""
    return body.lstrip(b" \t\r\n")[:1] == b"{"


def _refund_doc(body: bytes) -> dict[str, object]:
    """The callback's JSON before anything proved it PayU's: unreadable is unauthenticated."""
    try:
        return _common.load_json_object(body, provider=_P)
    except MalformedPayload as exc:
        raise SignatureMismatch(_P, f"refund callback: {exc.reason}") from exc


def _refund(body: bytes) -> Event:
    """``{action: refund, status: success|failure, request_id (PayU's refund id), token (the
    merchant's), mihpayid, merchantTxnId, amt, bank_arn, ...}`` [docs: refund status callback].
    Keyed on PayU's ``request_id`` and the status; the payment is the txnid, as for its posts.
    A success is a refund to confirm; a failure moved no money and is kept as OTHER."""
    doc = _refund_doc(body)
    status = _common.text_field(doc.get("status"), "status", strict=True, provider=_P)
    if status is None:
        raise MalformedPayload(_P, "refund callback: status is missing")
    if status.lower() == REFUND_SUCCESS:  # "SUCCESS" too, as PayU lists its refund states
        status = REFUND_SUCCESS
    kind = EventKind.REFUND_PROCESSED if status == REFUND_SUCCESS else EventKind.OTHER
    strict = kind is not EventKind.OTHER
    request_id = _identifier(doc.get("request_id"), "request_id", strict=strict)
    txnid = _common.text_field(
        doc.get("merchantTxnId"), "merchantTxnId", strict=strict, provider=_P
    )
    amount = _amount(_rupee_text(doc.get("amt")), strict=strict)
    if strict:
        _common.require(
            {"request_id": request_id, "merchantTxnId": txnid, "amt": amount}, provider=_P
        )
    event_type = f"refund.{status}"
    key = _common.plain_key(txnid, request_id, REFUND_KEY_SUFFIX + status)
    return replace(
        _of_txnid(body, kind=kind, event_type=event_type, txnid=txnid, key=key),
        refund_id=request_id,
        refund_amount_paise=amount,
        bank_ref=_common.reference(doc.get("bank_arn"), doc.get("bank_ref_num")),
        unconfirmed=True,
    )


def _identifier(value: object, field: str, *, strict: bool) -> str | None:
    """An id PayU writes as a string (``"12931740588"``) or, in some answers, a bare number;
    spaces around it (its samples have them) are not part of it."""
    found = _common.id_field(value, field, strict=strict, provider=_P)
    return None if found is None else found.strip() or None


def _rupee_text(value: object) -> str | None:
    """``amt`` as the rupee string PayU writes, or a JSON number written back as one."""
    if isinstance(value, bool) or value is None:
        return None if value is None else str(value)
    return value if isinstance(value, str) else str(value)


_READ_HASHED = ("status", "txnid", "amount")
_REFERENCES = ("bank_ref_num", "bank_ref_no")
ATTEMPT_FIELD = "mihpayid"
_ATTEMPT = re.compile(r"[0-9A-Za-z]{1,64}")


def attempt(value: str | None) -> str | None:
    """PayU's id of the payment (``mihpayid``, 11 to 18 digits in its samples), outside the
    hash: an odd one is left out, and the post is a copy like any other. Reconciliation
    records the one ``verify_payment`` names by the same rule."""
    return value.strip() if value and _ATTEMPT.fullmatch(value.strip()) else None


def attempt_of(body: bytes) -> str | None:
    """The ``mihpayid`` a stored payment post names, read as ``parse`` reads it."""
    return attempt(_read_fields(body).get(ATTEMPT_FIELD))


def _read_fields(body: bytes) -> dict[str, str]:
    """The fields ``parse`` reads, and no others: the hashed ones as ``verify`` decoded them,
    the bank reference, the ``mihpayid`` and ``unmappedstatus`` only when they are UTF-8 (an
    ``unmappedstatus`` that is not says nothing of a hold). A field outside the hash holding
    any bytes (PayU posts about sixty) is not payhooks' concern; a reference or id that is
    not text is left out, like any odd reference, never a reason to refuse the payment."""
    raw = _raw_fields(body)
    fields = {name: _decoded(raw[name]) for name in _READ_HASHED if name in raw}
    for name in (*_REFERENCES, ATTEMPT_FIELD, UNMAPPED_FIELD):
        if name in raw:
            with suppress(UnicodeDecodeError):
                fields[name] = _unquote(raw[name])
    return fields


def _amount(value: str | None, *, strict: bool) -> int | None:
    """A plain rupee string: Decimal() alone would also take ' 1.5', '1e2' and '1_0'."""
    if value is None or value == "":
        return None
    if _RUPEES.fullmatch(value) is None:
        problem = f"amount is not a rupee amount: {_common.shown(value)}"
        _common.refuse(problem, strict=strict, provider=_P)
        return None
    return _common.optional_paise(value, "amount", strict=strict, provider=_P)


__all__ = [
    "CHARGEBACK_REFUSED",
    "HELD",
    "PayU",
    "attempt",
    "attempt_of",
    "decode_form",
    "encode",
    "held",
    "is_refund_callback",
    "kind_of",
    "known",
    "reverse_hash",
]

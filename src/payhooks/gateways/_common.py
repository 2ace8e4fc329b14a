"""Small exact helpers the adapters share: money, keys, constant-time comparison."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import ClassVar

from payhooks.events import CONTROL, MAX_TEXT_CHARS, Provider, is_text
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

_PAISE = Decimal("0.01")
_SHOWN_CHARS = 40  # of a value quoted in a refusal

# JSON gateways are only hashed before authentication, so a generous bound costs little.
MAX_JSON_BODY_BYTES = 1024 * 1024


def sha256_hex(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def shown(value: object) -> str:
    """``value`` as the gateway wrote it, for the words of a refusal (read by the gateway's
    dashboard and the operator): a number as written (``12000.0``), ``true``, ``false`` or
    ``null``, a string in double quotes cut to 40 characters, or what kind of JSON it is;
    never Python's repr (``Decimal('12000.0')``), which nobody sent."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | Decimal):
        written = str(value)
        return written if len(written) <= _SHOWN_CHARS else written[:_SHOWN_CHARS] + "\u2026"
    if isinstance(value, str):
        quoted = json.dumps(value[:_SHOWN_CHARS])
        return quoted if len(value) <= _SHOWN_CHARS else quoted[:-1] + '\u2026"'
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else "no JSON value"


def rupees_to_paise(value: object, *, provider: Provider, field: str) -> int:
    """Decimal rupees (JSON number parsed as Decimal, int, or form string) to exact paise."""
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, str)):
        raise MalformedPayload(provider, f"{field} must be a number of rupees, not {shown(value)}")
    try:
        amount = Decimal(value)
    except InvalidOperation as exc:
        raise MalformedPayload(
            provider, f"{field} must be a number of rupees, not {shown(value)}"
        ) from exc
    if not amount.is_finite():
        raise MalformedPayload(provider, f"{field} must be a number of rupees, not {shown(value)}")
    if amount < 0:
        raise MalformedPayload(provider, f"{field} is negative: {shown(value)}")
    whole = _whole_paise(amount)
    if whole is None:
        raise MalformedPayload(provider, f"{field} is too large to be an amount: {shown(value)}")
    if not whole:
        raise MalformedPayload(
            provider,
            f"{field} has a fraction of a paisa: {shown(value)} (rupees take at most 2 decimal "
            "places)",
        )
    return int(amount * 100)


def _whole_paise(amount: Decimal) -> bool | None:
    """Whether ``amount`` is a whole number of paise; None when it is too large for the
    context to say (``quantize`` raises for 1e30)."""
    try:
        return amount.quantize(_PAISE) == amount
    except InvalidOperation:
        return None


def delivery_key(*parts: object) -> str | None:
    """Join key parts with ':'; None when any part is missing, so no key ever holds 'None'.

    Every key derived from a body holds a ':'; a key header is not signed, so one holding a
    ':' is ignored (the key is derived instead) and can never claim a derived key."""
    texts = [str(p) for p in parts if p is not None and not isinstance(p, bool)]
    if len(texts) != len(parts) or any(t == "" for t in texts):
        return None
    return ":".join(texts)


RESERVED_PREFIXES: tuple[str, ...] = ("reconcile:",)
"""The key spaces payhooks mints itself: reconciliation's, the confirmations' and the refund
sender's ``reconcile:…`` (``expectations.RECONCILED``). No key a gateway's delivery derives
starts so (``unreserved``)."""


def unreserved(provider: Provider, key: str) -> str:
    """``key``, moved under ``<gateway>:`` when it would start in a key space payhooks mints:
    a body names what its key is made of, and a sender must never take a key payhooks needs."""
    return f"{provider.value}:{key}" if key.startswith(RESERVED_PREFIXES) else key


def plain_key(*parts: object) -> str | None:
    """``delivery_key``, but None when a part holds a ':' itself: such a key could be read as
    other parts (``a:b`` + ``c`` is ``a`` + ``b:c``), so a body naming other ids than another
    could still take its key. Used where nothing signs the parts (the caller falls back to the
    body's hash)."""
    if any(isinstance(p, str) and ":" in p for p in parts):
        return None
    return delivery_key(*parts)


def key_header(value: str | None) -> str | None:
    """A delivery key taken from a header, which the gateway does not sign: one holding a ':'
    is not used (derived keys always hold one, and an unsigned header must never claim the
    key a later delivery derives)."""
    return value if value and ":" not in value else None


def matches_any(expected: list[str], received: str | None, *, provider: Provider) -> None:
    """Constant-time compare of one received signature against each candidate."""
    if received is None or received == "":
        raise SignatureMismatch(provider, "signature missing")
    if not received.isascii():
        raise SignatureMismatch(provider, "signature header is not ASCII")
    given = received.encode("ascii")
    found = False
    for candidate in expected:
        found |= hmac.compare_digest(candidate.encode("ascii"), given)
    if not found:
        raise SignatureMismatch(provider, "signature does not match")


def body_key(event_type: str, body: bytes) -> str:
    """Key of an event with no id: byte-identical retries collapse, distinct bodies never do."""
    return f"{event_type}:{sha256_hex(body)}"


def load_json_object(body: bytes, *, provider: Provider) -> dict[str, object]:
    """Parse verified JSON with every fraction as Decimal, so amounts stay exact
    (``parse_json``); anything but an object is malformed."""
    doc = parse_json(body, provider=provider)
    if not isinstance(doc, dict):
        raise MalformedPayload(provider, "body is not a JSON object")
    return doc


def parse_json(body: bytes, *, provider: Provider, what: str = "body") -> object:
    """``body`` (``what`` it is, for the words) parsed with every fraction as Decimal, or
    malformed saying why: not JSON (NaN and Infinity are not, and would turn into floats),
    nested deeper than Python's parser reaches (``RecursionError``), or holding a number of
    more digits than Python reads. The last two are valid JSON, never "not valid JSON"."""
    try:
        return _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass"))
    except _Unread as exc:
        raise MalformedPayload(provider, f"{what} {exc}") from exc
    except RecursionError as exc:
        raise MalformedPayload(provider, f"{what} is nested too deep to read") from exc
    except ValueError as exc:
        raise MalformedPayload(provider, f"{what} is not valid JSON") from exc


class _Unread(ValueError):
    """What ``json.loads`` met that it cannot read, in words of its own."""


def _integer(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # past sys.get_int_max_str_digits() (4300 by default)
        count = len(digits.lstrip("-"))
        raise _Unread(f"holds a number of {count} digits, more than payhooks reads") from None


def _reject_constant(name: str) -> object:
    raise _Unread(f"is not valid JSON: {name} is not a JSON number")


_DECODER = json.JSONDecoder(
    parse_float=Decimal, parse_int=_integer, parse_constant=_reject_constant
)
"""One decoder for every body: ``json.loads`` with these hooks builds one per call. The bytes
are decoded as ``json.loads`` decodes them (UTF-8, -16 or -32, ``surrogatepass``)."""


def child(node: object, *path: str) -> object:
    """Walk nested JSON objects; None where a step is missing or not an object."""
    for name in path:
        if not isinstance(node, dict):
            return None
        node = node.get(name)
    return node


def reference(*values: object) -> str | None:
    """The first usable bank reference among ``values``: a non-empty string, or a whole
    number some gateways send unquoted. Anything else (a string that is not text included) is
    left out, never refused: the reference is for finding a payment, and an odd one must not
    cost the payment."""
    for value in values:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str) and value.strip() and is_text(value):
            return value.strip()
    return None


def own_key(value: object) -> str | None:
    """The merchant's own id for a refund, as a gateway's report of the refund carries it back
    (``Event.refund_key``): a string of text, else None. Never refused: it only finds the
    refund intent it names, and an odd one finds none."""
    return value if isinstance(value, str) and value.strip() and is_text(value) else None


def text_field(value: object, field: str, *, strict: bool, provider: Provider) -> str | None:
    """A string field of a JSON body: missing or empty is None. Strict for events payhooks
    acts on (a number, or a string that is not text, is malformed); for the rest an odd
    field is left out, so an authentic event that is ignored is still answered 200."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and is_text(value):
        return value
    problem = "is not valid text" if isinstance(value, str) else "is not a string"
    refuse(f"{field} {problem}", strict=strict, provider=provider)
    return None


def id_field(value: object, field: str, *, strict: bool, provider: Provider) -> str | None:
    """``text_field`` of an id the gateway writes as a string or, in another version or
    answer, as a bare whole number (Cashfree's ``cf_payment_id``, its settlement ids): both
    read as the same string, so either finds the same payment."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return text_field(value, field, strict=strict, provider=provider)


def refuse(problem: str, *, strict: bool, provider: Provider) -> None:
    """An odd field: malformed in an event payhooks acts on (``strict``); for the rest the
    caller leaves it out, so an authentic event that is ignored is still answered 200."""
    if strict:
        raise MalformedPayload(provider, problem)


def optional_paise(value: object, field: str, *, strict: bool, provider: Provider) -> int | None:
    """``rupees_to_paise`` of a field that may be missing (None); an amount that is not one is
    malformed when ``strict``, else left out."""
    if value is None:
        return None
    try:
        return rupees_to_paise(value, provider=provider, field=field)
    except MalformedPayload:
        if strict:
            raise
        return None


def paise_field(value: object, field: str, *, strict: bool, provider: Provider) -> int | None:
    """An amount the gateway writes as integer paise (Razorpay's, PhonePe's), or None when
    missing: a number written with a fraction, even ``12000.0`` (read as ``Decimal``), a bool
    (an int to Python), a string or a negative number is not one, malformed when ``strict``,
    else left out."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value >= 0:
            return value
        refuse(f"{field} is negative: {shown(value)}", strict=strict, provider=provider)
        return None
    problem = f"{field} must be an integer number of paise, not {shown(value)}"
    refuse(problem, strict=strict, provider=provider)
    return None


EXACT_WHOLE = 2**53
"""Past it not every whole number is a double: a JSON number beyond it may be a
double-precision serializer's rounding of the id it stands for."""


def same_id(found: object, asked: str) -> bool:
    """Whether an id an answer names (``found``: text, or a JSON number) is ``asked``. Text
    must be it exactly, but for spaces around either (PayU pads its ids); a whole number must
    be it, or, past ``EXACT_WHOLE``, the double ``asked`` rounds to: PayU's docs write one
    payment's ``mihpayid`` as "403993715521889530" in ``verify_payment`` and as the JSON number
    403993715521889540 in ``check_payment``. Anything else names no id."""
    wanted = asked.strip()
    if isinstance(found, str):
        return found.strip() == wanted
    if isinstance(found, bool) or not isinstance(found, int):
        return False
    if str(found) == wanted:
        return True
    if abs(found) <= EXACT_WHOLE or not (wanted.isascii() and wanted.isdigit()):
        return False
    try:
        return float(found) == float(int(wanted))
    except (OverflowError, ValueError):  # past a double's range, or too many digits to read
        return False


def naming(entity: object, field: str, asked: str, *, what: str, provider: Provider) -> None:
    """An API's answer about ``what`` whose ``field`` names another than ``asked`` (the
    gateway's or a proxy's mix-up; ``same_id``) says nothing of the one asked about: malformed,
    so never read as its state (a refund made or refused, a payment captured, a payout's
    figures). A field the answer leaves out is not checked here."""
    found = entity.get(field) if isinstance(entity, dict) else None
    if found is not None and not same_id(found, asked):
        raise MalformedPayload(provider, f"{what} answer names another {field}")


def named(entity: object, field: str, asked: str, *, what: str, provider: Provider) -> None:
    """``naming``, and the field must be there: an answer that decides something for good (a
    refund failed, its amount free again) must name what it is about, not merely name nothing
    else (a proxy's ``{"status": "failed"}``)."""
    found = entity.get(field) if isinstance(entity, dict) else None
    if found is None:
        raise MalformedPayload(provider, f"{what} answer names no {field}")
    naming(entity, field, asked, what=what, provider=provider)


def require(fields: Mapping[str, object], *, provider: Provider) -> None:
    """An event payhooks acts on without what it acts on cannot be applied: the first of
    ``fields`` (name to value read) that is missing is malformed."""
    for field, value in fields.items():
        if value is None:
            raise MalformedPayload(provider, f"{field} is missing")


def require_secrets(secrets: Sequence[str], refusal: str) -> None:
    """An adapter needs at least one secret and no empty one: ``ValueError(refusal)``. One
    string given for them is a ``TypeError``: it is a sequence of one-character strings, and
    each character would verify as a secret of its own."""
    if isinstance(secrets, str | bytes):
        raise TypeError(f"{refusal}, as a tuple of strings, not one string: (secret,)")
    if not secrets or any(s == "" for s in secrets):
        raise ValueError(refusal)


def require_credentials(credentials: Sequence[str], *, missing: str, malformed: str) -> None:
    """Static webhook credentials (Juspay's, PhonePe's): at least one, none empty
    (``ValueError(missing)``), each ``username:password`` with both parts non-empty, split
    at the first ':' as a password may hold more (``ValueError(malformed)``): one that is not
    could never match a callback, so the setting is refused at start."""
    require_secrets(credentials, missing)
    for credential in credentials:
        username, colon, password = credential.partition(":")
        if not (username and colon and password):
            raise ValueError(malformed)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SecretsAdapter:
    """The part of an adapter that holds its webhook secrets (Razorpay's, Cashfree's): several,
    each tried, as deliveries in flight keep the secret they were signed with while one is
    rotated out; none empty, else ``refusal``, in the gateway's words, as the adapter is made."""

    refusal: ClassVar[str]
    max_body_bytes = MAX_JSON_BODY_BYTES
    secrets: tuple[str, ...] = dataclasses.field(repr=False)  # never in a log, nor an error

    def __post_init__(self) -> None:
        require_secrets(self.secrets, self.refusal)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CredentialsAdapter:
    """The part of an adapter that holds static webhook credentials (Juspay's, PhonePe's),
    each ``username:password``: several accepted while one is rotated out of the dashboard,
    refused as the adapter is made as ``require_credentials`` says, in the gateway's words
    (``missing``, ``malformed``)."""

    missing: ClassVar[str]
    malformed: ClassVar[str]
    max_body_bytes = MAX_JSON_BODY_BYTES
    credentials: tuple[str, ...] = dataclasses.field(repr=False)  # never in a log, nor an error

    def __post_init__(self) -> None:
        require_credentials(self.credentials, missing=self.missing, malformed=self.malformed)


def header_value(headers: Mapping[str, str], name: str) -> str | None:
    """The value of the header ``name`` (lower case), whatever case it came in: ingest passes
    lower-case names, a merchant calling ``verify`` directly may pass ``Authorization`` as
    they were given it."""
    found = headers.get(name)
    if found is not None:
        return found
    return next((v for k, v in headers.items() if k.lower() == name), None)


def words(*values: object) -> str | None:
    """Text shown to a person (a reason code and its description, a phase): the values that
    are text, joined with ": ", without control characters and cut to what a record holds;
    None when none is. Never a reason to refuse a delivery."""
    texts = [v.strip() for v in values if isinstance(v, str) and v.strip() and is_text(v)]
    if not texts:
        return None
    joined = CONTROL.sub(" ", ": ".join(dict.fromkeys(texts)))
    return joined[:MAX_TEXT_CHARS]


IST = timezone(timedelta(hours=5, minutes=30), "IST")
"""The zone an Indian gateway's times are in when they name none."""

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 1, 1, tzinfo=UTC)
"""The times payhooks keeps of a gateway's: PostgreSQL stores a time before year 1 or past
9999 that Python cannot read back (nor show in a zone ahead of UTC), and every later read of
its table would fail on that one row. A gateway's "no date" is often the first day of year 1."""


def readable(found: datetime) -> bool:
    """Whether ``found`` (with its zone) lies in ``EARLIEST`` .. ``LATEST``."""
    try:
        return EARLIEST <= found.astimezone(UTC) < LATEST
    except OverflowError:  # before year 1 or past 9999 once in UTC
        return False


def unix_time(value: object) -> datetime | None:
    """A time written as whole Unix seconds (Razorpay's), or None when it is not one: times
    order a dispute's reports and show its deadline, and an odd one must not cost the report."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    try:
        found = datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return found if readable(found) else None


def iso_time(value: object, *, zone: timezone = IST) -> datetime | None:
    """A time written in ISO 8601 (Cashfree's, PayU's), read in ``zone`` when it names none;
    None when it is not one, or not one payhooks keeps (``readable``), as ``unix_time``."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        found = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    found = found if found.tzinfo is not None else found.replace(tzinfo=zone)
    return found if readable(found) else None


def event_name(value: object, field: str, *, provider: Provider) -> str:
    """The event's name, which every delivery needs, whatever it is about."""
    if not isinstance(value, str) or value == "":
        raise MalformedPayload(provider, f"{field} is missing or not a string")
    if not is_text(value):
        raise MalformedPayload(provider, f"{field} is not valid text")
    return value

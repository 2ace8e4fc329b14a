"""How the console writes times and money: in the operators' zone, named on every time (IST by
default), and rupees grouped the Indian way (₹12,34,567.00), as operators and customers in
India read them; and a dispute, in the same words on every page that tells it."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from urllib.parse import parse_qsl
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from markupsafe import Markup, escape

from payhooks.gateways import named, title_of
from payhooks.intake.disputes import Dispute
from payhooks.plumbing.errors import PayhooksError

DEFAULT_TIMEZONE = "Asia/Kolkata"


class UnknownTimezone(PayhooksError):
    """A zone name the time zone database does not hold."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name[:64]!r} is not a time zone name: write one of the IANA database's "
            "(Asia/Kolkata, UTC, Europe/London)"
        )
        self.name = name


def zone_of(name: str) -> ZoneInfo:
    """The zone an IANA name names (``Asia/Kolkata``), or ``UnknownTimezone``."""
    if not name or name != name.strip() or name.startswith(("/", ".")) or ".." in name:
        raise UnknownTimezone(name)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UnknownTimezone(name) from exc


def when(at: datetime | None, zone: tzinfo) -> str:
    """``2026-12-03 14:35:12.123 IST``: to the millisecond (deliveries a moment apart keep
    their order), with the zone's own abbreviation or offset."""
    if at is None:
        return "—"
    local = at.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M:%S}.{local.microsecond // 1000:03d} {local.tzname()}"


def hour(at: datetime, zone: tzinfo) -> str:
    """``14:30 IST``: where an hour of the charts starts (UTC hours: half past in India)."""
    local = at.astimezone(zone)
    return f"{local:%H:%M} {local.tzname()}"


def grouped(number: int) -> str:
    """Digits grouped the Indian way: the last three, then by twos (12,34,567)."""
    sign, digits = ("-", str(-number)) if number < 0 else ("", str(number))
    head, tail = digits[:-3], digits[-3:]
    pairs: list[str] = []
    while head:
        head, pairs = head[:-2], [head[-2:], *pairs]
    return sign + ",".join([*pairs, tail])


def until(at: datetime | None, now: datetime) -> str:
    """How long is left before a deadline, to the hour: ``in 2 d 5 h``, ``in 40 min``, or
    ``overdue by 3 h`` once it has passed; ``—`` for none."""
    if at is None:
        return "—"
    left = int((at - now).total_seconds())
    words = _span(abs(left))
    return f"in {words}" if left >= 0 else f"overdue by {words}"


def _span(seconds: int) -> str:
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h" if hours else f"{rest // 60} min"


def rupees(paise: int | None) -> str:
    """``₹12,34,567.00``; a negative amount (a difference) is ``-₹5.00``."""
    if paise is None:
        return "—"
    sign, paise = ("-", -paise) if paise < 0 else ("", paise)
    return f"{sign}₹{grouped(paise // 100)}.{paise % 100:02d}"


def readable_body(body: bytes) -> str:
    """A stored body as a person reads it: JSON indented, a form (PayU's) one ``key=value``
    a line, anything else as it came. Only the layout changes: every key and value is there,
    decoded, in the order sent."""
    text = body.decode("utf-8", errors="replace")
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    if "=" in text and not any(c.isspace() for c in text.strip()):
        try:
            pairs = parse_qsl(text.strip(), keep_blank_values=True, strict_parsing=True)
        except ValueError:
            return text
        return "\n".join(f"{key}={value}" for key, value in pairs)
    return text


LONG_TOKEN = 16
"""Characters without a space past which a token (a signature, a key, an order or cart id, an
address) may break anywhere: only where it must, in a column too narrow for it."""
_LONG = re.compile(rf"\S{{{LONG_TOKEN},}}")


_CODE_SPAN = re.compile(r"`([^`]+)`")


def coded(text: object) -> Markup:
    """``text`` escaped, each span between backticks as code: an alarm's words are the alert
    emails' too, which write a command so (`payhooks confirm`), shown as code, not backticks."""
    value = str(text)
    parts: list[str] = []
    end = 0
    for found in _CODE_SPAN.finditer(value):
        parts.append(escape(value[end : found.start()]))
        parts.append(Markup("<code>%s</code>") % found.group(1))
        end = found.end()
    parts.append(escape(value[end:]))
    return Markup("").join(parts)


def breakable(text: object) -> Markup:
    """``text`` escaped, its long tokens marked to break anywhere (``class="long"``) and
    every other word left whole: a narrow screen wraps between words, and only a token
    wider than the line is split."""
    value = str(text)
    parts: list[str] = []
    end = 0
    for found in _LONG.finditer(value):
        parts.append(escape(value[end : found.start()]))
        parts.append(Markup('<span class="long">%s</span>') % found.group())
        end = found.end()
    parts.append(escape(value[end:]))
    return Markup("").join(parts)


def gateway_title(provider: object) -> str:
    """A gateway (its name, or its ``Provider``) as a person reads it: its title
    (``payhooks.gateways.title_of``). Its name (``razorpay``) stays in addresses, forms' values
    and the records."""
    return title_of(str(getattr(provider, "value", provider)))


ACTIONS: Mapping[str, str] = {
    "replay": "replay",
    "settle": "settle by hand",
    "link": "link to a cart",
    "bulk_replay": "replay many at once",
    "fetch_settlements": "fetch settlements",
    "retry": "send again",
    "readdress": "send to a corrected address",
    "refund": "refund",
    "cancel_refund": "cancel a refund",
}
"""An action of the log (``payhooks_console_actions.action``) as a person reads it."""

_NAME = re.compile(r"[a-z]+(?:_[a-z]+)+")


def action_words(action: str) -> str:
    """An action the log recorded, in words: ``replay many at once`` for ``bulk_replay``; one
    this release has no words for, its underscores as spaces."""
    return ACTIONS.get(action) or action.replace("_", " ")


def result_words(result: str) -> str:
    """What an action came to, as the log keeps it (a ``Done``'s name, ``: `` and why where
    it said why; a bulk action's counts), in words: the name's underscores as spaces
    (``still parked``), the rest as it was written, so an id in it keeps its own
    (``refund too large: payment pay_Q1...: ...``)."""
    head, colon, rest = result.partition(": ")
    if head in RESULTS:
        return RESULTS[head] + colon + rest
    return (head.replace("_", " ") if _NAME.fullmatch(head) else head) + colon + rest


RESULTS = {"not_a_mismatch": "nothing to settle: not parked (applied, or settled already)"}
"""Results whose name alone would mislead, in words (a settle of an amount mismatch settled
already read "not a mismatch")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DisputeWords:
    """A dispute as every console page tells it (``dispute_words``)."""

    stands: str
    """Where it stands in payhooks' words, with its phase and the gateway's own word:
    ``opened (chargeback phase; Razorpay: open)``."""
    reason: str
    """Why it was raised, in words where the gateway's code is known, the code kept beside:
    ``Duplicate Processing (12.6.1)``; a code payhooks has no words for, as it came."""


def dispute_words(dispute: Dispute) -> DisputeWords:
    """The words the Disputes page and an order's or a cart's page both tell ``dispute`` in:
    one dispute never reads two ways, nor as a bare code where its meaning is known."""
    known = named(dispute.provider)
    title = gateway_title(dispute.provider)
    said = [f"{dispute.phase.replace('_', '-')} phase"] if dispute.phase else []
    said += [f"{title}: {dispute.gateway_status}"] if dispute.gateway_status else []
    stands = dispute.status.replace("_", " ") + (f" ({'; '.join(said)})" if said else "")
    reasons = {} if known is None else known.dispute_reasons
    return DisputeWords(stands=stands, reason=_reason(dispute.reason, reasons))


_CODE = re.compile(r"\S+")


def _reason(reason: str | None, known: Mapping[str, str]) -> str:
    """A reason as kept (the gateway's code and description, ``code: description``, or one of
    them alone): its description, else the words for a known code, then the code."""
    if not reason:
        return "—"
    code, _, description = reason.partition(": ")
    if description and _CODE.fullmatch(code):
        return f"{description} ({code})"
    words = known.get(reason)
    return reason if words is None else f"{words} ({reason})"


__all__ = [
    "ACTIONS",
    "DEFAULT_TIMEZONE",
    "DisputeWords",
    "UnknownTimezone",
    "action_words",
    "breakable",
    "coded",
    "dispute_words",
    "gateway_title",
    "grouped",
    "hour",
    "readable_body",
    "result_words",
    "rupees",
    "when",
    "zone_of",
]

"""What a gateway says about the money it paid out: a settlement (``Settlement``: the payout to
the merchant's bank, net of fees and tax, with its UTR), the lines of a settlement report
(``Line``: each payment, refund and adjustment it covered, with its fee and tax), a line
payhooks cannot read (``Unreadable``: kept, never a reason to leave the rest unread), a page
of a report (``Page``), and what a gateway documents of its settlements (``Settles``: its cycle,
with the source, and how its settlement webhook reads).

Pure values and readers, in the gateways' room so that each gateway's readers
(``gateways/<name>/settlements.py``) and its report client build them without importing the
room that records them (``payhooks.settlements``). Figures are as the gateway states them,
never computed here: ``net_paise`` is what the line adds to the payout (negative for a debit),
``fee_paise`` and ``tax_paise`` the gateway's own fields (Razorpay's fee includes its tax,
Cashfree's service charge does not: docs/providers.md, "Settlements")."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from payhooks.events import MAX_PAISE, MAX_TEXT_CHARS, Event, EventKind, Provider
from payhooks.gateways._common import (
    IST,
    child,
    id_field,
    readable,
    rupees_to_paise,
    sha256_hex,
    shown,
)
from payhooks.plumbing.errors import MalformedPayload


class SettlementState(StrEnum):
    """Where a payout stands, whatever the gateway calls it. Ranked, for the words that may
    come late or twice (a webhook, a report line): one is recorded over a state of lower rank
    only. So a late ``SETTLEMENT_INITIATED`` never moves a settled payout back, and a failure
    or a reversal, once told, is never undone by a "settled" that comes after it: a report
    line (which only implies it), or a success webhook delivered again. The gateway's answer
    about the payout itself, asked for now (``Settlement.current``), is not ranked: it
    replaces what is recorded."""

    PENDING = "pending"
    SETTLED = "settled"
    FAILED = "failed"
    """Not final at Razorpay: a failed settlement is tried again and may still be processed
    (its entity, asked for again, says so). Whether Cashfree tries one again under the same
    settlement id is not documented: a ``SETTLEMENT_SUCCESS`` after it changes nothing."""
    REVERSED = "reversed"
    """The bank sent the payout back (Cashfree's ``SETTLEMENT_REVERSED``): its payments are
    unsettled again."""

    @property
    def rank(self) -> int:
        """Its order: a state is recorded over one of lower rank only."""
        return _RANKS[self]


_RANKS = {
    SettlementState.PENDING: 0,
    SettlementState.SETTLED: 1,
    SettlementState.FAILED: 2,
    SettlementState.REVERSED: 3,
}


class LineKind(StrEnum):
    """What a settlement line is, whatever the gateway calls it (its word is kept beside)."""

    PAYMENT = "payment"
    REFUND = "refund"
    ADJUSTMENT = "adjustment"
    """Anything else that moved the payout: a transfer, a chargeback, a dispute, a reversal."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settlement:
    """One payout as the gateway states it. A figure the source does not state (a report
    line names its settlement but not the payout's total) is None, filled when another
    source states it."""

    provider: Provider
    settlement_id: str
    state: SettlementState
    status: str | None
    """The gateway's own word for the state (``processed``, ``SUCCESS``); None where the
    source does not say it (a report line naming its payout)."""
    amount_paise: int | None = None
    """What was paid out to the bank."""
    fees_paise: int | None = None
    tax_paise: int | None = None
    currency: str | None = None
    utr: str | None = None
    settled_at: datetime | None = None
    current: bool = False
    """The gateway's answer about this payout, asked for now (Razorpay's ``GET
    /v1/settlements/{id}``): its state replaces the one recorded, whatever their rank. A
    webhook or a report line is a word that may come late or twice: ranked."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One entry of a settlement: a payment, refund or adjustment it covered."""

    provider: Provider
    settlement_id: str
    entry_id: str
    """The gateway's id of what the line is (``pay_…``, ``rfnd_…``, a Cashfree event id)."""
    kind: LineKind
    entry_type: str
    """The gateway's own word for it (``payment``, ``transfer``, ``CHARGEBACK``)."""
    payment_id: str | None
    """The payment it is, or is of (a refund's payment); None for an adjustment of none."""
    gateway_order_id: str | None
    amount_paise: int
    fee_paise: int
    tax_paise: int
    net_paise: int
    """What it adds to the payout, as the gateway states it: negative for a debit."""
    currency: str | None = None
    occurred_at: datetime | None = None
    utr: str | None = None
    """The settlement's UTR as the line carries it."""
    settled_at: datetime | None = None


RAW_CHARS = 2000
"""How much of a line payhooks cannot read it keeps, as the gateway answered it (JSON)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Unreadable:
    """A report line payhooks cannot read (an amount that is not one, a field missing): kept
    for a person, with why and the line as the gateway answered it, never dropped, and never
    a reason to leave the rest of its report unread. What it names is read as far as it can
    be, to find it in the gateway's dashboard."""

    provider: Provider
    reason: str
    raw: str
    """The line as the gateway answered it (JSON), its first ``RAW_CHARS`` characters."""
    digest: str
    """What makes it the same line met again: SHA-256 of its payout and entry when it names
    both (a field of it may change meanwhile), else of the whole line as answered."""
    settlement_id: str | None = None
    entry_id: str | None = None
    payment_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """One answer of a settlement report: the settlements it states, the lines it lists (only
    those already part of a settlement), those it cannot read, how many it listed that are not
    settled yet, and where the next page starts (None: this was the last). ``failed``: a part
    of the report that could not be read at all (a day's page, a payout's own figures), and
    why; the client goes on with the rest, and the gateway's fetch is said to have failed."""

    settlements: tuple[Settlement, ...] = ()
    lines: tuple[Line, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    unsettled: int = 0
    cursor: str | None = None
    failed: str | None = None


Named = tuple[str | None, str | None, str | None]
"""What a line names, as far as it can be read: its settlement, its entry and its payment."""


def read_items(
    provider: Provider,
    items: Iterable[object],
    *,
    settled: Callable[[object], bool],
    line: Callable[[object], Line],
    named: Callable[[object], Named],
) -> Page:
    """A page's items, each on its own: a line where ``settled`` says it is part of a payout,
    counted where not, and kept as ``Unreadable`` where either cannot read it. One item never
    costs the others."""
    lines: list[Line] = []
    kept: list[Unreadable] = []
    unsettled = 0
    for item in items:
        try:
            if settled(item):
                lines.append(in_rupees(provider, line(item)))
            else:
                unsettled += 1
        except MalformedPayload as exc:
            kept.append(unreadable(provider, item, exc.reason, named(item)))
    return Page(lines=tuple(lines), unreadable=tuple(kept), unsettled=unsettled)


def in_rupees(provider: Provider, line: Line) -> Line:
    """``line``, whose currency is India's (or unsaid): a payout is made in rupees, and a
    line in another currency read as paise would settle an INR payment and add to the payout
    (600 US cents as 600 paise): ``MalformedPayload``, kept for a person."""
    if line.currency is not None and line.currency.upper() != "INR":
        raise MalformedPayload(
            provider, f"a line in {line.currency[:8]}: payouts are read in INR, never as paise"
        )
    return line


def unreadable(provider: Provider, item: object, reason: str, named: Named) -> Unreadable:
    """``item`` kept as the gateway answered it."""
    settlement_id, entry_id, payment_id = named
    whole = answered_json(item, sort_keys=True, separators=(",", ":"))
    if settlement_id is not None and entry_id is not None:
        whole = json.dumps(["entry", settlement_id, entry_id])
    return Unreadable(
        provider=provider, reason=reason[:MAX_TEXT_CHARS], raw=answered_json(item)[:RAW_CHARS],
        digest=hashlib.sha256(whole.encode()).hexdigest(),
        settlement_id=settlement_id, entry_id=entry_id, payment_id=payment_id,
    )  # fmt: skip


def answered_json(node: object, **options: Any) -> str:
    """JSON read with its fractions as Decimal (``_common.load_json_object``), written back
    as the gateway wrote it: a fraction a number again, never a string; ASCII only."""
    text = json.dumps(_marked(node), ensure_ascii=True, **options)
    return _MARKED.sub(lambda found: found[1], text)


# A Decimal goes through json.dumps as a string marked with a private-use character, then
# loses its quotes: "\ue000decimal:450.00\ue000" is 450.00.
_MARKED = re.compile(r'"\\ue000decimal:([-+.0-9eE]+)\\ue000"')


def _marked(node: object) -> object:
    if isinstance(node, Decimal):
        return f"\ue000decimal:{node}\ue000"
    if isinstance(node, dict):
        return {key: _marked(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_marked(value) for value in node]
    return node


def loose_text(provider: Provider, node: object, *path: str) -> str | None:
    """A text field (or a whole number) at ``path`` as far as it reads, None otherwise: what an
    unreadable line names, never itself a reason to refuse."""
    found = id_field(child(node, *path), ".".join(path), strict=False, provider=provider)
    return None if found is None else found[:MAX_TEXT_CHARS]


class SettlementClient(Protocol):
    """A gateway's settlement report, over its API: the pages for the days ``start`` to
    ``end`` (both included), read as they come. A part of the report it cannot read and can
    pass over is a page saying so (``Page.failed``); ``GatewayApiError`` ends the report."""

    provider: Provider

    def settlement_pages(self, start: date, end: date) -> Iterator[Page]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Settles:
    """What a gateway documents of its settlements: its standard cycle (the longest it
    takes from a capture to the payout, in calendar time) and where that is written, and how
    its settlement webhook reads (``webhook``: the verified body to the ``Settlement``)."""

    cycle: timedelta
    source: str
    """The public page that states the cycle."""
    webhook: Callable[[bytes], Settlement]


def settlement_event(settled: Settlement, *, event_type: str, event_id: str, body: bytes) -> Event:
    """A settlement webhook as an ``Event``, once ``settled`` was read whole from ``body`` (a
    payout payhooks cannot record is malformed at the door, never a recorded delivery that
    fails later) and its key chosen (each gateway keys it on the settlement's id)."""
    return Event(
        provider=settled.provider,
        kind=EventKind.SETTLEMENT,
        event_type=event_type,
        event_id=event_id,
        payload_sha256=sha256_hex(body),
    )


T = TypeVar("T")
MAX_RANGE_DAYS = 31
"""The days one fetch of a report may cover: a longer range is refused, never cut short."""


EARLIEST_DAY = date(1970, 1, 1)
"""No gateway settled a payment before it (and a day near year 1 overflows a gateway's time
filter): the first day a fetch may name, as the console's times begin."""


def checked_range(start: date, end: date, *, today: date) -> None:
    """A report's range: ``start`` not after ``end``, none before ``EARLIEST_DAY`` nor in the
    future, at most ``MAX_RANGE_DAYS`` days. ``ValueError`` says which."""
    if start < EARLIEST_DAY:
        raise ValueError(f"the range starts ({start}) before 1970: no gateway settled then")
    if start > end:
        raise ValueError(f"the range starts ({start}) after it ends ({end})")
    if end > today:
        raise ValueError(f"the range ends ({end}) after today ({today})")
    if (end - start).days + 1 > MAX_RANGE_DAYS:
        raise ValueError(f"the range covers more than {MAX_RANGE_DAYS} days: fetch it in parts")


def days(start: date, end: date) -> list[date]:
    """Each day from ``start`` to ``end``, both included."""
    return [start + timedelta(days=n) for n in range((end - start).days + 1)]


# --- reading the gateways' fields ------------------------------------------------------------


def _present(provider: Provider, found: T | None, path: tuple[str, ...]) -> T:
    """A field that must be there: missing, the delivery or answer is malformed."""
    if found is None:
        raise MalformedPayload(provider, f"{'.'.join(path)} is missing")
    return found


def optional_text(provider: Provider, node: object, *path: str) -> str | None:
    """A text field at ``path``, None when missing or empty; a number the gateway sends
    unquoted (Cashfree's settlement id and UTR) is read as its digits."""
    name = ".".join(path)
    found = id_field(child(node, *path), name, strict=True, provider=provider)
    if found is not None and len(found) > MAX_TEXT_CHARS:
        raise MalformedPayload(provider, f"{name} is over {MAX_TEXT_CHARS} characters")
    return found


def text(provider: Provider, node: object, *path: str) -> str:
    """``optional_text``, which must be there."""
    return _present(provider, optional_text(provider, node, *path), path)


def _whole(
    provider: Provider, node: object, path: tuple[str, ...], *, below: int, what: str
) -> int | None:
    """A whole number at ``path`` from 0 up to, not including, ``below`` (what a record can
    hold), None when missing; anything else is malformed, saying which: not an integer
    ("<path> must be <what>, not …"), negative, or past what a record holds."""
    value = child(node, *path)
    if value is None:
        return None
    name = ".".join(path)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedPayload(provider, f"{name} must be {what}, not {shown(value)}")
    if value < 0:
        raise MalformedPayload(provider, f"{name} is negative: {value}")
    if value >= below:
        raise MalformedPayload(provider, f"{name} is past what payhooks records: {shown(value)}")
    return value


def optional_paise(provider: Provider, node: object, *path: str) -> int | None:
    """An amount in integer paise (Razorpay's), None when missing."""
    return _whole(provider, node, path, below=MAX_PAISE + 1, what="an integer number of paise")


def paise(provider: Provider, node: object, *path: str) -> int:
    """``optional_paise``, which must be there."""
    return _present(provider, optional_paise(provider, node, *path), path)


def optional_rupees(provider: Provider, node: object, *path: str) -> int | None:
    """An amount in rupees (a JSON number, read as Decimal: Cashfree's) as exact paise, None
    when missing. A string is not what is documented, and refused."""
    value = child(node, *path)
    name = ".".join(path)
    if value is None:
        return None
    if isinstance(value, float | str):
        raise MalformedPayload(provider, f"{name} is not a JSON number")
    found = rupees_to_paise(value, provider=provider, field=name)
    if found > MAX_PAISE:
        raise MalformedPayload(provider, f"{name} is out of range")
    return found


def rupees(provider: Provider, node: object, *path: str) -> int:
    """``optional_rupees``, which must be there."""
    return _present(provider, optional_rupees(provider, node, *path), path)


def epoch(provider: Provider, node: object, *path: str) -> datetime | None:
    """A Unix time in seconds (Razorpay's), or None when missing."""
    seconds = _whole(provider, node, path, below=2**37, what="a Unix time in whole seconds")
    return None if seconds is None else _kept(provider, datetime.fromtimestamp(seconds, UTC), path)


def iso_time(provider: Provider, node: object, *path: str) -> datetime | None:
    """An ISO 8601 time with its offset (Cashfree's ``2025-02-14T12:35:19+05:30``), or None
    when missing. One without an offset is India's time, as Cashfree's reports are."""
    value = optional_text(provider, node, *path)
    if value is None:
        return None
    try:
        found = datetime.fromisoformat(value)
    except ValueError as exc:
        raise MalformedPayload(provider, f"{'.'.join(path)} is not a time") from exc
    return _kept(provider, found if found.tzinfo is not None else found.replace(tzinfo=INDIA), path)


def _kept(provider: Provider, found: datetime, path: tuple[str, ...]) -> datetime:
    """``found``, when it is a time payhooks keeps (``_common.readable``)."""
    if not readable(found):
        raise MalformedPayload(provider, f"{'.'.join(path)} is out of range")
    return found


INDIA = IST
"""India's time (+05:30, no daylight saving): what a gateway's time without an offset is."""


def signed(amount: int, *, debit: bool) -> int:
    """An amount as it moves the payout: negative for a debit."""
    return -amount if debit else amount


__all__ = [
    "INDIA",
    "MAX_RANGE_DAYS",
    "RAW_CHARS",
    "Line",
    "LineKind",
    "Named",
    "Page",
    "Settlement",
    "SettlementClient",
    "SettlementState",
    "Settles",
    "Unreadable",
    "answered_json",
    "checked_range",
    "days",
    "epoch",
    "iso_time",
    "loose_text",
    "optional_paise",
    "optional_rupees",
    "optional_text",
    "paise",
    "read_items",
    "rupees",
    "settlement_event",
    "signed",
    "text",
    "unreadable",
]

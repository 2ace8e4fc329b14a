"""How the console writes times and money: in the operators' zone, named on every time (IST by
default), and rupees grouped the Indian way (₹12,34,567.00), as operators and customers in
India read them."""

from __future__ import annotations

from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from payhooks.errors import PayhooksError

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


def rupees(paise: int | None) -> str:
    """``₹12,34,567.00``; a negative amount (a difference) is ``-₹5.00``."""
    if paise is None:
        return "—"
    sign, paise = ("-", -paise) if paise < 0 else ("", paise)
    return f"{sign}₹{grouped(paise // 100)}.{paise % 100:02d}"


__all__ = ["DEFAULT_TIMEZONE", "UnknownTimezone", "grouped", "hour", "rupees", "when", "zone_of"]

"""A filtered list as CSV (the csv module's quoting): times in ISO 8601 with the console zone's
offset, amounts in two columns (rupees with two decimals, and paise), at most
``MAX_ROWS`` rows, newest first, written as they are read.

The file starts with UTF-8's byte-order mark (``BOM``): without it Excel on Windows reads a
CSV in the machine's code page, and a name in Devanagari or the rupee sign reads garbled. A
script reads it with ``encoding="utf-8-sig"``.

A cell a spreadsheet would take for a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return) gets a leading apostrophe: a delivery key, a reference, a refusal's
detail are a client's text, and a file opened in a spreadsheet must not run it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, tzinfo
from decimal import Decimal

from payhooks.console.lists import ANSWERS, STATUSES, Line, Payment
from payhooks.settlements.listing import Entry

MAX_ROWS = 10_000
"""Rows in one export: narrow the time range for more."""
READ_ROWS = 500
"""Rows read from the database at a time while the export is written."""
BOM = "\ufeff"
"""Written once, before the header: Excel then reads the file as UTF-8."""

_FORMULA = ("=", "+", "-", "@", "\t", "\r")

Cell = str | int | float | Decimal | bool | None


def guarded(value: Cell) -> str | int | float | Decimal:
    """What is written for a cell: a formula's first character made text (``'=1+1``); numbers
    (an amount in rupees too, ``-100.00``) as they are, nothing as an empty cell, a flag as
    ``yes``/``no``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return value


def rupees(paise: int | None) -> Decimal | None:
    """``499.00``, ``-100.00`` (a number, never guarded as text); nothing for an amount not
    known."""
    return None if paise is None else Decimal(paise).scaleb(-2)


def when(at: datetime | None, zone: tzinfo) -> str:
    return "" if at is None else at.astimezone(zone).isoformat(timespec="milliseconds")


def text(rows: Iterable[Sequence[Cell]]) -> str:
    """CSV lines for ``rows``, each cell guarded."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in rows:
        writer.writerow([guarded(cell) for cell in row])
    return out.getvalue()


DELIVERY_COLUMNS = (
    "received_at", "gateway", "http_status", "outcome", "answer", "verified", "delivery_key",
    "event_type", "payment_id", "gateway_reference", "requests", "body_bytes", "body_mismatch",
    "expected_rupees", "expected_paise", "paid_rupees", "paid_paise", "detail", "duration_ms",
)  # fmt: skip


def delivery_row(line: Line, zone: tzinfo) -> list[Cell]:
    return [
        when(line.received_at, zone), line.provider, line.status, line.outcome,
        ANSWERS.get(line.answer, line.answer), line.verified, line.event_id, line.event_type,
        line.payment_id, line.merchant_ref, line.repeats, line.body_bytes, line.body_mismatch,
        rupees(line.expected_paise), line.expected_paise, rupees(line.paid_paise),
        line.paid_paise, line.detail, round(line.duration_ms, 1),
    ]  # fmt: skip


PAYMENT_COLUMNS = (
    "at", "gateway", "payment_id", "status", "gateway_order_id", "delivery_key", "by",
    "expected_rupees", "expected_paise", "expected_currency", "paid_rupees", "paid_paise",
    "paid_currency", "needs_refund", "flags", "resolution",
)  # fmt: skip


def payment_row(
    payment: Payment, zone: tzinfo, statuses: Mapping[str, str] = STATUSES
) -> list[Cell]:
    return [
        when(payment.at, zone), payment.provider, payment.payment_id,
        statuses.get(payment.status, payment.status), payment.gateway_order_id,
        payment.event_id, payment.by, rupees(payment.expected_paise), payment.expected_paise,
        payment.expected_currency, rupees(payment.paid_paise), payment.paid_paise,
        payment.paid_currency, payment.needs_refund, " ".join(payment.flags),
        payment.resolution,
    ]  # fmt: skip


SETTLEMENT_COLUMNS = (
    "settled_at", "gateway", "settlement_id", "utr", "state", "kind", "gateway_type",
    "entry_id", "payment_id", "gateway_order_id", "amount_rupees", "amount_paise",
    "fee_rupees", "fee_paise", "tax_rupees", "tax_paise", "net_rupees", "net_paise",
    "payment_known",
)  # fmt: skip
"""One row per settlement line: the payout it is in, then the line as the gateway stated it
(``net`` what it added to the payout, negative for a debit; the fee as the gateway states it:
Razorpay's includes its tax). ``payment_known``: the payment is one payhooks applied (empty for
a line that names none)."""


def settlement_row(entry: Entry, zone: tzinfo) -> list[Cell]:
    return [
        when(entry.settled_at, zone), entry.provider, entry.settlement_id, entry.utr,
        entry.state, entry.kind, entry.entry_type, entry.entry_id, entry.payment_id,
        entry.gateway_order_id, rupees(entry.amount_paise), entry.amount_paise,
        rupees(entry.fee_paise), entry.fee_paise, rupees(entry.tax_paise), entry.tax_paise,
        rupees(entry.net_paise), entry.net_paise, entry.matched,
    ]  # fmt: skip


def filename(kind: str, at: datetime, zone: tzinfo) -> str:
    """``payhooks-deliveries-20261203-143512.csv``, in the console's zone."""
    return f"payhooks-{kind}-{at.astimezone(zone):%Y%m%d-%H%M%S}.csv"


__all__ = [
    "DELIVERY_COLUMNS",
    "MAX_ROWS",
    "PAYMENT_COLUMNS",
    "READ_ROWS",
    "SETTLEMENT_COLUMNS",
    "delivery_row",
    "filename",
    "guarded",
    "payment_row",
    "rupees",
    "settlement_row",
    "text",
]

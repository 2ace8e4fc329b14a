"""Settlements as the core records them (``payhooks_settlements``, ``payhooks_settlement_lines``,
core migration 0024): each payout once, however many times its webhook is delivered or its
report fetched, and each of its lines once, matched to the payment payhooks applied
(``payhooks_payments``) when it is recorded; and each report line payhooks could not read once
(``payhooks_settlement_unreadable``, core migration 0026), until a fetch reads it.

Written as steps (``payhooks.plumbing.db.Steps``) with no driver, so one list of statements
serves the webhook's claim (``payhooks.intake.ingest``: a settlement webhook is recorded in the
claim's transaction, and reaches no handler) and a report's fetch
(``payhooks.reconcile.settling``). Every write is an upsert on the payout's or the line's own
key: two deliveries, two fetches, or a delivery and a fetch at the same moment wait on each
other's row and record once. A payout's state only moves up its rank (pending, settled,
failed, reversed: a failure told after a report line's "settled" wins, and a "settled" told
again after a failure never undoes it), but for the gateway's answer about the payout now,
which replaces it; a figure a source does not state never wipes one another stated. Lines are
written in key order, so two writers of one payout's lines never deadlock, and only while no
review runs (``flags.TURN``), so a settled line always clears its payment's flag."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

import psycopg

from payhooks.events import Received
from payhooks.gateways import gateway
from payhooks.gateways._settlements import (
    Line,
    LineKind,
    Settlement,
    SettlementState,
    Unreadable,
)
from payhooks.gateways._settlements import unreadable as kept_unreadable
from payhooks.plumbing.db import Connection, Statement, Steps, first_line, row_refused, run
from payhooks.settlements.flags import LINES_TURN, SETTLED, TURN

_RANKED = ", ".join(f"'{state.value}'" for state in sorted(SettlementState, key=lambda x: x.rank))
_RANK = f"array_position(ARRAY[{_RANKED}], {{}})"
# The gateway's answer about the payout now, or a word that moves the state up (or keeps it).
_UP = f"(%(current)s OR {_RANK.format('EXCLUDED.state')} >= {_RANK.format('s.state')})"


def _newest(column: str) -> str:
    """A figure from the source that took the state over (or kept it), else the one kept."""
    return (
        f"{column} = CASE WHEN {_UP} THEN coalesce(EXCLUDED.{column}, s.{column}) "
        f"ELSE coalesce(s.{column}, EXCLUDED.{column}) END"
    )


_FIGURES = ("status", "amount_paise", "fees_paise", "tax_paise", "currency", "utr", "settled_at")
UPSERT_SETTLEMENT = (
    """
INSERT INTO payhooks_settlements AS s
    (provider, settlement_id, state, status, amount_paise, fees_paise, tax_paise, currency, utr,
     settled_at)
VALUES (%(provider)s, %(settlement_id)s, %(state)s, %(status)s, %(amount_paise)s,
        %(fees_paise)s, %(tax_paise)s, %(currency)s, %(utr)s, %(settled_at)s)
ON CONFLICT (provider, settlement_id) DO UPDATE SET
    state = CASE WHEN """
    + _UP
    + """ THEN EXCLUDED.state ELSE s.state END,
    """
    + ",\n    ".join(_newest(c) for c in _FIGURES)
    + """,
    updated_at = now()
RETURNING (xmax = 0)
"""
)
# The page's lines, matched to the payment payhooks applied (its gateway order too, when the
# line does not name it); a line recorded before is left as it is, but for a match found now.
UPSERT_LINES = """
WITH given AS (
    SELECT * FROM unnest(%(settlement_ids)s::text[], %(entry_ids)s::text[], %(kinds)s::text[],
                         %(entry_types)s::text[], %(payment_ids)s::text[], %(orders)s::text[],
                         %(amounts)s::bigint[], %(fees)s::bigint[], %(taxes)s::bigint[],
                         %(nets)s::bigint[], %(currencies)s::text[],
                         %(occurred)s::timestamptz[])
        AS x (settlement_id, entry_id, kind, entry_type, payment_id, gateway_order_id,
              amount_paise, fee_paise, tax_paise, net_paise, currency, occurred_at)
), written AS (
    INSERT INTO payhooks_settlement_lines AS l
        (provider, settlement_id, entry_id, kind, entry_type, payment_id, gateway_order_id,
         amount_paise, fee_paise, tax_paise, net_paise, currency, occurred_at, matched)
    SELECT %(provider)s, g.settlement_id, g.entry_id, g.kind, g.entry_type, g.payment_id,
           coalesce(g.gateway_order_id, p.gateway_order_id, k.gateway_order_id), g.amount_paise,
           g.fee_paise, g.tax_paise, g.net_paise, g.currency, g.occurred_at,
           CASE WHEN g.payment_id IS NULL THEN NULL
                ELSE p.payment_id IS NOT NULL OR k.payment_id IS NOT NULL END
    FROM given g
    LEFT JOIN LATERAL (
        SELECT payment_id, gateway_order_id FROM payhooks_payments
        WHERE provider = %(provider)s AND payment_id = g.payment_id
        ORDER BY gateway_order_id IS NULL LIMIT 1) p ON true
    -- A payment whose record the purge took (past REFUNDABLE_DAYS) is still known by a line
    -- of it matched before: a refund's or an adjustment's line may come a year on.
    LEFT JOIN LATERAL (
        SELECT payment_id, gateway_order_id FROM payhooks_settlement_lines
        WHERE provider = %(provider)s AND payment_id = g.payment_id AND matched
        ORDER BY gateway_order_id IS NULL LIMIT 1) k ON p.payment_id IS NULL
    ORDER BY g.settlement_id, g.entry_type, g.entry_id
    ON CONFLICT (provider, settlement_id, entry_type, entry_id) DO UPDATE SET
        matched = true,
        gateway_order_id = coalesce(l.gateway_order_id, EXCLUDED.gateway_order_id)
    WHERE l.matched = false AND EXCLUDED.matched
    RETURNING (xmax = 0) AS inserted, matched
)
SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE matched IS true),
       count(*) FILTER (WHERE inserted AND matched = false)
FROM written
"""
# A payment a line of a settled payout now names is settled: its flag goes (a line of a payout
# that failed or came back clears nothing).
CLEAR_UNSETTLED = (
    "DELETE FROM payhooks_unsettled u"
    " WHERE u.provider = %(provider)s AND u.payment_id = ANY(%(payments)s) AND "
    + SETTLED.format(alias="u")
)


# The lines a page could not read, each once however often it is met (core migration 0026).
UPSERT_UNREADABLE = """
INSERT INTO payhooks_settlement_unreadable AS u
    (provider, digest, settlement_id, entry_id, payment_id, reason, raw)
SELECT %(provider)s, x.* FROM unnest(%(digests)s::text[], %(settlement_ids)s::text[],
                                     %(entry_ids)s::text[], %(payment_ids)s::text[],
                                     %(reasons)s::text[], %(raws)s::text[])
    AS x (digest, settlement_id, entry_id, payment_id, reason, raw)
ORDER BY x.digest
ON CONFLICT (provider, digest) DO UPDATE SET
    seen_at = now(), reason = EXCLUDED.reason, raw = EXCLUDED.raw,
    payment_id = coalesce(EXCLUDED.payment_id, u.payment_id)
"""
# A line read now that was kept unreadable before (the gateway corrected it, or this payhooks
# reads it) is no longer for a person.
FORGET_UNREADABLE = """
DELETE FROM payhooks_settlement_unreadable r
USING unnest(%(settlement_ids)s::text[], %(entry_ids)s::text[]) AS x (settlement_id, entry_id)
WHERE r.provider = %(provider)s AND r.settlement_id = x.settlement_id
  AND r.entry_id = x.entry_id
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """What one write recorded: payouts new to payhooks, lines new, lines matched to a
    payment (new, or found again and matched now), and new lines that named a payment
    payhooks does not know."""

    settlements: int = 0
    lines: int = 0
    matched: int = 0
    unmatched: int = 0

    def __add__(self, other: Recorded) -> Recorded:
        return Recorded(
            settlements=self.settlements + other.settlements,
            lines=self.lines + other.lines,
            matched=self.matched + other.matched,
            unmatched=self.unmatched + other.unmatched,
        )


def recording(
    settlements: Iterable[Settlement],
    lines: Sequence[Line] = (),
    unreadable: Sequence[Unreadable] = (),
) -> Steps[Recorded]:
    """Record ``settlements`` and ``lines`` (each line's payout too, from what the line says
    of it, where ``settlements`` does not state it), and keep the lines a page could not read
    (``unreadable``) for a person."""
    if lines:  # the review's turn over (``flags.review``): its flags are seen, and cleared
        yield Statement(sql=LINES_TURN, params=(TURN,), reads=False)
    stated = {(s.provider, s.settlement_id): s for s in settlements}
    for line in lines:
        stated.setdefault((line.provider, line.settlement_id), listed(line))
    found = Recorded()
    for key in sorted(stated):
        row = yield Statement(sql=UPSERT_SETTLEMENT, params=_settlement_params(stated[key]))
        found += Recorded(settlements=int(bool(row and row[0])))
    for provider in sorted({line.provider for line in lines}):
        once = {_line_key(x): x for x in lines if x.provider is provider}  # a report's repeat
        mine = [once[key] for key in sorted(once)]
        row = yield Statement(sql=UPSERT_LINES, params=_arrays(provider.value, mine, _LINE_ARRAYS))
        assert row is not None
        found += Recorded(lines=row[0], matched=row[1], unmatched=row[2])
        paid = sorted({x.payment_id for x in mine if x.kind is LineKind.PAYMENT and x.payment_id})
        if paid:
            params = {"provider": provider.value, "payments": paid}
            yield Statement(sql=CLEAR_UNSETTLED, params=params, reads=False)
        read = _arrays(provider.value, mine, _READ_ARRAYS)
        yield Statement(sql=FORGET_UNREADABLE, params=read, reads=False)
    for provider in sorted({x.provider for x in unreadable}):
        kept = {x.digest: x for x in unreadable if x.provider is provider}
        given = _arrays(provider.value, [kept[key] for key in sorted(kept)], _UNREADABLE_ARRAYS)
        yield Statement(sql=UPSERT_UNREADABLE, params=given, reads=False)
    return found


def record(
    conn: Connection,
    settlements: Iterable[Settlement],
    lines: Sequence[Line] = (),
    unreadable: Sequence[Unreadable] = (),
) -> Recorded:
    """``recording`` on ``conn``, in a transaction of its own (or a savepoint of the caller's)."""
    with conn.transaction():
        return run(conn, recording(settlements, lines, unreadable))


@dataclass(frozen=True, slots=True)
class Paged:
    """A page recorded (``record_page``): what it recorded, the lines the database refused
    (kept as lines payhooks cannot read), and the payouts it refused, with why."""

    recorded: Recorded
    refused_lines: tuple[Unreadable, ...] = ()
    refused_payouts: tuple[str, ...] = ()


def record_page(
    conn: Connection,
    settlements: Iterable[Settlement],
    lines: Sequence[Line] = (),
    unreadable: Sequence[Unreadable] = (),
) -> Paged:
    """``record``; where the database refuses a row of the page (an app's trigger or
    constraint), the page again row by row, each under a savepoint: a payout refused is said
    (``Paged.refused_payouts``, its lines then refused with it), a line refused is kept as
    one payhooks cannot read, saying why, and the rest are recorded. Any other error is the
    caller's."""
    settlements = tuple(settlements)
    try:
        return Paged(record(conn, settlements, lines, unreadable))
    except psycopg.Error as exc:
        if not row_refused(conn, exc):
            raise
    found = record(conn, (), (), unreadable)
    payouts: list[str] = []
    for settlement in settlements:
        try:
            found += record(conn, (settlement,))
        except psycopg.Error as exc:
            if not row_refused(conn, exc):
                raise
            payouts.append(f"payout {settlement.settlement_id} refused: {first_line(exc)}")
    refused: list[Unreadable] = []
    for line in lines:
        try:
            found += record(conn, (), (line,), ())
        except psycopg.Error as exc:
            if not row_refused(conn, exc):
                raise
            refused.append(_refused(line, first_line(exc)))
    if refused:
        found += record(conn, (), (), refused)
    return Paged(found, tuple(refused), tuple(payouts))


def _refused(line: Line, why: str) -> Unreadable:
    """A line the database refused, kept as the lines payhooks cannot read are: found again
    by its payout and entry, forgotten once a later fetch records it."""
    named = (line.settlement_id, line.entry_id, line.payment_id)
    fields = {
        "settlement_id": line.settlement_id, "entry_id": line.entry_id,
        "entry_type": line.entry_type, "payment_id": line.payment_id,
        "gateway_order_id": line.gateway_order_id, "amount_paise": line.amount_paise,
        "net_paise": line.net_paise,
    }  # fmt: skip
    why = f"the database refused to record it: {why}"
    return kept_unreadable(line.provider, fields, why, named)


def webhook_recording(received: Received) -> Steps[Recorded]:
    """A settlement webhook's payout, read from its verified body by its gateway's reader."""
    settles = gateway(received.event.provider).settles
    if settles is None:  # never: only a gateway that documents settlements makes this kind
        raise LookupError(f"{received.event.provider.value} documents no settlement webhook")
    return (yield from recording([settles.webhook(received.body)]))


def listed(line: Line) -> Settlement:
    """The payout a report line names, as far as the line says: settled (a report lists only
    what was paid out), its UTR and time; its own figures, and the gateway's word for its
    state, unknown."""
    return Settlement(
        provider=line.provider,
        settlement_id=line.settlement_id,
        state=SettlementState.SETTLED,
        status=None,
        utr=line.utr,
        settled_at=line.settled_at,
    )


def _line_key(line: Line) -> tuple[str, str, str]:
    """A line in its payout: its type and id (Cashfree numbers each kind of event on its own,
    so a chargeback and its reversal can share an id)."""
    return line.settlement_id, line.entry_type, line.entry_id


def _settlement_params(s: Settlement) -> dict[str, object]:
    return {
        "provider": s.provider.value, "settlement_id": s.settlement_id, "state": s.state.value,
        "status": s.status, "amount_paise": s.amount_paise, "fees_paise": s.fees_paise,
        "tax_paise": s.tax_paise, "currency": s.currency, "utr": s.utr,
        "settled_at": s.settled_at, "current": s.current,
    }  # fmt: skip


_LINE_ARRAYS = {
    "settlement_ids": "settlement_id",
    "entry_ids": "entry_id",
    "kinds": "kind.value",
    "entry_types": "entry_type",
    "payment_ids": "payment_id",
    "orders": "gateway_order_id",
    "amounts": "amount_paise",
    "fees": "fee_paise",
    "taxes": "tax_paise",
    "nets": "net_paise",
    "currencies": "currency",
    "occurred": "occurred_at",
}
"""``UPSERT_LINES``'s arrays, each with the field of a line it holds."""
_READ_ARRAYS = {"settlement_ids": "settlement_id", "entry_ids": "entry_id"}
"""``FORGET_UNREADABLE``'s arrays: the lines read."""
_UNREADABLE_ARRAYS = {
    "digests": "digest",
    "settlement_ids": "settlement_id",
    "entry_ids": "entry_id",
    "payment_ids": "payment_id",
    "reasons": "reason",
    "raws": "raw",
}
"""``UPSERT_UNREADABLE``'s arrays, each with the field of a line kept it holds."""


def _arrays(provider: str, items: Sequence[object], fields: Mapping[str, str]) -> dict[str, object]:
    """A gateway's ``items`` as a statement's parameters: one array a field (``fields`` names
    each parameter's attribute of an item), an element an item, in order."""
    return {"provider": provider} | {
        name: [attrgetter(attribute)(x) for x in items] for name, attribute in fields.items()
    }


__all__ = [
    "Recorded",
    "listed",
    "record",
    "recording",
    "webhook_recording",
]

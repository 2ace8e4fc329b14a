"""Fetching settlements: each gateway's settlement report for a range of days, recorded and
matched to the payments payhooks applied (``payhooks.settlements.records``), then the review
that flags the captures not settled in time (``payhooks.settlements.flags``). The one
operation ``payhooks settlements``, Django's ``payhooks_settlements``, the console's Fetch
button, the reference worker and a merchant's scheduler run::

    from payhooks.reconcile.settling import fetch
    tally = fetch("postgresql://shop@db/shop", date(2026, 1, 5), date(2026, 1, 6))
    print(tally.summary())

Each page of a report is recorded in a transaction of its own, as it comes: a fetch that
fails half way keeps what it recorded, and a fetch run again records nothing twice. One item
never stops the rest: a line payhooks cannot read is kept for a person (with why, and the
line as answered) and the rest of its page recorded; a day's page or a payout's figures it
cannot read is said, and the other days and payouts still read. A gateway's API error is an
error, never an answer: an outage or refused credentials stop that gateway's fetch there and
say why, the others go on; so does any other exception on one gateway's page (the database
refusing it: a lock or statement timeout, a deadlock), told with its type. A gateway whose
report failed in whole or in part has its captures not reviewed (nothing is flagged
unsettled on the word of a failed report). Of a gateway whose report was read whole, the days
read whole are kept (``payhooks.settlements.reads``), and the review flags no capture whose
payout may be on a day not read yet.

A catch-up (``catching_up``: the reference worker's fetch, ``payhooks settlements
--catch-up``, ``manage.py payhooks_settlements --catch-up``, ``catch_up`` from a merchant's
scheduler) fetches each gateway from the day after its last day read whole (at least the
last ``SETTLEMENT_DAYS``), or, never read whole yet, from as far back as the review looks
(``first_days``), up to today, in successive ranges of at most ``MAX_RANGE_DAYS``
(``fetch_ranges``)::

    from payhooks.reconcile.settling import catch_up
    for tally in catch_up("postgresql://shop@db/shop"):
        print(tally.summary())

Needs the ``reconcile`` extra (httpx)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import cast

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS, ApiCredentials, credentials
from payhooks.gateways._settlements import (
    INDIA,
    MAX_RANGE_DAYS,
    Page,
    SettlementClient,
    checked_range,
)
from payhooks.gateways._status import client, http_client
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import DatabaseAway, GatewayApiError
from payhooks.plumbing.logs import failure_logged
from payhooks.reconcile.parts import Connect
from payhooks.reconcile.running import TIMEOUT_S, connecting
from payhooks.settlements import flags, reads, records
from payhooks.settlements.records import Recorded

log = logging.getLogger("payhooks.reconcile")

SETTLEMENT_DAYS = 3
"""The days (India's, today included) a catch-up fetches at least: a payout late by a day or
two is still found. A gateway whose last day read whole (``payhooks.settlements.reads``) is
older is fetched from the day after it: the days a fetch missed (the gateway down, the
worker down, a cron run missed) are read when it can again, never passed over."""


@dataclass(slots=True, kw_only=True)
class Tally:
    """What one fetch did, by gateway: what it recorded, the report's lines not settled yet
    and those it could not read (kept for a person), the gateways whose report failed in
    whole or in part (with why), those with API credentials whose settlements payhooks reads
    no report of, and the review after it."""

    start: date
    end: date
    recorded: dict[Provider, Recorded] = field(default_factory=dict)
    unsettled: dict[Provider, int] = field(default_factory=dict)
    unreadable: dict[Provider, int] = field(default_factory=dict)
    failures: dict[Provider, str] = field(default_factory=dict)
    unread: list[Provider] = field(default_factory=list)
    read_through: dict[Provider, date] = field(default_factory=dict)
    """Of each gateway this fetch read whole, the last day read whole since payhooks began
    (``payhooks.settlements.reads``): before ``end`` when days between were left unread."""
    behind: dict[Provider, date] = field(default_factory=dict)
    """The gateways read whole whose last day read whole stays before a day this fetch read
    that was over: the days after it are unread, and no capture due after it is flagged."""
    review: flags.Review | None = None

    def counted(self, provider: Provider, page: Page, done: Recorded) -> None:
        """One page of ``provider``'s report, recorded as ``done``."""
        self.recorded[provider] += done
        self.unsettled[provider] = self.unsettled.get(provider, 0) + page.unsettled
        if page.unreadable:
            self.unreadable[provider] = self.unreadable.get(provider, 0) + len(page.unreadable)
        if page.failed is not None:
            self.failed(provider, page.failed)

    def failed(self, provider: Provider, why: str) -> None:
        """A part of ``provider``'s report (or all that was left of it) failed, for ``why``,
        kept on one line (a database's error spans several: its DETAIL, its HINT)."""
        why = " ".join(why.split())
        said = self.failures.get(provider)
        self.failures[provider] = why if said is None else f"{said}; {why}"

    def summary(self) -> str:
        """One line per gateway fetched, then the review's."""
        said = [f"settlements {self.start} to {self.end}:"]
        for provider, done in sorted(self.recorded.items()):
            failed, unreadable = self.failures.get(provider), self.unreadable.get(provider)
            behind = self.behind.get(provider)
            said.append(
                f"  {provider.value}: {done.settlements} new payout(s), {done.lines} new "
                f"line(s), {done.matched} matched, {done.unmatched} naming no payment payhooks "
                f"knows, {self.unsettled.get(provider, 0)} not settled yet"
                + (f"; {unreadable} line(s) it cannot read, kept (--unreadable lists them)"
                   if unreadable else "")
                + (f"; read whole through {behind} only: no capture due after it is flagged "
                   f"until the days from {behind + timedelta(days=1)} are fetched"
                   if behind is not None else "")
                + (f"; FAILED: {failed}" if failed else "")
            )  # fmt: skip
        if self.unread:
            names = ", ".join(p.value for p in self.unread)
            said.append(f"  no settlement report payhooks reads: {names}")
        if self.review is not None:
            said.append(f"  review: {self.review.summary()}")
        return "\n".join(said)

    def trouble(self) -> str:
        """What failed, for the command's error line."""
        return "; ".join(f"{p.value}: {why}" for p, why in sorted(self.failures.items()))


def days_named(start: str | None, end: str | None) -> tuple[date, date]:
    """The days a command's ``--from`` and ``--to`` name (every door reads them here, so all
    refuse alike); ``ValueError`` says what is wrong."""
    if start is None or end is None:
        raise ValueError("name the days to fetch: --from YYYY-MM-DD --to YYYY-MM-DD")
    try:
        return date.fromisoformat(start), date.fromisoformat(end)
    except ValueError:
        raise ValueError("--from and --to are days: YYYY-MM-DD") from None


def fetch_once(
    connect: Connect,
    found: Mapping[Provider, ApiCredentials],
    start: date,
    end: date,
    *,
    timeout_s: float = TIMEOUT_S,
    margin: timedelta = flags.DEFAULT_MARGIN,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Tally:
    """Each gateway in ``found`` (its API credentials) that documents a settlement report:
    its pages for ``start`` to ``end`` (India's days, both included, at most
    ``MAX_RANGE_DAYS``), recorded as they come; then the review. ``ValueError`` for a range it
    refuses, before any call."""
    checked_range(start, end, today=now().astimezone(INDIA).date())
    with http_client(timeout_s) as http:
        reporters = {provider: client(given, http) for provider, given in found.items()}
        return fetch_with(connect, reporters, start, end, margin=margin, now=now)


def fetch_with(
    connect: Connect,
    clients: Mapping[Provider, object],
    start: date,
    end: date,
    *,
    margin: timedelta = flags.DEFAULT_MARGIN,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Tally:
    """``fetch_once`` with status clients already made (a worker's, over its own HTTP
    client): each of a gateway that documents a settlement report is asked for it. Of each
    report read whole, the last day read whole moves on (``payhooks.settlements.reads``)
    before the review."""
    today = now().astimezone(INDIA).date()
    checked_range(start, end, today=today)
    tally = Tally(start=start, end=end)
    for provider, found in sorted(clients.items()):
        if GATEWAYS[provider].settles is None:
            tally.unread.append(provider)
            continue
        _fetched(connect, cast(SettlementClient, found), start, end, tally)
    read = [p for p in tally.recorded if p not in tally.failures]
    with connect() as conn:
        for provider in read:
            _moved(conn, provider, tally, today=today)
        # A gateway no fetch read a day of whole (today's alone, not over), or whose days
        # could not be marked, is not reviewed: nothing says what was paid out.
        known = [p for p in read if p in tally.read_through]
        tally.review = flags.review(conn, now(), margin, providers=known)
    return tally


def fetch_ranges(start: date, end: date) -> list[tuple[date, date]]:
    """``start`` to ``end`` in successive ranges of at most ``MAX_RANGE_DAYS``, the last
    ending on ``end``."""
    ranges = []
    while start <= end:
        last = min(end, start + timedelta(days=MAX_RANGE_DAYS - 1))
        ranges.append((start, last))
        start = last + timedelta(days=1)
    return ranges


def first_days(
    conn: Connection,
    providers: Collection[Provider],
    *,
    today: date,
    margin: timedelta = flags.DEFAULT_MARGIN,
) -> dict[Provider, date]:
    """The first day a catch-up fetches of each of ``providers``: the day after its last day
    read whole, or ``SETTLEMENT_DAYS`` ago if that is later. A gateway never read whole yet
    starts as far back as the review looks: ``REVIEW_DAYS``, its documented cycle and
    ``margin`` (in whole days) before ``today``, so that no capture the review may flag has
    its payout on a day not read. One whose settlements payhooks reads no report of starts
    with the last days (it is named unread, never fetched)."""
    recent = today - timedelta(days=SETTLEMENT_DAYS - 1)
    marks = reads.read_through(conn, providers)
    spans = flags.allowed(margin)
    firsts = {}
    for provider in providers:
        if provider in marks:
            firsts[provider] = marks[provider] + timedelta(days=1)
        elif provider in spans:
            back = flags.REVIEW_DAYS + -(-spans[provider] // timedelta(days=1))
            firsts[provider] = today - timedelta(days=back)
        else:
            firsts[provider] = recent
    return {provider: min(recent, first) for provider, first in firsts.items()}


def catching_up(
    connect: Connect,
    clients: Mapping[Provider, object],
    *,
    margin: timedelta = flags.DEFAULT_MARGIN,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[Tally]:
    """Each gateway of ``clients`` (status clients already made, as ``fetch_with`` takes
    them) fetched from its first day (``first_days``) up to today, in successive ranges of at
    most ``MAX_RANGE_DAYS`` (``fetch_ranges``): each range's fetch, recorded and reviewed,
    yielded as it is done. A gateway whose report failed in a range is not asked for the
    later ones (the next catch-up starts again from its last day read whole, so no range is
    read past days left unread). ``stop`` is asked before each range: true, the rest is left
    to the next catch-up."""
    if not clients:
        return
    today = now().astimezone(INDIA).date()
    with connect() as conn:
        firsts = first_days(conn, list(clients), today=today, margin=margin)
    recent = today - timedelta(days=SETTLEMENT_DAYS - 1)
    back = {p.value: first.isoformat() for p, first in sorted(firsts.items()) if first < recent}
    if back:
        log.warning("settlements_catching_up", extra={"from": back, "to": today.isoformat()})
    failed: set[Provider] = set()
    for first, last in fetch_ranges(min(firsts.values()), today):
        due = {p: c for p, c in clients.items() if firsts[p] <= last and p not in failed}
        if not due:
            continue
        if stop():
            return
        tally = fetch_with(connect, due, first, last, margin=margin, now=now)
        failed.update(tally.failures)
        yield tally


def catch_up_once(
    connect: Connect,
    found: Mapping[Provider, ApiCredentials],
    *,
    timeout_s: float = TIMEOUT_S,
    margin: timedelta = flags.DEFAULT_MARGIN,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[Tally]:
    """``catching_up`` for each gateway in ``found`` (its API credentials), over an HTTP
    client of its own: every range's fetch, in order."""
    with http_client(timeout_s) as http:
        reporters = {provider: client(given, http) for provider, given in found.items()}
        return list(catching_up(connect, reporters, margin=margin, now=now))


def _moved(conn: Connection, provider: Provider, tally: Tally, *, today: date) -> None:
    """``provider``'s report read whole: its last day read whole moved on, and said when
    days before this fetch's are still unread. The database refusing the mark (a timeout, a
    lost connection: any exception) is this gateway's failure alone, told with its type."""
    try:
        through = reads.moved(conn, provider, tally.start, tally.end, today=today)
    except DatabaseAway:
        raise  # the whole fetch's, not this gateway's: said once, by the caller
    except Exception as exc:  # its own transaction, rolled back: the next gateway's is not
        _failed(provider, exc, tally)
        return
    if through is None:
        return
    tally.read_through[provider] = through
    if through < min(tally.end, today - timedelta(days=1)):
        tally.behind[provider] = through
        log.warning("settlements_days_unread", extra={
            "provider": provider.value, "read_through": through.isoformat(),
            "start": tally.start.isoformat(), "end": tally.end.isoformat()})  # fmt: skip


def _fetched(
    connect: Connect, reporter: SettlementClient, start: date, end: date, tally: Tally
) -> None:
    """One gateway's report, page by page: a line it cannot read is kept and a part of the
    report it cannot read is told, and the rest recorded (a line or a payout the database
    refuses too: ``records.record_page``); an error that ends the report (an outage, refused
    credentials, a page whose next one cannot be found, the database failing a page: any
    other exception) stops this gateway alone, and is told with its type."""
    provider = reporter.provider
    tally.recorded[provider] = Recorded()
    try:
        with connect() as conn:
            for page in reporter.settlement_pages(start, end):
                paged = records.record_page(conn, page.settlements, page.lines, page.unreadable)
                failed = "; ".join(f for f in (page.failed, *paged.refused_payouts) if f)
                kept = (*page.unreadable, *paged.refused_lines)
                told = replace(page, unreadable=kept, failed=failed or None)
                tally.counted(provider, told, paged.recorded)
    except GatewayApiError as exc:
        tally.failed(provider, exc.reason)
    except DatabaseAway:
        raise
    except Exception as exc:  # the database's (a timeout, a deadlock), a reader's: this gateway
        _failed(provider, exc, tally)


def _failed(provider: Provider, exc: Exception, tally: Tally) -> None:
    why = failure_logged(log, "settlements_gateway_failed", exc, provider=provider.value)
    tally.failed(provider, why)


def catch_up(
    database_url: str,
    *,
    environ: Mapping[str, str] | None = None,
    margin: timedelta = flags.DEFAULT_MARGIN,
) -> list[Tally]:
    """``catch_up_once`` on ``database_url`` with the gateways' API credentials in
    ``environ`` (as ``fetch`` reads them): what a merchant's scheduler runs daily."""
    found = credentials(os.environ if environ is None else environ)
    return catch_up_once(connecting(database_url), found, margin=margin)


def fetch(
    database_url: str,
    start: date,
    end: date,
    *,
    environ: Mapping[str, str] | None = None,
    margin: timedelta = flags.DEFAULT_MARGIN,
) -> Tally:
    """``fetch_once`` on ``database_url`` with the gateways' API credentials in ``environ``
    (default: the process's environment, under the reference service's names:
    ``PAYHOOKS_RAZORPAY_KEY_ID``, ...)."""
    found = credentials(os.environ if environ is None else environ)
    return fetch_once(connecting(database_url), found, start, end, margin=margin)


__all__ = [
    "MAX_RANGE_DAYS",
    "SETTLEMENT_DAYS",
    "Tally",
    "catch_up",
    "catch_up_once",
    "catching_up",
    "days_named",
    "fetch",
    "fetch_once",
    "fetch_ranges",
    "fetch_with",
    "first_days",
]

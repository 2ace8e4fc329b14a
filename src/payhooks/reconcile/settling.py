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
unsettled on the word of a failed report). Of a gateway whose report was read whole, the last
day read whole moves on (``payhooks.settlements.reads``): the worker fetches from the day
after it, and the review flags no capture whose payout may be on a day not read yet. Needs
the ``reconcile`` extra (httpx)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from payhooks.plumbing.errors import GatewayApiError
from payhooks.reconcile.parts import Connect
from payhooks.reconcile.running import TIMEOUT_S, connecting
from payhooks.settlements import flags, reads, records
from payhooks.settlements.records import Recorded

log = logging.getLogger("payhooks.reconcile")


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
        """A part of ``provider``'s report (or all that was left of it) failed, for ``why``."""
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
        tally.review = flags.review(conn, now(), margin, providers=read)
    return tally


def _moved(conn: Connection, provider: Provider, tally: Tally, *, today: date) -> None:
    """``provider``'s report read whole: its last day read whole moved on, and said when
    days before this fetch's are still unread."""
    through = reads.moved(conn, provider, tally.start, tally.end, today=today)
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
    report it cannot read is told, and the rest recorded; an error that ends the report (an
    outage, refused credentials, a page whose next one cannot be found, the database refusing
    a page: any exception) stops this gateway alone, and is told with its type."""
    provider = reporter.provider
    tally.recorded[provider] = Recorded()
    try:
        with connect() as conn:
            for page in reporter.settlement_pages(start, end):
                done = records.record(conn, page.settlements, page.lines, page.unreadable)
                tally.counted(provider, page, done)
    except GatewayApiError as exc:
        tally.failed(provider, exc.reason)
    except Exception as exc:  # the database's (a timeout, a deadlock), a reader's: this gateway
        why = f"{type(exc).__name__}: {exc}"[:500]
        log.exception("settlements_gateway_failed", extra={"provider": provider.value,
                                                           "error": why})  # fmt: skip
        tally.failed(provider, why)


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


__all__ = ["MAX_RANGE_DAYS", "Tally", "days_named", "fetch", "fetch_once", "fetch_with"]

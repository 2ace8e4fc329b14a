"""The parts a reconciliation pass is built from: how it connects (``Connect``), how a
reported payment is applied (``Deliver``, with a ``Followup`` after the handler; ``each``,
every one of an answer's payments, whichever fail) and what it counts (``Tally``). Below both
the pass (``passes``) and its confirmations (``confirming``), which share them."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from payhooks.events import Event, Provider, Received
from payhooks.gateways._reports import Report
from payhooks.intake.ingest import Applied, Handler, Receipt
from payhooks.plumbing.db import Connection

Followup = Callable[[Connection, Event, Applied], None]
"""A step run after the handler, in the delivery's transaction."""

log = logging.getLogger("payhooks.reconcile")


def followed(handler: Handler, then: Followup) -> Handler:
    """``handler``, then ``then`` in the same transaction."""

    def handle(conn: Connection, event: Event) -> Applied:
        applied = handler(conn, event)
        then(conn, event, applied)
        return applied

    return handle


Connect = Callable[[], AbstractContextManager[Connection]]
"""An autocommit connection with no transaction open, for the pass's own bookkeeping."""


class Deliver(Protocol):
    """How a reported payment is applied: claimed and handed to the merchant's handler (or
    the shop's), ``then`` run after it in the same transaction. It opens what it needs."""

    def __call__(self, received: Received, *, then: Followup) -> Receipt: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Unapplied:
    """A payment the gateway reported that could not be applied (the handler raised, the
    database refused it), and why."""

    received: Received
    error: Exception

    @property
    def reason(self) -> str:
        """The payment named, and the error: what its checkout or callback keeps as its last
        error, so a person knows which of the order's payments to look at."""
        event = self.received.event
        named = event.payment_id or event.event_id
        return f"{event.kind.value} {named}: {type(self.error).__name__}: {self.error}"


def each(
    deliver: Deliver, reported: Iterable[Received], then: Followup
) -> tuple[list[Receipt], list[Unapplied]]:
    """Every payment of one answer applied, each in a transaction of its own (``deliver``
    opens it): one the handler or the database refuses is kept with its error and the next is
    applied all the same, so a failed attempt refused every pass never hides the order's
    capture after it. Returns the receipts of those applied and what failed."""
    receipts: list[Receipt] = []
    failed: list[Unapplied] = []
    for received in reported:
        try:
            receipts.append(deliver(received, then=then))
        except Exception as exc:  # the handler's, the database's: this payment only
            failed.append(Unapplied(received=received, error=exc))
    return receipts, failed


def reasons(failed: Iterable[Unapplied], unreadable: Iterable[str] = (), *, most: int = 500) -> str:
    """What failed, and what the answer listed unreadably, in one bounded line for a
    ``last_error``."""
    return "; ".join([*(f.reason for f in failed), *unreadable])[:most]


def unread(provider: Provider, report: Report, tally: Tally, **where: str) -> tuple[str, ...]:
    """The payments ``report`` lists unreadably, each counted among those not applied and
    logged: the checkout or callback keeps them as its error and is asked about again."""
    for reason in report.unreadable:
        tally.unreadable[provider] += 1
        log.error("reconcile_unreadable_payment",
                  extra={"provider": provider.value, **where, "error": reason})  # fmt: skip
    return report.unreadable


@dataclass(slots=True)
class Tally:
    """What one pass did, per gateway."""

    examined: Counter[Provider] = field(default_factory=Counter)
    applied: Counter[Provider] = field(default_factory=Counter)
    ignored: Counter[Provider] = field(default_factory=Counter)
    """Payment events recorded ``ignored``: a handler's answer (a second payment of a paid
    order, say) or an event nothing acts on. Not applied, but not lost: their record says so."""
    recovered: Counter[Provider] = field(default_factory=Counter)
    api_errors: Counter[Provider] = field(default_factory=Counter)
    expired: Counter[Provider] = field(default_factory=Counter)
    deferred: Counter[Provider] = field(default_factory=Counter)
    """Checkouts a paused gateway's turn left for a later pass."""
    callbacks_deferred: Counter[Provider] = field(default_factory=Counter)
    """... and callbacks waiting for its word (``confirming``), not asked this pass."""
    paused: set[Provider] = field(default_factory=set)
    """Gateways a 429, refused credentials or outages in a row paused
    (``payhooks.plumbing.retries.Pausing``): not called again this pass, its checkouts' turn
    or its callbacks'."""
    answered: Counter[Provider] = field(default_factory=Counter)
    unapplied: Counter[Provider] = field(default_factory=Counter)
    """Reported payments that could not be applied (the handler raised, the database refused),
    each counted, and checkouts or callbacks whose turn failed after the gateway answered."""
    unreadable: Counter[Provider] = field(default_factory=Counter)
    """Payments the gateway's answer listed in a shape payhooks cannot read, and callbacks it
    cannot read: no handler saw them."""
    refused: dict[Provider, str] = field(default_factory=dict)
    """Gateways that refused the credentials this pass, with their words."""
    confirmed: Counter[Provider] = field(default_factory=Counter)
    """Callbacks resting on a static credential the API confirmed
    (``payhooks.intake.confirmations``)."""
    refuted: Counter[Provider] = field(default_factory=Counter)
    """... and those it refuted: forged or stale, changing nothing."""
    erring: Counter[Provider] = field(default_factory=Counter)
    """Callbacks waiting to be asked again after an error, this pass's and earlier ones'
    (``confirmations.erring``): counted where a door runs one pass (``--once``), so that a
    pass inside their backoff, which asks nothing, does not pass for success."""
    broken: dict[str, str] = field(default_factory=dict)
    """Turns that failed whole (a gateway's, or the confirmations'), with why: the database
    answering but refusing the pass's own bookkeeping (a standby left read only, a table
    missing, a statement timed out). What they were to ask about waits for a later pass."""

    @property
    def failures(self) -> int:
        """API errors, payments not applied and payments unreadable: a pass with any exits 1
        from the commands."""
        errors = sum(self.api_errors.values()) + sum(self.unapplied.values())
        return errors + self._unread + len(self.broken) + sum(self.erring.values())

    def broke(self, turn: str, reason: str) -> None:
        """``turn`` failed whole, for ``reason`` (its first failure is kept)."""
        self.broken.setdefault(turn, reason)

    @property
    def _unread(self) -> int:
        return sum(self.unreadable.values())

    def summary(self) -> str:
        """One line of the pass's counts, for the command's output and the log."""
        parts = [
            f"examined {sum(self.examined.values())} checkout(s)",
            f"applied {sum(self.applied.values())} payment event(s)",
            f"recovered {sum(self.recovered.values())} payment(s) no webhook brought",
            f"{sum(self.api_errors.values())} API error(s)",
            f"{sum(self.expired.values())} expired checkout(s) reported",
        ]
        if +self.ignored:  # its zero counts left out
            parts.append(f"{sum(self.ignored.values())} payment event(s) recorded ignored")
        if self.deferred:
            parts.append(f"{sum(self.deferred.values())} deferred to a later pass")
        if self.callbacks_deferred:
            parts.append(self._callbacks_deferred())
        if self.unapplied:
            parts.append(
                f"{sum(self.unapplied.values())} not applied: a handler or the database failed"
            )
        if self.unreadable:
            parts.append(f"{self._unread} payment(s) the gateway reported unreadably")
        if self.refused:
            parts.append(f"credentials refused by {', '.join(sorted(self.refused))}")
        if self.broken:
            parts.append(self._broken())
        if self.confirmed or self.refuted:
            parts.append(
                f"{sum(self.confirmed.values())} callback(s) confirmed by the API, "
                f"{sum(self.refuted.values())} refuted"
            )
        return ", ".join(parts)

    def trouble(self) -> str:
        """What made the pass fail (``failures``), in the words every door prints before
        "each is asked again later"."""
        errors, unapplied = sum(self.api_errors.values()), sum(self.unapplied.values())
        said = [f"{errors} gateway API error(s) ({self._by_gateway()})"] if errors else []
        if unapplied:
            said.append(f"{unapplied} payment(s) a handler or the database failed on")
        if self.unreadable:
            said.append(f"{self._unread} payment(s) the gateway reported unreadably")
        if self.broken:
            said.append(self._broken())
        if said:  # what this pass met says it; what waits from before, only without it
            return ", ".join(said)
        if self.erring:
            each = ", ".join(f"{p.value} {n}" for p, n in sorted(self.erring.items()))
            said.append(f"{sum(self.erring.values())} callback(s) waiting to be asked again "
                        f"after an error ({each})")  # fmt: skip
        return ", ".join(said)

    def _broken(self) -> str:
        turns = "; ".join(f"{turn}: {why}" for turn, why in sorted(self.broken.items()))
        return f"{len(self.broken)} turn(s) the database failed whole ({turns})"

    def confirmations(self) -> str:
        """A confirmation pass in one line (``payhooks confirm``, ``payhooks_confirm``): what
        it settled, and each gateway whose API failed it or refused its credentials."""
        said = (
            f"{sum(self.confirmed.values())} callback(s) confirmed by the API, "
            f"{sum(self.refuted.values())} refuted, "
            f"{sum(self.applied.values())} payment event(s) applied"
        )
        if +self.ignored:  # its zero counts left out
            said += f", {sum(self.ignored.values())} recorded ignored"
        if self.api_errors:
            said += f", {sum(self.api_errors.values())} gateway API error(s) ({self._by_gateway()})"
        if self.refused:
            said += f", credentials refused by {', '.join(sorted(p.value for p in self.refused))}"
        if self.broken:
            said += f", {self._broken()}"
        if self.callbacks_deferred:
            said += f", {self._callbacks_deferred()}"
        return said

    def _callbacks_deferred(self) -> str:
        return f"{sum(self.callbacks_deferred.values())} callback(s) deferred to a later pass"

    def _by_gateway(self) -> str:
        return ", ".join(f"{p.value} {n}" for p, n in sorted(self.api_errors.items()))

    @property
    def said_anything(self) -> bool:
        """Whether a confirmation pass settled a callback or met a gateway API's failure (a
        daemon's pass that did neither prints nothing)."""
        settled = sum(self.confirmed.values()) or sum(self.refuted.values())
        return bool(settled or self.api_errors or self.broken)


__all__ = ["Connect", "Deliver", "Followup", "Tally", "Unapplied", "each", "followed", "reasons"]

"""One reconciliation pass: ask each gateway about the expected checkouts whose webhook never
came, and take every payment it reports through the same claim and handler as a webhook
(docs/design.md, "Reconciliation").

Bounded and polite: each gateway is asked about at most ``limit`` checkouts a pass; a 429
stops asking that gateway for the rest of the pass (its checkouts wait the time it asked for),
and so do a few failures in a row; one gateway failing never stops the others. Whatever is not
finished is due again on a later pass. A checkout is never cancelled on silence: the gateway's
own word that it expired is reported once, not acted on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from payhooks.events import Event, EventKind, Provider, Received
from payhooks.gateways import gateway
from payhooks.gateways._status import CredentialsRefused, StatusClient
from payhooks.intake import confirmations
from payhooks.intake.ingest import Applied, Outcome
from payhooks.plumbing.db import Connection, written_down
from payhooks.plumbing.errors import DatabaseAway, GatewayApiError
from payhooks.plumbing.logs import failure_logged
from payhooks.plumbing.retries import RATE_LIMIT_WAIT, Pausing, asked_wait
from payhooks.reconcile import checkouts
from payhooks.reconcile.checkouts import Due
from payhooks.reconcile.confirming import confirm
from payhooks.reconcile.parts import (
    Connect,
    Deliver,
    Followup,
    Tally,
    Unapplied,
    each,
    followed,
    reasons,
    unread,
)

log = logging.getLogger("payhooks.reconcile")

# A webhook for this payment, under any key but reconciliation's own: did one ever arrive?
_WEBHOOK_SEEN = """
SELECT 1 FROM processed_webhooks
WHERE provider = %s AND payment_id = %s AND event_id NOT LIKE 'reconcile:%%'
LIMIT 1
"""


class Notifier(Protocol):
    """Who hears of what a pass finds that a person must act on. Each is called inside a
    transaction (the delivery's, the totals'), so an alert written to a table is written once."""

    def missing_webhook(self, conn: Connection, event: Event) -> None:
        """A payment no webhook ever brought: a broken integration."""

    def credentials_refused(
        self, conn: Connection, provider: Provider, since: datetime, reason: str
    ) -> None:
        """The gateway refuses the API credentials (once per episode)."""


class Logged:
    """The notifier of a merchant's app: a warning in the log, read by whatever watches it
    (the health view and the metrics read the same facts from the tables)."""

    def missing_webhook(self, conn: Connection, event: Event) -> None:
        """Logs a payment reconciliation found that no webhook brought."""
        log.warning(
            "reconcile_payment_without_webhook",
            extra={"provider": event.provider.value, "payment_id": event.payment_id,
                   "event_id": event.event_id, "reference": event.merchant_ref},
        )  # fmt: skip

    def credentials_refused(
        self, conn: Connection, provider: Provider, since: datetime, reason: str
    ) -> None:
        """Logs a gateway refusing the API credentials, and what to check."""
        log.warning(
            "reconcile_credentials_refused",
            extra={"provider": provider.value, "error": reason, "since": since.isoformat(),
                   "check": credentials_of(provider)},
        )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """A pass's reach: checkouts older than ``after_s`` and younger than ``window_s``,
    at most ``limit`` of them."""

    after_s: int
    window_s: int
    limit: int = 100


class Reconciler:
    """Runs passes with the gateways it has clients for; the others are off."""

    def __init__(
        self,
        connect: Connect,
        clients: Mapping[Provider, StatusClient],
        options: Options,
        *,
        deliver: Deliver,
        notify: Notifier | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.connect = connect
        self.clients = dict(clients)
        self.options = options
        self.deliver = deliver
        self.notify: Notifier = notify or Logged()
        self.stop = stop

    def run(self, *, erring: bool = False) -> Tally:
        """One pass over what is due now, up to ``limit`` checkouts per gateway; returns what
        it did. A gateway whose turn fails for any reason leaves the others theirs. With
        ``erring`` (a door's one pass), the callbacks waiting to be asked again after an error
        are counted too (``Tally.erring``). Not the checkouts: a person cannot settle one (an
        order never created at the gateway fails until it leaves the window, a week), so a
        failing checkout fails the pass that asked, and ``reconcile_failing`` alerts."""
        tally = Tally()
        deadline = time.monotonic() + checkouts.PASS_BUDGET.total_seconds()
        asked: list[Provider] = []
        for provider in self.clients:
            if self.stop():
                break
            try:
                self._gateway(provider, self._claim(provider), tally, deadline)
                asked.append(provider)
            except DatabaseAway:
                raise  # the whole pass's, not this gateway's: said once, by the caller
            except Exception as exc:  # its checkouts' leases run out; a later pass asks again
                tally.broke(provider.value, _turn_failed(exc, provider))
        try:  # then the callbacks waiting for their gateway's word
            confirm(self.connect, self.clients, self.deliver, tally, stop=self.stop)
        except DatabaseAway:
            raise
        except Exception as exc:  # their leases run out; a later pass asks again
            tally.broke("confirmations", failure_logged(log, "confirm_pass_failed", exc, 200))
        for provider in asked:  # the totals count what both asked
            try:
                self._count(provider, tally)
            except DatabaseAway:
                raise
            except Exception as exc:
                tally.broke(provider.value, _turn_failed(exc, provider))
        if erring and self.clients:  # the callbacks, which a person can settle by hand
            with self.connect() as conn:
                tally.erring.update(confirmations.erring(conn, self.clients))
        return tally

    def confirm_due(self, *, erring: bool = False) -> Tally:
        """Only the callbacks waiting for their gateway's word (``payhooks.intake.confirmations``):
        cheap when none waits (one indexed read per gateway), so run every few seconds to have
        them take effect within seconds. With ``erring`` (a door's one pass, ``--once``), the
        callbacks waiting again after an error are counted too (``Tally.erring``)."""
        tally = confirm(self.connect, self.clients, self.deliver, Tally(), stop=self.stop)
        if erring and self.clients:
            with self.connect() as conn:
                tally.erring.update(confirmations.erring(conn, self.clients))
        return tally

    def _claim(self, provider: Provider) -> list[Due]:
        with self.connect() as conn:
            return checkouts.claim(
                conn,
                [provider],
                after_s=self.options.after_s,
                window_s=self.options.window_s,
                limit=self.options.limit,
            )

    def _gateway(self, provider: Provider, due: list[Due], tally: Tally, deadline: float) -> None:
        """Ask about each checkout in turn. A 429, refused credentials, or a few outages in a
        row (5xx, no answer, too slow, too large) pause the gateway: the rest wait what it
        asked for, or a minute; so do those the pass has no time left for. A refusal about one
        order backs off that checkout alone."""
        pausing = Pausing()
        paused: timedelta | None = None
        for index, item in enumerate(due):
            if paused is None and (self.stop() or time.monotonic() > deadline):
                paused = checkouts.FIRST_RETRY
            if paused is not None:
                self._defer(due[index:], paused, tally)
                break
            try:
                self._checkout(item, tally)
                pausing.after(None)
            except GatewayApiError as exc:
                self._failed(item, exc, tally)
                paused = pausing.after(exc)
                if paused is not None:
                    tally.paused.add(provider)
            except DatabaseAway:
                raise
            except Exception as exc:  # the database's: this checkout only
                self._unapplied(item, exc, tally)

    def _checkout(self, item: Due, tally: Tally) -> None:
        client = self.clients[item.provider]
        tally.examined[item.provider] += 1
        report = client.report(item.reference)  # GatewayApiError: handled by the caller
        tally.answered[item.provider] += 1
        tally.refused.pop(item.provider, None)
        failed = self._apply(item, report.received, tally)
        unreadable = unread(item.provider, report, tally, reference=item.reference)
        with self.connect() as conn:
            if report.expired and checkouts.mark_expired(conn, item):
                tally.expired[item.provider] += 1
                log.warning(
                    "reconcile_checkout_expired",
                    extra={"provider": item.provider.value, "reference": item.reference,
                           "order_reference": item.order_reference},
                )  # fmt: skip
            if failed or unreadable:  # asked again after its backoff, saying which and why
                checkouts.attempted(conn, item, error=reasons(failed, unreadable))
                return
            captured = any(r.event.kind is EventKind.PAYMENT_CAPTURED for r in report.received)
            wait = (checkouts.settled_backoff if captured else checkouts.backoff)(item.attempts)
            checkouts.attempted(conn, item, error=None, wait=wait)

    def _apply(self, item: Due, reported: tuple[Received, ...], tally: Tally) -> list[Unapplied]:
        """Each payment of the answer applied in a transaction of its own; one the handler
        or the database refuses is counted, logged and returned, and the others still applied."""
        alerted: list[str] = []
        receipts, failed = each(self.deliver, reported, _alert_unseen(alerted, self.notify))
        for receipt in receipts:
            tally.applied[item.provider] += receipt.outcome is Outcome.PROCESSED
            tally.ignored[item.provider] += receipt.outcome is Outcome.IGNORED
            log.info(
                f"reconcile_{receipt.outcome.value}",
                extra={"provider": item.provider.value, "event_id": receipt.event.event_id,
                       "reference": item.reference, "order_id": receipt.order_id},
            )  # fmt: skip
        tally.recovered[item.provider] += len(alerted)
        for unapplied in failed:
            tally.unapplied[item.provider] += 1
            log.error(
                "reconcile_apply_failed",
                extra={"provider": item.provider.value, "reference": item.reference,
                       "payment_id": unapplied.received.event.payment_id,
                       "error": unapplied.reason[:500]},
                exc_info=unapplied.error,
            )  # fmt: skip
        return failed

    def _failed(self, item: Due, exc: GatewayApiError, tally: Tally) -> timedelta:
        tally.api_errors[item.provider] += 1
        wait = checkouts.backoff(item.attempts)
        if isinstance(exc, CredentialsRefused):  # not this checkout's fault: asked again soon
            tally.refused[item.provider] = exc.reason
            wait = RATE_LIMIT_WAIT
        else:
            wait = max(wait, asked_wait(exc))
        self._attempted(item, exc.reason, wait)
        log.warning(
            "reconcile_api_error",
            extra={"provider": item.provider.value, "reference": item.reference,
                   "status": exc.status, "error": exc.reason},
        )  # fmt: skip
        return wait

    def _unapplied(self, item: Due, exc: Exception, tally: Tally) -> None:
        """The checkout's turn failed after the gateway answered (the database refused its
        bookkeeping): that checkout backs off and says why; the others go on."""
        tally.unapplied[item.provider] += 1
        reason = failure_logged(
            log, "reconcile_apply_failed", exc, 200,
            provider=item.provider.value, reference=item.reference,
        )  # fmt: skip
        self._attempted(item, reason, None)

    def _attempted(self, item: Due, error: str, wait: timedelta | None) -> None:
        """A failed turn written down, to be asked again after ``wait`` (else its backoff).
        The database refusing that write fails this checkout alone: logged, and its lease
        brings it back in ten minutes; the pass goes on to the next."""
        written_down(
            self.connect, lambda conn: checkouts.attempted(conn, item, error=error, wait=wait),
            log, "reconcile_attempt_unrecorded",
            provider=item.provider.value, reference=item.reference,
        )  # fmt: skip

    def _defer(self, rest: list[Due], wait: timedelta, tally: Tally) -> None:
        with self.connect() as conn:
            for item in rest:
                checkouts.release(conn, item, wait)
                tally.deferred[item.provider] += 1

    def _count(self, provider: Provider, tally: Tally) -> None:
        with self.connect() as conn:
            checkouts.count(
                conn,
                provider,
                examined=tally.examined[provider],
                recovered=tally.recovered[provider],
                api_errors=tally.api_errors[provider],
                expired=tally.expired[provider],
            )
            reason = tally.refused.get(provider)
            if reason is not None:
                since = checkouts.refused(conn, provider, reason)
                if since is not None:
                    self.notify.credentials_refused(conn, provider, since, reason)
            elif tally.answered[provider] and checkouts.accepted(conn, provider):
                log.info("reconcile_credentials_accepted", extra={"provider": provider.value})


def _turn_failed(exc: Exception, provider: Provider) -> str:
    """A gateway's whole turn failed on the database (its own bookkeeping refused): logged
    with the traceback, and why, for the pass's tally (the command exits 1)."""
    return failure_logged(log, "reconcile_gateway_failed", exc, 200, provider=provider.value)


def _alert_unseen(alerted: list[str], notify: Notifier) -> Followup:
    """After the handler, in the same transaction, the alert when no webhook for the payment
    was ever recorded. Checked after the payment's row is written: a webhook committing at the
    same moment holds that row, is waited for, and is then seen."""

    def alert(conn: Connection, event: Event, applied: Applied) -> None:
        if applied.outcome is Outcome.PROCESSED and event.kind.pays:
            seen = conn.execute(_WEBHOOK_SEEN, (event.provider.value, event.payment_id))
            if seen.fetchone() is None:
                notify.missing_webhook(conn, event)
                alerted.append(event.event_id)

    return alert


def credentials_of(provider: Provider) -> str:
    """The variables to check when ``provider`` refuses the API credentials."""
    return gateway(provider).status_api.credentials


__all__ = [
    "Connect",
    "Deliver",
    "Followup",
    "Logged",
    "Notifier",
    "Options",
    "Reconciler",
    "Tally",
    "credentials_of",
    "followed",
]

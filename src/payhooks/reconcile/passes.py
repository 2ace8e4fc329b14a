"""One reconciliation pass: ask each gateway about the checkouts whose webhook never came,
and take every payment it reports through the same claim, state machine and order path as a
webhook (docs/design.md, "Reconciliation").

Bounded and polite: each gateway is asked about at most ``limit`` checkouts a pass; a 429
stops asking that gateway for the rest of the pass (its checkouts wait the time it asked for),
and so do a few failures in a row; one gateway failing never stops the others. Whatever is not
finished is due again on a later pass. A checkout is never cancelled on silence: the gateway's
own word that it expired is reported once, not acted on.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import psycopg_pool

from payhooks.db import Connection
from payhooks.errors import GatewayApiError
from payhooks.events import Event, EventKind, Provider, Received
from payhooks.gateways import gateway
from payhooks.gateways._reports import KEY_PREFIX
from payhooks.ingest import Applied, Outcome, Receipt
from payhooks.service import database, outbox
from payhooks.service.reconcile import checkouts
from payhooks.service.reconcile.checkouts import Due
from payhooks.service.reconcile.clients import StatusClient
from payhooks.service.reconcile.errors import CredentialsRefused

log = logging.getLogger("payhooks.service.reconcile")

FAILURES_BEFORE_PAUSE = 3
RATE_LIMIT_WAIT = timedelta(minutes=1)
_MONEY = (EventKind.PAYMENT_AUTHORIZED, EventKind.PAYMENT_CAPTURED)

# A webhook for this payment, under any key but reconciliation's own: did one ever arrive?
_WEBHOOK_SEEN = """
SELECT 1 FROM processed_webhooks
WHERE provider = %s AND payment_id = %s AND event_id NOT LIKE 'reconcile:%%'
LIMIT 1
"""


Followup = Callable[[Connection, Event, Applied], None]
"""A step run after the state machine, in the delivery's transaction."""


class Deliver(Protocol):
    """How a reported payment is applied: ``payhooks.service.application.deliver``."""

    def __call__(self, conn: Connection, received: Received, *, then: Followup) -> Receipt: ...


@dataclass(slots=True)
class Tally:
    """What one pass did, per gateway."""

    examined: Counter[Provider] = field(default_factory=Counter)
    applied: Counter[Provider] = field(default_factory=Counter)
    recovered: Counter[Provider] = field(default_factory=Counter)
    api_errors: Counter[Provider] = field(default_factory=Counter)
    expired: Counter[Provider] = field(default_factory=Counter)
    deferred: Counter[Provider] = field(default_factory=Counter)
    answered: Counter[Provider] = field(default_factory=Counter)
    refused: dict[Provider, str] = field(default_factory=dict)
    """Gateways that refused the credentials this pass, with their words."""

    def summary(self) -> str:
        parts = [
            f"examined {sum(self.examined.values())} checkout(s)",
            f"applied {sum(self.applied.values())} payment event(s)",
            f"recovered {sum(self.recovered.values())} payment(s) no webhook brought",
            f"{sum(self.api_errors.values())} API error(s)",
            f"{sum(self.expired.values())} expired checkout(s) reported",
        ]
        if self.deferred:
            parts.append(f"{sum(self.deferred.values())} deferred to a later pass")
        if self.refused:
            parts.append(f"credentials refused by {', '.join(sorted(self.refused))}")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    after_s: int
    window_s: int
    limit: int = 100


class Reconciler:
    """Runs passes with the gateways it has clients for; the others are off."""

    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool,
        clients: Mapping[Provider, StatusClient],
        options: Options,
        *,
        deliver: Deliver,
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.pool = pool
        self.clients = dict(clients)
        self.options = options
        self.deliver = deliver
        self.stop = stop

    def run(self) -> Tally:
        """One pass over what is due now, up to ``limit`` checkouts per gateway; returns what
        it did. A gateway whose turn fails for any reason leaves the others theirs."""
        tally = Tally()
        deadline = time.monotonic() + checkouts.PASS_BUDGET.total_seconds()
        for provider in self.clients:
            try:
                self._gateway(provider, self._claim(provider), tally, deadline)
                self._count(provider, tally)
            except Exception:  # its checkouts' leases run out; a later pass asks again
                log.exception("reconcile_gateway_failed", extra={"provider": provider.value})
        return tally

    def _claim(self, provider: Provider) -> list[Due]:
        with database.connection(self.pool) as conn:
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
        outages = 0
        paused: timedelta | None = None
        for index, item in enumerate(due):
            if paused is None and (self.stop() or time.monotonic() > deadline):
                paused = checkouts.FIRST_RETRY
            if paused is not None:
                self._defer(due[index:], paused, tally)
                break
            try:
                self._checkout(item, tally)
                outages = 0
            except GatewayApiError as exc:
                self._failed(item, exc, tally)
                outages = outages + 1 if exc.outage else 0
                refused = isinstance(exc, CredentialsRefused)
                if exc.rate_limited or refused or outages >= FAILURES_BEFORE_PAUSE:
                    paused = _pause(exc)

    def _checkout(self, item: Due, tally: Tally) -> None:
        client = self.clients[item.provider]
        tally.examined[item.provider] += 1
        report = client.report(item.reference)  # GatewayApiError: handled by the caller
        tally.answered[item.provider] += 1
        tally.refused.pop(item.provider, None)
        for received in report.received:
            self._apply(item, received, tally)
        with database.connection(self.pool) as conn:
            if report.expired and checkouts.mark_expired(conn, item):
                tally.expired[item.provider] += 1
                log.warning(
                    "reconcile_checkout_expired",
                    extra={"provider": item.provider.value, "reference": item.reference,
                           "cart_id": item.cart_id},
                )  # fmt: skip
            captured = any(r.event.kind is EventKind.PAYMENT_CAPTURED for r in report.received)
            wait = (checkouts.settled_backoff if captured else checkouts.backoff)(item.attempts)
            checkouts.attempted(conn, item, error=None, wait=wait)

    def _apply(self, item: Due, received: Received, tally: Tally) -> None:
        event = received.event
        alerted: list[str] = []
        with database.connection(self.pool, event.event_id) as conn:
            receipt = self.deliver(conn, received, then=_alert_unseen(alerted))
        if receipt.outcome is Outcome.PROCESSED:
            tally.applied[item.provider] += 1
            tally.recovered[item.provider] += bool(alerted)
        log.info(
            f"reconcile_{receipt.outcome.value}",
            extra={"provider": event.provider.value, "event_id": event.event_id,
                   "reference": item.reference, "order_id": receipt.order_id},
        )  # fmt: skip

    def _failed(self, item: Due, exc: GatewayApiError, tally: Tally) -> timedelta:
        tally.api_errors[item.provider] += 1
        wait = checkouts.backoff(item.attempts)
        if isinstance(exc, CredentialsRefused):  # not this checkout's fault: asked again soon
            tally.refused[item.provider] = exc.reason
            wait = RATE_LIMIT_WAIT
        elif exc.retry_after_s is not None:
            wait = max(wait, timedelta(seconds=exc.retry_after_s))
        elif exc.rate_limited:
            wait = max(wait, RATE_LIMIT_WAIT)
        with database.connection(self.pool) as conn:
            checkouts.attempted(conn, item, error=exc.reason, wait=wait)
        log.warning(
            "reconcile_api_error",
            extra={"provider": item.provider.value, "reference": item.reference,
                   "status": exc.status, "error": exc.reason},
        )  # fmt: skip
        return wait

    def _defer(self, rest: list[Due], wait: timedelta, tally: Tally) -> None:
        with database.connection(self.pool) as conn:
            for item in rest:
                checkouts.release(conn, item, wait)
                tally.deferred[item.provider] += 1

    def _count(self, provider: Provider, tally: Tally) -> None:
        with database.connection(self.pool) as conn:
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
                    alert_credentials_refused(conn, provider, since, reason)
            elif tally.answered[provider] and checkouts.accepted(conn, provider):
                log.info("reconcile_credentials_accepted", extra={"provider": provider.value})


def _pause(exc: GatewayApiError) -> timedelta:
    """How long the rest of a paused gateway's checkouts wait: what the gateway asked for, else
    a minute; never one checkout's own (possibly hours-long) backoff."""
    if exc.retry_after_s is not None:
        return max(timedelta(seconds=exc.retry_after_s), checkouts.FIRST_RETRY)
    return RATE_LIMIT_WAIT


def _alert_unseen(alerted: list[str]) -> Followup:
    """After the state machine, in the same transaction, the alert when no webhook for the
    payment was ever recorded. Checked after the payment row is written: a webhook committing
    at the same moment holds that row, is waited for, and is then seen."""

    def alert(conn: Connection, event: Event, applied: Applied) -> None:
        if applied.outcome is Outcome.PROCESSED and event.kind in _MONEY:
            seen = conn.execute(_WEBHOOK_SEEN, (event.provider.value, event.payment_id))
            if seen.fetchone() is None:
                alert_missing_webhook(conn, event)
                alerted.append(event.event_id)

    return alert


def alert_credentials_refused(
    conn: Connection, provider: Provider, since: datetime, reason: str
) -> None:
    """Every call to this gateway fails until the API credentials are fixed, and every
    payment whose webhook is missed stays unrecovered meanwhile: one alert per episode
    (from the first refusal until a call succeeds again), however many passes see it."""
    outbox.enqueue(
        conn,
        outbox.alert(
            f"alert:reconcile_refused:{provider.value}:{since.isoformat()}",
            f"Reconciliation refused: {provider.value} does not accept the API credentials",
            f"{provider.value}'s status API refused payhooks' API credentials ({reason}). "
            "Reconciliation cannot recover payments whose webhook was missed until they are "
            f"fixed: check {_credentials(provider)}. /readyz lists the gateway under "
            "reconciliation_refused until a call succeeds again.",
            provider=provider.value,
            reason=reason,
        ),
    )
    log.warning(
        "reconcile_credentials_refused", extra={"provider": provider.value, "error": reason}
    )


def _credentials(provider: Provider) -> str:
    api = gateway(provider).status_api
    return f"{api.id_variable} and {api.secret_variable}"


def alert_missing_webhook(conn: Connection, event: Event) -> None:
    """A payment no webhook ever brought is a broken integration an operator must hear
    about: one alert per payment, however many passes or statuses report it."""
    provider, payment_id = event.provider.value, event.payment_id
    outbox.enqueue(
        conn,
        outbox.alert(
            f"alert:reconciled:{provider}:{payment_id}",
            f"Webhook missing: {provider} payment {payment_id} found by reconciliation",
            f"{provider} reported payment {payment_id} ({event.event_type}) for checkout "
            f"{event.merchant_ref}, and no webhook for it ever arrived. It was applied "
            "(order, stock, email as usual); check the webhook endpoint, its secret and "
            "the gateway's delivery log.",
            provider=provider,
            payment_id=payment_id,
            event_id=event.event_id,
            reference=event.merchant_ref,
        ),
    )
    log.warning(
        "reconcile_payment_without_webhook",
        extra={"provider": provider, "payment_id": payment_id, "event_id": event.event_id},
    )


__all__ = [
    "KEY_PREFIX",
    "Options",
    "Reconciler",
    "Tally",
    "alert_credentials_refused",
    "alert_missing_webhook",
]

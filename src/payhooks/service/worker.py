"""The worker process: sends the outbox (``sender``) and keeps the records (``maintenance``),
in one loop that waits out whatever fails and never exits on one bad row."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import psycopg_pool

from payhooks.plumbing.errors import DatabaseAway, DatabaseUnavailable
from payhooks.reconcile import settling
from payhooks.service import alerting, application, database, outbox, reconcile
from payhooks.service.config import Settings
from payhooks.service.maintenance import Cadence, Maintenance
from payhooks.service.sender import Sender

log = logging.getLogger("payhooks.service.worker")

DAY_SECONDS = 24 * 3600.0
RECONCILE_TICK_SECONDS = 1.0  # how often the reconciling thread looks whether a pass is due
ALERTS_TICK_SECONDS = 1.0  # how often the alerting thread sends the notices due


@dataclass(slots=True, kw_only=True)
class WorkerOptions:
    batch: int = 100
    poll_seconds: float = 1.0
    policy: outbox.RetryPolicy = field(default_factory=outbox.RetryPolicy)
    purge_every_seconds: float | None = DAY_SECONDS
    parked_every_seconds: float | None = 60.0
    reconcile_every_seconds: float | None = 60.0
    smtp_backoff_cap_seconds: float = 30.0
    alerts_every_seconds: float | None = 60.0
    """How often what is wrong is looked at again (docs/operations.md, "Alerts")."""
    settlements_every_seconds: float | None = 6 * 3600.0
    """How often the gateways' settlement reports are fetched, from the day after the last one
    read whole and at least the last ``SETTLEMENT_DAYS`` (docs/operations.md, "Settlements"):
    a day fetched again records nothing twice."""
    settlements_retry_seconds: float = 900.0
    """After a fetch that failed (it raised, or a gateway's report failed in whole or in part),
    how long until the next: doubling with each failure in a row, up to
    ``settlements_every_seconds``."""


SETTLEMENT_DAYS = settling.SETTLEMENT_DAYS
"""The days (India's, today included) each fetch of the settlement reports covers at least
(``payhooks.reconcile.settling.SETTLEMENT_DAYS``, the catch-up every door shares)."""


class Worker:
    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool,
        settings: Settings,
        options: WorkerOptions | None = None,
        *,
        jitter: Callable[[], float] = random.random,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """``clock``: the time the settlement fetches read their days by (tests set it)."""
        self.options = options or WorkerOptions()
        self.jitter = jitter
        self.clock = clock
        self.stopping = threading.Event()
        self.sender = (
            Sender(
                pool,
                settings,
                batch=self.options.batch,
                policy=self.options.policy,
                jitter=jitter,
                stopping=self.stopping,
            )
            if settings.smtp_url
            else None  # no server to send to: the emails wait, queued (``worker_warnings``)
        )
        cadence = Cadence(
            batch=self.options.batch,
            purge_every_seconds=self.options.purge_every_seconds,
            parked_every_seconds=self.options.parked_every_seconds,
        )
        self.maintenance = Maintenance(pool, settings, cadence, self.stopping)
        self._http = reconcile.http_client(settings.reconcile_timeout_ms / 1000)
        self.reconciler = application.reconciler(
            pool, settings, self._http, limit=self.options.batch, stop=self.stopping.is_set
        )
        self.refund_double_payments = settings.refund_double_payments
        self.captures = settings.capture_authorized
        self.notifier = alerting.notifier(settings, shop=True, stop=self.stopping.is_set)
        self._pool = pool
        self._last_reconcile: float | None = None
        self._last_alerts: float | None = None
        self._settlements_due: float | None = None
        self._settlements_failed = 0
        self._settings = settings
        self._failures = 0
        self._once = False
        """In ``once``: the duties count what waits again after an error, not only what this
        pass met (a cron landing inside a backoff must not see success)."""
        self._callbacks_said = False
        """In ``once``: reconciliation's pass, which confirms the callbacks due too, said the
        ones waiting; the confirm duty after it does not say them again."""
        self.troubles: dict[str, str] = {}
        """What each duty's last pass left undone, by duty (the gateways' API failing, notices
        not sent): ``once`` says them, as each duty's own command does with exit 1."""

    def run(self) -> None:
        """Until ``stop()``: drain what is due, retry parked deliveries every minute, purge
        once a day, sleep when idle. The database or SMTP being away, or any step failing,
        is waited out with backoff, never a reason to exit."""
        companions = [
            threading.Thread(target=self._reconciling, name="payhooks-reconcile", daemon=True),
            threading.Thread(target=self._alerting, name="payhooks-alerts", daemon=True),
        ]
        for companion in companions:
            companion.start()
        try:
            while not self.stopping.is_set():
                handled = self._guarded(self.drain)
                self._guarded(self.maybe_retry_parked)
                self._guarded(self.maybe_purge)
                if handled == 0:
                    self.stopping.wait(self._idle_seconds())
        finally:
            self.stopping.set()
            for companion in companions:
                companion.join(timeout=30)

    def _alerting(self) -> None:
        """Alerts on a thread of their own: a chat endpoint or SMTP server slow to answer
        holds back neither the outbox nor reconciliation."""
        while not self.stopping.is_set():
            self._each(self.alert)  # a failure logged; tried again next tick
            self.stopping.wait(ALERTS_TICK_SECONDS)

    def _reconciling(self) -> None:
        """Reconciliation on a thread of its own: a gateway slow to answer never holds back
        the emails and alerts."""
        while not self.stopping.is_set():
            self._each(*self._at_the_gateways(), self.maybe_fetch_settlements)
            self.stopping.wait(RECONCILE_TICK_SECONDS)

    def _at_the_gateways(self) -> tuple[Callable[[], int], ...]:
        """What is asked of the gateways' APIs every tick."""
        return (self.maybe_reconcile, self.confirm_callbacks, self.send_refunds,
                self.capture_authorized)  # fmt: skip

    def _each(self, *steps: Callable[[], int]) -> list[str]:
        """Each step in turn until the worker is told to stop, one failing logged
        (``worker_step_failed``, or ``worker_database_unavailable``) and the others run all
        the same; the names of those that failed. Run once (``once``), no connection to be
        had ends the pass: every step after would wait out the pool on the same outage, and
        the caller says it once."""
        failed: list[str] = []
        for step in steps:
            if self.stopping.is_set():
                break
            try:
                step()
            except DatabaseUnavailable as exc:
                if self._once and isinstance(exc, DatabaseAway):
                    raise
                log.warning("worker_database_unavailable", extra={"error": str(exc)})
                failed.append(step.__name__)
            except Exception:  # logged; the sender's backoff is its own business
                log.exception("worker_step_failed", extra={"step": step.__name__})
                failed.append(step.__name__)
        return failed

    def _guarded(self, step: Callable[[], int]) -> int:
        """``step()``, or 0 when it failed: logged, counted toward the backoff, never raised."""
        try:
            return step()
        except DatabaseUnavailable as exc:
            self._failures += 1
            log.warning("worker_database_unavailable", extra={"error": str(exc)})
        except Exception:
            self._failures += 1
            log.exception("worker_step_failed", extra={"step": step.__name__})
        return 0

    def once(self) -> tuple[int, list[str]]:
        """Every duty once, as a cron job runs the worker (``payhooks worker --once``): the
        parked deliveries, reconciliation, the callbacks to confirm, the refunds due, the
        captures, the alerts, then the outbox until nothing is due; neither the purge nor the
        settlement reports (each a day's or hours' work: `payhooks purge`, `payhooks
        settlements --catch-up` from cron). Returns the messages handled and what failed (each
        step logged; the others go on): a step that raised, the SMTP server unavailable with
        messages due, an alert notice not sent."""
        handled = 0

        def outbox() -> int:
            nonlocal handled
            while (done := self.drain()) > 0:
                handled += done
            return handled

        self.troubles.clear()
        self._once, self._callbacks_said = True, False
        try:
            failed = self._each(
                self.maybe_retry_parked, *self._at_the_gateways(), self.alert, outbox
            )
        finally:
            self._once = False
        if self.sender is not None and self.sender.unavailable:
            failed.append("the SMTP server is unavailable: the emails wait, queued")
        failed.extend(f"{duty}: {said}" for duty, said in self.troubles.items())
        return handled, failed

    def _left(self, duty: str, said: str | None) -> None:
        """What ``duty``'s pass left undone, or that it left nothing."""
        if said:
            self.troubles[duty] = said
        else:
            self.troubles.pop(duty, None)

    def stop(self) -> None:
        self.stopping.set()

    def close(self) -> None:
        self._http.close()

    def drain(self) -> int:
        """Up to one batch of due messages over one SMTP session; returns how many (none
        without ``PAYHOOKS_SMTP_URL``: each waits, queued, never dead-lettered)."""
        if self.sender is None:
            return 0
        handled = self.sender.drain()
        if self.sender.unavailable:
            self._failures += 1
        elif handled:
            self._failures = 0
        return handled

    def maybe_retry_parked(self) -> int:
        return self.maintenance.maybe_retry_parked()

    def maybe_purge(self) -> int:
        return self.maintenance.maybe_purge()

    def maybe_reconcile(self) -> int:
        """Ask the gateways about checkouts whose webhook never came, once a minute; returns
        how many payment events were applied. Off for gateways without API credentials."""
        every = self.options.reconcile_every_seconds
        now = time.monotonic()
        if not self.reconciler.clients or every is None:
            return 0
        if self._last_reconcile is not None and now - self._last_reconcile < every:
            return 0
        self._last_reconcile = now
        tally = self.reconciler.run(erring=self._once)
        self._callbacks_said = self._once  # its pass confirmed the callbacks due, and said them
        if sum(tally.examined.values()):
            log.info("reconcile_pass", extra={"summary": tally.summary()})
        self._left("reconcile", tally.trouble() if tally.failures else None)
        return sum(tally.applied.values())

    def maybe_fetch_settlements(self) -> int:
        """The gateways' settlement reports, every ``settlements_every_seconds``, recorded and
        reviewed (``payhooks.reconcile.settling.catching_up``, as ``payhooks settlements
        --catch-up`` runs it): each gateway's from the day after the last one read whole, and
        at least the last ``SETTLEMENT_DAYS`` (never read whole yet: from as far back as the
        review looks), up to today, in ranges of at most ``MAX_RANGE_DAYS``; returns how many
        lines were new. One that failed is tried again sooner (``settlements_retry_seconds``),
        from the same day. Off for gateways without API credentials."""
        every = self.options.settlements_every_seconds
        if not self.reconciler.clients or every is None:
            return 0
        if self._settlements_due is not None and time.monotonic() < self._settlements_due:
            return 0
        self._settlements_failed += 1  # until this fetch is seen through: one that raises
        self._settlements_due = time.monotonic() + self._settlements_wait(every)
        failed, lines = False, 0
        for tally in settling.catching_up(
            self.reconciler.connect,
            self.reconciler.clients,
            margin=timedelta(hours=self._settings.settlement_margin_hours),
            now=self.clock,
            stop=self.stopping.is_set,
        ):
            log.info("settlements_fetched", extra={"summary": tally.summary()})
            if tally.failures:
                failed = True
                log.warning("settlements_fetch_failed", extra={"failures": tally.trouble()})
            lines += sum(done.lines for done in tally.recorded.values())
        if self.stopping.is_set():
            failed = True  # the rest is fetched at the next turn, from where this stopped
        if not failed:
            self._settlements_failed = 0
        self._settlements_due = time.monotonic() + self._settlements_wait(every)
        return lines

    def _settlements_wait(self, every: float) -> float:
        """``every`` after a fetch that read every report whole; after failures in a row, the
        retry doubling from ``settlements_retry_seconds``, never longer than ``every``."""
        if self._settlements_failed == 0:
            return every
        retry = self.options.settlements_retry_seconds * 2 ** min(self._settlements_failed - 1, 16)
        return float(min(every, retry))

    def confirm_callbacks(self) -> int:
        """Every tick: the callbacks PhonePe and Juspay sent (only their credential proves
        them) asked about at their status API, and what it reports applied, so they take
        effect within a second or two; returns how many payment events were applied."""
        if not self.reconciler.clients:
            return 0
        tally = self.reconciler.confirm_due(erring=self._once and not self._callbacks_said)
        if sum(tally.confirmed.values()) or sum(tally.refuted.values()):
            log.info("confirm_pass", extra={"summary": tally.summary()})
        self._left("confirm", tally.trouble() if tally.failures else None)
        return sum(tally.applied.values())

    def send_refunds(self) -> int:
        """Every tick: the refund intents due sent to their gateway, each under its
        idempotency key (``payhooks.refunding.sending``), the double-payment policy's first when it
        is on; returns how many the gateways accepted."""
        tally = application.send_refunds(
            self.reconciler,
            double_payments=self.refund_double_payments,
            limit=self.options.batch,
            stop=self.stopping.is_set,
            erring=self._once,
        )
        if any(sum(getattr(tally, n).values()) for n in ("sent", "refused", "incomplete", "spent")):
            log.info("refunds_pass", extra={"summary": tally.summary()})
        self._left("refunds", tally.trouble())
        return sum(tally.sent.values())

    def capture_authorized(self) -> int:
        """Every tick, when ``PAYHOOKS_CAPTURE_AUTHORIZED`` is on: Razorpay payments
        authorised and not captured, their cart open, captured once (``shop.authorised``)."""
        if not self.captures:
            return 0
        captured = application.capture_authorized(self.reconciler, limit=self.options.batch)
        if captured:
            log.info("captures_pass", extra={"captured": captured})
        return captured

    def alert(self, now: datetime | None = None) -> int:
        """What is wrong looked at once a minute (raised, repeated, resolved), the notices
        due sent every tick; returns how many were sent. Nothing when no channel is set."""
        if not self.notifier.channels:
            return 0
        now = now or datetime.now(UTC)
        every = self.options.alerts_every_seconds
        tick = time.monotonic()
        with database.connection(self._pool) as conn:
            due = every is not None and (
                self._last_alerts is None or tick - self._last_alerts >= every
            )
            if due:
                self._last_alerts = tick
                tally = self.notifier.tick(conn, now)
            else:
                tally = self.notifier.send_due(conn, now)
        if tally.raised or tally.resolved or tally.retried or tally.failed:
            log.info("alerts_pass", extra={"summary": tally.summary()})
        self._left("alerts", tally.trouble())
        return tally.sent

    def _idle_seconds(self) -> float:
        if self._failures == 0:
            return self.options.poll_seconds
        step = min(self.options.smtp_backoff_cap_seconds, 2.0 ** min(self._failures, 10))
        return step * (0.5 + self.jitter() / 2)

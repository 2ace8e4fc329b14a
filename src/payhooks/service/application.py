"""The service's use cases, wired once: a delivery applied through the shop's state machine
(``payments.apply_event``), a stored delivery read again and replayed, a reconciliation pass,
a purge. The HTTP app, the console, the worker and the CLI call these; none of them names
``apply_event`` or the stored-delivery reader itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Any

import httpx
import psycopg_pool

from payhooks.events import Event, Provider, Received
from payhooks.gateways import GATEWAYS, Adapter
from payhooks.intake.ingest import Applied, Outcome, Receipt, ingest_received
from payhooks.intake.stored import read_stored, received_stored
from payhooks.operations import replays
from payhooks.operations import retention as policy
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import GatewayApiError
from payhooks.reconcile import settling
from payhooks.reconcile.passes import Followup, Options, Reconciler, followed
from payhooks.refunding import sending
from payhooks.refunding.refunds import Refund
from payhooks.service import database, retention
from payhooks.service.config import Settings
from payhooks.service.errors import NothingCaptured
from payhooks.service.reconcile.alerts import ALERTS
from payhooks.service.reconcile.clients import StatusClient, clients
from payhooks.service.shop import authorised, double_refunds
from payhooks.service.shop.payments import apply_event

log = logging.getLogger("payhooks.worker")

__all__ = [
    "capture_authorized",
    "deliver",
    "deliver_pooled",
    "fetching_settlements",
    "purge",
    "read_stored",
    "received_stored",
    "reconciler",
    "replay",
    "send_refunds",
    "shop_reconciler",
]


def deliver(
    conn: Connection, received: Received, *, pipeline: bool = False, then: Followup | None = None
) -> Receipt:
    """A received delivery (live, replayed or reconciled) claimed and applied in one
    transaction; ``then`` runs in that transaction after the state machine."""
    handler = apply_event if then is None else followed(apply_event, then)
    return ingest_received(conn, received, handler, pipeline=pipeline)


def deliver_pooled(
    pool: psycopg_pool.ConnectionPool,
    received: Received,
    *,
    pipeline: bool = False,
    deadline_s: float | None = None,
) -> Receipt:
    """``deliver`` on a connection of ``pool``, named for the delivery in the pool's logs;
    with ``deadline_s``, cancelled past it (``database.bounded``)."""
    with database.connection(pool, received.event.event_id, deadline_s=deadline_s) as conn:
        return deliver(conn, received, pipeline=pipeline)


def replay(
    conn: Connection,
    adapters: Mapping[Provider, Adapter],
    *,
    event_id: str,
    provider: str | None = None,
) -> Receipt:
    """A stored delivery through the same claim and path as the gateway's own retry. Raises
    ``NotFound`` when no delivery has the key, or several do and no gateway is named."""
    return replays.replay(conn, adapters, deliver, event_id=event_id, provider=provider)


def reconciler(
    pool: psycopg_pool.ConnectionPool,
    settings: Settings,
    http: httpx.Client,
    *,
    limit: int = 100,
    after_s: int | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> Reconciler:
    """A reconciler for every gateway with API credentials in ``settings``, applying what the
    gateways report through ``deliver``."""
    options = Options(
        after_s=settings.reconcile_after_s if after_s is None else after_s,
        window_s=settings.reconcile_window_s,
        limit=limit,
    )
    return shop_reconciler(pool, clients(settings.reconciled(), http), options, stop=stop)


def shop_reconciler(
    pool: psycopg_pool.ConnectionPool,
    found: Mapping[Provider, StatusClient],
    options: Options,
    *,
    stop: Callable[[], bool] = lambda: False,
) -> Reconciler:
    """The core's reconciler asking ``found``, applying what they report through ``deliver``
    on connections of ``pool``, its alerts sent as emails."""

    def deliver_found(received: Received, *, then: Followup) -> Receipt:
        with database.connection(pool, received.event.event_id) as conn:
            return deliver(conn, received, then=then)

    return Reconciler(
        lambda: database.connection(pool),
        found,
        options,
        deliver=deliver_found,
        notify=ALERTS,
        stop=stop,
    )


def fetching_settlements(
    pool: psycopg_pool.ConnectionPool, settings: Settings
) -> Callable[[date, date], settling.Tally] | None:
    """The console's Fetch button: a fetch on connections of ``pool`` over a short HTTP client
    of its own; None when no gateway has API credentials (nothing to ask)."""
    if not settings.reconciled():
        return None

    def fetch(start: date, end: date) -> settling.Tally:
        return settling.fetch_once(
            lambda: database.connection(pool), settings.reconciled(), start, end,
            timeout_s=settings.reconcile_timeout_ms / 1000,
            margin=timedelta(hours=settings.settlement_margin_hours),
        )  # fmt: skip

    return fetch


def purge(
    conn: Connection, days: int, *, holder: Connection, force: bool = False, **options: Any
) -> retention.PurgeResult | None:
    """Delivery records older than ``days`` deleted, unless another purge is running (None
    then). Raises ``RetentionTooShort`` for a window shorter than the gateways' replays,
    unless ``force``."""
    policy.check_window(days, force=force)
    return retention.purge_exclusively(conn, days, holder=holder, **options)


def send_refunds(
    reconciler: Reconciler,
    *,
    double_payments: bool,
    limit: int = 50,
    stop: Callable[[], bool] = lambda: False,
    erring: bool = False,
) -> sending.Tally:
    """One pass of the refund sender over the gateways payhooks refunds, with the
    double-payment policy first when it is on (``PAYHOOKS_REFUND_DOUBLE_PAYMENTS``): what the
    worker runs on every tick, and the demo on demand. The policy failing holds back no
    refund: the sender runs all the same (``_request_double_refunds``). ``erring``: see
    ``sending.send_due``."""
    found = {p: c for p, c in reconciler.clients.items() if GATEWAYS[p].sends_refunds}
    if not found:
        return sending.Tally()
    if double_payments:
        _request_double_refunds(reconciler, limit)
    return sending.send_due(
        reconciler.connect, found, limit=limit, stop=stop,  # type: ignore[arg-type]
        settle=lambda refund: _refunded(reconciler, refund), erring=erring,
    )  # fmt: skip


def _request_double_refunds(reconciler: Reconciler, limit: int) -> None:
    """The double-payment policy's intents written, before the sender runs. One payment it
    cannot ask for is logged and skipped inside ``request_due``; the policy failing whole (its
    reads meeting the session's ``lock_timeout`` or ``statement_timeout``, the connection
    lost) is logged here and asked again next tick: the intents already due, merchants' own
    among them, are sent all the same."""
    try:
        with reconciler.connect() as conn:
            double_refunds.request_due(conn, limit=limit)
    except Exception as exc:  # the policy's pass only: never the sender's
        log.exception("double_payment_policy_failed", extra={"error": _described(exc)})


def _refunded(reconciler: Reconciler, refund: Refund) -> None:
    """A refund the sender made, processed: delivered to the shop through the exactly-once
    path, as its refund webhook would be, so the payment reads refunded even if that webhook
    never comes (``sending.processed_delivery``)."""
    reconciler.deliver(sending.processed_delivery(refund), then=lambda *_: None)


def capture_authorized(reconciler: Reconciler, *, limit: int = 50) -> int:
    """Payments authorised and not captured at each gateway payhooks captures for
    (``Gateway.captures_authorized``: Razorpay), captured once each (``shop.authorised``);
    what the capture answers is applied as reconciliation applies a payment. Returns how
    many were captured and applied now."""
    capturing = [p for p, found in GATEWAYS.items() if found.captures_authorized]
    return sum(_capture_due(reconciler, provider, limit) for provider in capturing)


def _capture_due(reconciler: Reconciler, provider: Provider, limit: int) -> int:
    client = reconciler.clients.get(provider)
    if client is None:
        return 0
    with reconciler.connect() as conn:
        waiting = authorised.due(conn, provider, limit)
    applied = 0
    for payment in waiting:
        try:
            applied += _capture(reconciler, client, provider, payment)
        except Exception as exc:  # the handler's, the database's: this payment only
            explained = (GatewayApiError, NothingCaptured)
            detail = exc.reason if isinstance(exc, explained) else _described(exc)
            log.warning("capture_failed", extra={"payment_id": payment.payment_id,
                                                 "detail": detail}, exc_info=True)  # fmt: skip
            _capture_failed(reconciler, provider, payment, detail)
    return applied


def _described(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _capture_failed(
    reconciler: Reconciler, provider: Provider, payment: authorised.Authorised, error: str
) -> None:
    try:
        with reconciler.connect() as conn:
            authorised.failed(conn, provider, payment.payment_id, error)
    except Exception:  # the database away: asked again next tick
        log.exception("capture_attempt_unrecorded", extra={"payment_id": payment.payment_id})


def _capture(
    reconciler: Reconciler, client: object, provider: Provider, payment: authorised.Authorised
) -> int:
    """One payment claimed, captured and applied; how many payment events took effect. One
    that fails, or whose answer holds no captured payment (``NothingCaptured``), is kept with
    its error and asked again after its backoff (Razorpay answers a second capture "already
    captured"); reconciliation's pass applies it too."""
    with reconciler.connect() as conn:
        if not authorised.claim(conn, provider, payment.payment_id):
            return 0
    report = client.capture(  # type: ignore[attr-defined]
        payment.payment_id, payment.amount_paise, payment.currency
    )
    if not report.received:
        raise NothingCaptured(payment.payment_id, report.skipped)
    applied = 0
    for received in report.received:
        receipt = reconciler.deliver(received, then=_nothing_more)
        applied += receipt.outcome is Outcome.PROCESSED
    return applied


def _nothing_more(conn: Connection, event: Event, applied: Applied) -> None:
    """A payment payhooks captured is no "missing webhook": no alert."""

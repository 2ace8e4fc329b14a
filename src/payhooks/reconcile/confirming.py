"""The confirmation pass: each callback waiting for its gateway's word
(``payhooks.intake.confirmations``) asked about through the status API, what the API reports applied
exactly as reconciliation applies it, and the callback confirmed or refuted.

Run by every reconciliation pass after its checkouts (``Reconciler.run``: the CLI, the
functions for a merchant's scheduler, the reference service's worker). A gateway whose
callbacks need confirmation needs its API credentials, and a pass every few seconds to answer
"within seconds" (``payhooks reconcile`` from a timer, or ``run`` in a loop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial

from payhooks.events import Event, Provider, kind_words
from payhooks.gateways._reports import Report
from payhooks.gateways._status import CredentialsRefused, StatusClient
from payhooks.intake import confirmations
from payhooks.intake.confirmations import Pending, Unreadable, Verdict
from payhooks.intake.ingest import Applied, Outcome
from payhooks.plumbing.db import Connection, written_down
from payhooks.plumbing.errors import DatabaseAway, GatewayApiError
from payhooks.plumbing.logs import failure_logged
from payhooks.plumbing.retries import Pausing, asked_wait
from payhooks.reconcile.parts import Connect, Deliver, Tally, Unapplied, each, reasons, unread
from payhooks.refunding import refunds

log = logging.getLogger("payhooks.reconcile")


@dataclass(frozen=True, slots=True)
class _Asking:
    """What one callback's turn is asked with: the connection, its gateway's client, the
    path a reported payment is applied through, the pass's tally, and the time it is asked."""

    connect: Connect
    client: StatusClient
    deliver: Deliver
    tally: Tally
    at: datetime


def _nothing_more(conn: object, event: Event, applied: Applied) -> None:
    """A confirmed payment is no "missing webhook": its callback came."""


def confirm(
    connect: Connect,
    clients: Mapping[Provider, StatusClient],
    deliver: Deliver,
    tally: Tally,
    *,
    limit: int = 100,
    stop: Callable[[], bool] = lambda: False,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Tally:
    """Every due confirmation of each gateway in ``clients``, at most ``limit`` each; none of
    a gateway paused already this pass (``Tally.paused``: its checkouts' turn met a 429)."""
    for provider, client in clients.items():
        if stop():
            return tally
        if provider in tally.paused:
            continue
        try:
            with connect() as conn:
                taken = confirmations.leased(conn, provider.value, limit)
        except DatabaseAway:
            raise  # the whole pass's: said once, by the caller
        except Exception as exc:  # the database's: the next gateway's turn may still be had
            reason = failure_logged(
                log, "confirm_gateway_failed", exc, 200, provider=provider.value
            )
            tally.broke(provider.value, reason)
            continue
        for unreadable in taken.unreadable:
            _set_aside(connect, unreadable, tally)
        pausing = Pausing()
        for index, pending in enumerate(taken.due):
            if stop():
                return tally
            try:
                paused = pausing.after(
                    _one(_Asking(connect, client, deliver, tally, now()), pending)
                )
            except DatabaseAway:
                raise
            except Exception as exc:  # the database's: this callback only
                _broke(connect, pending, tally, exc)
                continue
            if paused is not None:
                tally.paused.add(provider)
                _defer(connect, taken.due[index + 1 :], paused, tally)
                break
    return tally


def _defer(connect: Connect, rest: list[Pending], wait: timedelta, tally: Tally) -> None:
    """The rest of a paused gateway's callbacks, not asked this pass: due again after ``wait``,
    their lease's attempt given back."""
    if not rest:
        return
    released = 0

    def release(conn: Connection) -> None:
        nonlocal released
        released = confirmations.release(conn, rest, wait)

    # Refused by the database (a row locked, a timeout): their leases bring them back.
    written_down(connect, release, log, "confirm_release_unrecorded", provider=rest[0].provider)
    if released:
        tally.callbacks_deferred[Provider(rest[0].provider)] += released


def _set_aside(connect: Connect, unreadable: Unreadable, tally: Tally) -> None:
    """A callback this release cannot read: never asked about by it, and never refuted for
    it (a release that reads it may come back). It keeps why as its error and waits out its
    backoff, so past ``payhooks.operations.alarms.UNCONFIRMED_WAIT`` a person is told, and
    the rest of the pass goes on."""
    tally.unreadable[Provider(unreadable.provider)] += 1
    log.error(
        "confirm_unreadable",
        extra={"provider": unreadable.provider, "event_id": unreadable.event_id,
               "error": unreadable.reason},
    )  # fmt: skip
    wait = confirmations.wait_after(unreadable.attempts)
    written_down(
        connect, lambda conn: confirmations.again(conn, unreadable, wait, unreadable.reason),
        log, "confirm_attempt_unrecorded", event_id=unreadable.event_id,
    )  # fmt: skip


def _broke(connect: Connect, pending: Pending, tally: Tally, exc: Exception) -> None:
    """The callback's turn failed after the API answered (the database refused its
    bookkeeping): this callback alone is asked about again after its backoff, saying why; past
    ``payhooks.operations.alarms.UNCONFIRMED_WAIT`` it is an alert. Never refuted for it: the fault
    is not the callback's."""
    provider = Provider(pending.provider)
    tally.unapplied[provider] += 1
    reason = failure_logged(
        log, "confirm_apply_failed", exc, provider=pending.provider,
        event_id=pending.event_id, order=pending.gateway_order_id,
    )  # fmt: skip
    wait = confirmations.wait_after(pending.attempts)
    written_down(
        connect, lambda conn: confirmations.again(conn, pending, wait, reason),
        log, "confirm_attempt_unrecorded", event_id=pending.event_id,
    )  # fmt: skip


def _one(asking: _Asking, pending: Pending) -> GatewayApiError | None:
    """One callback's turn; the API's error, when it gave no usable answer."""
    connect, client, tally, at = asking.connect, asking.client, asking.tally, asking.at
    if pending.first_event_id is not None:
        return _attempt(asking, pending)
    try:
        report = client.report(pending.gateway_order_id)
        refund = getattr(client, "refund", None)  # a gateway whose order status lists no refunds
        if pending.kind.is_refund and pending.refund_id and refund:
            extra = refund(
                pending.refund_id, pending.gateway_order_id, claimed_paise=pending.amount_paise,
                asked=partial(_asked, connect, pending.provider),
            )  # fmt: skip
            report = replace(
                report,
                received=(*report.received, *extra.received),
                skipped=(*report.skipped, *extra.skipped),
                unknown=extra.unknown,
                contradicted=extra.contradicted,
                underway=extra.underway,
                unreadable=(*report.unreadable, *extra.unreadable),
            )
    except GatewayApiError as exc:
        _failed(connect, pending, tally, exc, at)
        return exc
    events = _applied(asking, pending, report)  # what the API says wins
    if events is None:
        return None
    found = confirmations.verdict(
        pending, events, at, contradicted=report.contradicted, underway=report.underway
    )
    if found is Verdict.REFUTED and report.contradicted:
        detail = (
            f"the callback claimed the {kind_words(pending.kind)} of "
            f"{pending.payment_id or 'the order'}; the status API reports it in a final state "
            f"of its own: {', '.join(_said_of(report, pending.refund_id)) or 'not made'}"
        )[:500]
    elif found is Verdict.REFUTED and report.unknown:
        detail = (
            f"the status API knows no such {pending.kind.value.split('_')[0]}, "
            f"{confirmations.PATIENCE.total_seconds() / 60:.0f} minutes after the callback"
        )
    else:
        detail = _detail(pending, found, events)
    _conclude(connect, pending, found, detail, tally)
    return None


def _said_of(report: Report, refund_id: str | None) -> list[str]:
    """What the API's answer left aside about the refund ``refund_id`` (``rf_1:FAILED``)."""
    return [said for said in report.skipped if refund_id and said.startswith(f"{refund_id}:")]


def _asked(connect: Connect, provider: str, key: str) -> int | None:
    """What payhooks' refund intent under ``key`` asked (``refunds.asked_paise``)."""
    with connect() as conn:
        return refunds.asked_paise(conn, provider, key)


def _applied(asking: _Asking, pending: Pending, report: Report) -> list[Event] | None:
    """What the API reported, applied whatever the callback claimed, each payment in a
    transaction of its own; its events. None when one of them could not be applied: the
    others are, and the callback is asked about again after its backoff, saying which failed
    (never settled while a payment of its order waits to be applied)."""
    provider = Provider(pending.provider)
    asking.tally.answered[provider] += 1
    receipts, failed = each(asking.deliver, report.received, _nothing_more)
    for receipt in receipts:
        asking.tally.applied[provider] += receipt.outcome is Outcome.PROCESSED
        asking.tally.ignored[provider] += receipt.outcome is Outcome.IGNORED
    unreadable = unread(provider, report, asking.tally, event_id=pending.event_id)
    if failed or unreadable:
        _unapplied(asking, pending, failed, unreadable)
        return None
    return [r.event for r in report.received]


def _unapplied(
    asking: _Asking, pending: Pending, failed: list[Unapplied], unreadable: tuple[str, ...] = ()
) -> None:
    """Payments the API reported that could not be applied: each counted and logged, and the
    callback asked about again after its backoff with their errors; past
    ``payhooks.operations.alarms.UNCONFIRMED_WAIT`` it is an alert."""
    for unapplied in failed:
        asking.tally.unapplied[Provider(pending.provider)] += 1
        log.error(
            "confirm_apply_failed",
            extra={"provider": pending.provider, "event_id": pending.event_id,
                   "order": pending.gateway_order_id,
                   "payment_id": unapplied.received.event.payment_id,
                   "error": unapplied.reason[:500]},
            exc_info=unapplied.error,
        )  # fmt: skip
    with asking.connect() as conn:
        wait = confirmations.wait_after(pending.attempts)
        confirmations.again(conn, pending, wait, reasons(failed, unreadable))


def _conclude(
    connect: Connect, pending: Pending, found: Verdict | None, detail: str, tally: Tally
) -> None:
    """The callback settled with ``found``, or asked about again later (None)."""
    with connect() as conn:
        if found is None:
            confirmations.again(conn, pending, confirmations.wait_after(pending.attempts), None)
            return
        if not confirmations.settle(conn, pending, found, detail):
            return  # settled by hand while the API was asked: the person's word stands
    provider = Provider(pending.provider)
    if found is Verdict.CONFIRMED:
        tally.confirmed[provider] += 1
        return
    tally.refuted[provider] += 1
    log.warning(
        "callback_refuted",
        extra={"provider": pending.provider, "event_id": pending.event_id,
               "order": pending.gateway_order_id, "claimed": pending.kind.value,
               "payment_id": pending.payment_id, "detail": detail},
    )  # fmt: skip


def _attempt(asking: _Asking, pending: Pending) -> GatewayApiError | None:
    """Another attempt than the first post's (``confirmations``): the gateway's client judges
    it against the first post's stored body (purged: the attempt its payment's record keeps);
    a second payment it reports is applied."""
    connect, client, tally, at = asking.connect, asking.client, asking.tally, asking.at
    provider = Provider(pending.provider)
    judge = getattr(client, "another_attempt", None)
    with connect() as conn:
        first = confirmations.first_body(conn, pending)
        applied = confirmations.applied_body(conn, pending)
        recorded = None if first is not None else confirmations.applied_attempt(conn, pending)
    try:
        if judge is None:  # a gateway whose signature covers the payment's id never gets here
            raise GatewayApiError(provider.value, "this gateway's client judges no attempts")
        said = judge(pending.gateway_order_id, pending.payment_id, first, applied=applied,
                     recorded=recorded)  # fmt: skip
    except GatewayApiError as exc:
        _failed(connect, pending, tally, exc, at)
        return exc
    events = _applied(asking, pending, said.report)
    if events is None:
        return None
    found = confirmations.attempt_verdict(pending, said.verdict, events, at, patient=said.patient)
    detail = said.detail if said.verdict is not None else _detail(pending, found, events)
    _conclude(connect, pending, found, detail, tally)
    return None


def _failed(
    connect: Connect, pending: Pending, tally: Tally, exc: GatewayApiError, at: datetime
) -> None:
    """Asked again later, however long the API gives no usable answer: an error is no word on
    what the callback claimed, so it never refutes it (a real payment's callback would be
    lost to an outage). A callback waiting past ``alarms.UNCONFIRMED_WAIT`` is an alert."""
    provider = Provider(pending.provider)
    tally.api_errors[provider] += 1
    if isinstance(exc, CredentialsRefused):
        tally.refused[provider] = exc.reason
    wait = max(confirmations.wait_after(pending.attempts), asked_wait(exc))
    log.warning(
        "confirm_api_error",
        extra={"provider": pending.provider, "event_id": pending.event_id,
               "order": pending.gateway_order_id, "error": str(exc)[:500],
               "credentials_refused": isinstance(exc, CredentialsRefused),
               "retry_in_s": wait.total_seconds()},
    )  # fmt: skip
    # Refused by the database (a row locked): this callback's lease brings it back; the API's
    # error still counts, and still pauses its gateway.
    written_down(
        connect, lambda conn: confirmations.again(conn, pending, wait, str(exc)),
        log, "confirm_attempt_unrecorded", event_id=pending.event_id,
    )  # fmt: skip


def _detail(pending: Pending, found: Verdict | None, events: list[Event]) -> str:
    """Why the callback was settled so (nothing while it waits). A callback confirmed whose
    own figures (its kind, its amount) are not those the API reported says both: what it
    claimed, and what was applied, the API's (a forged amount, a forged failure)."""
    if found is None:
        return ""
    claimed = f"{kind_words(pending.kind)} of {pending.payment_id or 'the order'}"
    if found is Verdict.CONFIRMED and (applied := _other_figures(pending, events)):
        said = claimed + _for(pending.amount_paise, None)
        return f"the callback claimed {said}; the status API's figures applied: {applied}"[:500]
    if found is Verdict.CONFIRMED and not pending.kind.moves_money:
        return f"heard: a {kind_words(pending.kind)} claims no money moved; the API's word applied"
    if found is Verdict.CONFIRMED:
        return f"the status API reports the {claimed} the callback claimed"
    if events:
        return f"the status API reports another state than the {claimed} the callback claimed"
    return (
        f"the status API never reported the {claimed} the callback claimed, "
        f"in {confirmations.PATIENCE.total_seconds() / 60:.0f} minutes: forged, or stale"
    )


def _other_figures(pending: Pending, events: list[Event]) -> str:
    """What the API reported of the payment (or refund) the callback named, when its kind or
    amount is not the callback's; empty when they agree, or the API reported none of it."""
    mine = [e for e in events if e.kind.is_refund == pending.kind.is_refund]
    named = [e for e in mine if pending.payment_id is None or e.payment_id == pending.payment_id]
    if any(_agrees(pending, e) for e in named):
        return ""
    return "; ".join(
        f"{kind_words(e.kind)} of {e.payment_id or 'the order'}" + _for(_amount(e), e.currency)
        for e in named or mine
    )


def _amount(event: Event) -> int | None:
    return event.refund_amount_paise if event.kind.is_refund else event.amount_paise


def _agrees(pending: Pending, event: Event) -> bool:
    same_amount = pending.amount_paise is None or _amount(event) == pending.amount_paise
    return event.kind is pending.kind and same_amount


def _for(amount_paise: int | None, currency: str | None) -> str:
    if amount_paise is None:
        return ""
    return f" for {amount_paise // 100}.{amount_paise % 100:02d} {currency or 'INR'}"


__all__ = ["confirm"]

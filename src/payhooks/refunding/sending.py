"""The sender: each refund intent due (``payhooks.refunding.refunds``) sent to its gateway under its
idempotency key, until the gateway has it.

A pass leases a few due intents (a lease longer than any call, ``refunds.LEASE``, so a second
sender meets an intent only after the first gave up or died) and calls each one's gateway
with the intent's key and the same body every time. What the gateway says decides:

- it has the refund (made now, or made by an earlier call whose answer was lost: the gateway
  returns the refund it made for the key): recorded ``sent`` with its id, or ``processed``;
- it refused it for good (more than refundable, a payment it will not refund): ``refused``,
  with the gateway's words, the amount free again;
- the intent names too little for the gateway's call (``RefundIncomplete``: a PayU one with no
  ``mihpayid``, a Cashfree one with no order, written before ``request`` refused them): the
  gateway is never asked, and the intent is ``refused`` by payhooks, its ``last_error``
  starting ``refused by payhooks``, counted apart (``Tally.incomplete``), never as the gateway's;
- anything else (a timeout, no answer, 409 "in progress", 429, 5xx, credentials refused): due
  again later (5 s doubling to 10 minutes), the same key, the same body.

A refund the gateway accepted and has not said processed is asked about later
(``check_due``): processed, or failed (none went back, the amount free again), closes it.

A refund the sender learns is processed (from the gateway's answer, or from asking) is also
handed to ``settle``, when given, as a delivery of its own (``processed_delivery``, keyed
``reconcile:<refund id>:sent_refund``), before the intent is closed: the reference worker
delivers it through the same exactly-once path as a refund webhook, so the payment is
recorded refunded even when the gateway's refund webhook never comes. The webhook and this
delivery are two deliveries with one meaning; the shop records a refund once per refund id.

Run by the reference worker on every tick, by ``payhooks refunds send --database-url`` beside
a merchant's app, or by ``send_due`` from a merchant's own scheduler. The gateway clients
(``RefundClient``) live with each gateway's status client (``gateways/<name>/status.py``, the
``reconcile`` extra: httpx); this module imports none of them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from datetime import timedelta

from payhooks.events import Provider
from payhooks.gateways._refunds import (
    SENT_REFUND,
    Refund,
    RefundClient,
    RefundFailed,
    RefundIncomplete,
    RefundRefused,
    RefundState,
    Sent,
    is_processed_key,
    processed_delivery,
    processed_key,
    reread,
)
from payhooks.plumbing.db import Connection, written_down
from payhooks.plumbing.errors import DatabaseAway, GatewayApiError
from payhooks.plumbing.logs import failure_logged
from payhooks.plumbing.retries import Pausing, asked_wait
from payhooks.refunding import refunds

log = logging.getLogger("payhooks.refunds")


Connect = Callable[[], AbstractContextManager[Connection]]
"""A connection in autocommit for each step (``payhooks.reconcile.running.connecting``)."""


@dataclass(slots=True)
class Tally:
    """What one pass did, by gateway."""

    sent: Counter[Provider] = field(default_factory=Counter)
    processed: Counter[Provider] = field(default_factory=Counter)
    refused: Counter[Provider] = field(default_factory=Counter)
    """Refused by the gateway, in an answer it documents as a refusal."""
    incomplete: Counter[Provider] = field(default_factory=Counter)
    """Refused by payhooks, the gateway never asked: the intent names too little for its
    refund call (``RefundIncomplete``)."""
    retried: Counter[Provider] = field(default_factory=Counter)
    """Left to try again: sending it, or asking about one sent, failed (the gateway's API)."""
    busy: Counter[Provider] = field(default_factory=Counter)
    """Not weighed: another transaction held their payment's turn, or their row, past the
    sender's wait (``refunds.PaymentBusy``); sent once their lease runs out."""
    settled: Counter[Provider] = field(default_factory=Counter)
    """Sent earlier, now processed by the gateway's word when asked."""
    failed: Counter[Provider] = field(default_factory=Counter)
    """Failed by the gateway's word (no money went back): asked about once sent, or in the
    answer to the call that made it."""
    spent: Counter[Provider] = field(default_factory=Counter)
    """Not sent, for good: their payment had less left to refund than they asked by the time
    they were to be sent (a chargeback lost, a refund made outside payhooks): ``SPENT`` when
    nothing was left, ``SHRUNK`` when some was (ask again for that)."""
    erring: Counter[Provider] = field(default_factory=Counter)
    """The intents waiting to be tried again after an error, this pass's and earlier ones'
    (``refunds.erring``): counted where a door runs one pass (``--once``), so that a pass
    inside their backoff, which asks nothing, does not pass for success."""
    broken: dict[str, str] = field(default_factory=dict)
    """Gateways whose turn failed whole, with why: the database answering but refusing to
    hand out their intents (a standby left read only, a table missing). Nothing of theirs
    was sent; a later pass tries again."""
    aside: dict[str, str] = field(default_factory=dict)
    """Intents the database refused to hold (an app's trigger or constraint on the row), by
    key, with its words: set aside for the pass, the gateway's others sent; each pass meets
    them again until the row is mended."""
    paused: dict[Provider, str] = field(default_factory=dict)
    """Gateways whose turn a 429, refused credentials or outages in a row ended
    (``payhooks.plumbing.retries.Pausing``), with the last error: their other intents were not
    called this pass, nor asked about (the next pass may call it again: a pause is the
    pass's)."""

    def trouble(self) -> str | None:
        """What a pass left undone that a cron running it must notice: intents to try again
        (the gateway's API failed, or a step broke), gateways whose turn failed whole."""
        broken = sorted(self.broken.items())
        said = [f"{gateway}'s turn failed whole: {why}" for gateway, why in broken]
        said.extend(self._aside())
        said += filter(None, [
            _by_gateway(self.retried, "{count} refund(s) to try again ({each}): the gateway's "
                        "API failed, a step broke or the app's hooks raised; each is asked "
                        "again after its backoff (payhooks refunds list: last_error)"),
            _by_gateway(self.busy, "{count} refund(s) not sent, their payment busy ({each}): "
                        "another transaction held the payment's turn past the sender's wait "
                        "(a long one of the app's?); each is sent once its lease runs out "
                        "(logged refund_payment_busy)"),
        ])  # fmt: skip
        before = self.erring - self.retried  # what waits from earlier passes (each in both)
        more = "more " if said else ""
        said += filter(None, [_by_gateway(
            before, "{count} " + more + "refund(s) waiting to be tried again after an error "
            "({each}): each is asked again after its backoff (payhooks refunds list: last_error)"
        )])  # fmt: skip
        return "; ".join(said) or None

    def _aside(self) -> list[str]:
        return [f"intent {key} set aside, the database refused to hold it: {why}"
                for key, why in sorted(self.aside.items())]  # fmt: skip

    def summary(self) -> str:
        """One line of the pass's counts, for the command's output and the log."""
        total = {name: sum(getattr(self, name).values()) for name in _COUNTS}
        return (
            (
                f"{total['sent']} refund(s) sent, {total['processed']} of them processed at once, "
                f"{total['refused']} refused by the gateway, {total['incomplete']} refused by "
                "payhooks, not sent (naming too little: see last_error), "
                f"{total['retried']} to try again; "
                f"of those sent earlier, {total['settled']} processed; "
                f"{total['failed']} failed by the gateway (no money went back)"
            )
            + (
                f"; {total['spent']} not sent: less or nothing was left to refund by then (a "
                "chargeback lost, a refund made outside payhooks; see last_error)"
                if total["spent"]
                else ""
            )
            + (
                f"; {total['busy']} not sent, their payment busy (sent once their lease runs out)"
                if total["busy"]
                else ""
            )
            + "".join(
                f"; {gateway}'s turn failed whole: {why}"
                for gateway, why in sorted(self.broken.items())
            )
            + "".join(f"; {said}" for said in self._aside())
            + "".join(
                f"; {provider.value} not called again this pass: {why}"
                for provider, why in sorted(self.paused.items())
            )
        )


def _by_gateway(counts: Counter[Provider], words: str) -> str | None:
    """``words`` of ``counts``, their ``{count}`` in all and ``{each}`` gateway's, or None when
    they count none."""
    if not (count := sum(counts.values())):
        return None
    each = ", ".join(f"{p.value}: {n}" for p, n in sorted(counts.items()) if n)
    return words.format(count=count, each=each)


_COUNTS = (
    "sent",
    "processed",
    "refused",
    "incomplete",
    "retried",
    "settled",
    "failed",
    "spent",
    "busy",
)
INCOMPLETE = "refused by payhooks, never sent to the gateway: "
"""How the ``last_error`` of an intent payhooks refused itself starts."""
SPENT = "not sent, the customer has that money back already: "
"""How the ``last_error`` of an intent payhooks did not send starts, whose payment had nothing
left to refund by then (``refunds.refundable_now``): no refund is owed for it."""
SHRUNK = "not sent, it asks more than is left to refund: "
"""... and of one whose payment had less left to refund than it asked: what is left is still
owed, and is asked for again under another key (its ``last_error`` says how much)."""

Settle = Callable[[Refund], None]
"""What is done with a refund the sender learned is processed (``gateway_refund_id`` set),
before its intent is closed: the worker delivers ``processed_delivery(refund)`` to the shop.
When it raises, the intent stays open (``sent``) and is asked about, and settled, again."""


def send_due(
    connect: Connect,
    clients: Mapping[Provider, RefundClient],
    *,
    limit: int = 50,
    stop: Callable[[], bool] = lambda: False,
    settle: Settle | None = None,
    erring: bool = False,
) -> Tally:
    """Every due intent of each gateway in ``clients``, at most ``limit`` each. Each is leased
    just before its call, never a batch up front: a lease runs out only when its one call
    (``refunds.LEASE`` is many times the longest) or its sender died. ``settle``: see
    ``Settle``. With ``erring`` (a door's one pass, ``--once``), the intents waiting again
    after an error are counted too (``Tally.erring``)."""
    tally = Tally()
    act = _Acts(settle)
    if _each_due(connect, clients, refunds.leased, act.send, tally, limit=limit, stop=stop):
        check_due(connect, clients, limit=limit, stop=stop, tally=tally, settle=settle)
    if erring and clients:
        with connect() as conn:
            tally.erring.update(refunds.erring(conn, clients))
    return tally


def check_due(
    connect: Connect,
    clients: Mapping[Provider, RefundClient],
    *,
    limit: int = 50,
    stop: Callable[[], bool] = lambda: False,
    tally: Tally | None = None,
    settle: Settle | None = None,
) -> Tally:
    """The intents a gateway accepted and has not yet said processed, each asked about when
    due (a minute after it was sent, then less often: ``refunds.FIRST_CHECK``): so one whose
    refund webhook never came, or came before the sender recorded the gateway's answer,
    closes all the same. Leased one at a time, as ``send_due`` leases."""
    tally = tally or Tally()
    act = _Acts(settle)
    _each_due(connect, clients, refunds.unsettled, act.check, tally, limit=limit, stop=stop)
    return tally


Lease = Callable[[Connection, Provider, int, timedelta, list[str]], list[Refund]]
Act = Callable[[Connect, "RefundClient", Refund, Tally], GatewayApiError | bool]
"""What is done with one leased intent: the gateway API's error, when it gave no usable
answer; else whether the gateway was called (a hand-over to the app's hooks, an intent never
sent, call nothing, and neither break nor lengthen a gateway's run of outages)."""


def _each_due(
    connect: Connect,
    clients: Mapping[Provider, RefundClient],
    lease: Lease,
    act: Act,
    tally: Tally,
    *,
    limit: int,
    stop: Callable[[], bool],
) -> bool:
    """``act`` on each intent ``lease`` hands out, one at a time, at most ``limit`` per
    gateway, until a 429, refused credentials or outages in a row pause it (``Pausing``:
    ``Tally.paused``, and the rest of the pass leaves it alone); False when ``stop`` said so
    before the end."""
    for provider, client in clients.items():
        pausing = Pausing()
        aside: list[str] = []  # intents the database refused to hold, this pass
        leased = 0
        while leased < limit:  # those set aside take no turn: the lease leaves them out
            if provider in tally.paused:
                break
            if stop():
                return False
            try:
                with connect() as conn:
                    due = lease(conn, provider, 1, _hold(client), aside)
            except DatabaseAway:
                raise  # the whole pass's, not this gateway's: said once, by the caller
            except refunds.LeaseRefused as exc:  # that intent only: the rest are sent
                aside.append(exc.key)
                tally.aside[exc.key] = exc.reason
                said = {"provider": provider.value, "key": exc.key, "detail": exc.reason}
                log.error("refund_lease_refused", extra=said)
                continue
            except Exception as exc:  # the database's: the next gateway's turn may still be had
                reason = failure_logged(
                    log, "refund_lease_failed", exc, 200, provider=provider.value
                )
                tally.broken.setdefault(provider.value, reason)
                break
            if not due:
                break
            leased += 1
            try:
                done = act(connect, client, due[0], tally)
            except DatabaseAway:
                raise
            except Exception as exc:  # a client's bug, the database's: this intent only
                _broke(connect, due[0], tally, exc, sent=lease is not refunds.leased)
                continue
            if not isinstance(done, GatewayApiError):
                if done:  # the gateway answered
                    pausing.after(None)
                continue
            if pausing.after(done) is not None:
                tally.paused[provider] = done.reason
                log.warning(
                    "refund_gateway_paused",
                    extra={"provider": provider.value, "detail": done.reason},
                )
    return True


def _hold(client: RefundClient) -> timedelta:
    """How long an intent is held for ``client``'s calls: each within its HTTP client's
    deadline (``PAYHOOKS_RECONCILE_TIMEOUT_MS``), the hold longer than all of them."""
    timeout = getattr(getattr(client, "http", None), "timeout", None)  # an httpx.Timeout
    deadline = getattr(timeout, "read", None)
    return refunds.lease_for(deadline) if isinstance(deadline, int | float) else refunds.LEASE


def _refused(
    connect: Connect, refund: Refund, tally: Tally, exc: RefundIncomplete | RefundRefused
) -> None:
    """The intent closed ``refused``, for good: by payhooks, never sent (``RefundIncomplete``:
    its ``last_error`` and count say so, ``Tally.incomplete``), or by the gateway's word."""
    ours = isinstance(exc, RefundIncomplete)
    with connect() as conn:
        if not refunds.refused(conn, refund, (INCOMPLETE if ours else "") + exc.reason):
            return  # another sender's now (this one's hold ran out), or closed meanwhile
    (tally.incomplete if ours else tally.refused)[refund.provider] += 1
    log.warning(
        "refund_incomplete" if ours else "refund_refused",
        extra={"provider": refund.provider.value, "key": refund.idempotency_key,
               "payment_id": refund.payment_id, "amount_paise": refund.amount_paise,
               "detail": exc.reason},
    )  # fmt: skip


def _beyond(connect: Connect, refund: Refund, tally: Tally, room: refunds.Room) -> None:
    """An intent past what its payment has left to refund by now (a chargeback lost since it
    was written gave the customer the money back already; a refund made outside payhooks took
    it; refunds asked before it, or called for after it, take it first): never sent. One
    never called for is closed ``refused``, its ``last_error`` starting ``SPENT`` when no
    other refund leaves anything (``Room.unheld``), ``SHRUNK`` and saying how much to ask
    again for when one does. One called for before may have been made by that call, its
    answer lost: neither sent again nor refused (either could be wrong), but held, saying
    why, asked about again after its backoff and alerted as an intent retried, for a person
    to cancel or let be."""
    owed = room.unheld
    why = (
        f"payment {refund.payment_id} has {room.left} paise left to refund for it, not the "
        f"{refund.amount_paise} asked: lost disputes gave the customer part of it back, a "
        "refund made outside payhooks took it, or other refunds asked of it take it first"
    ) + ("" if owed == 0 else f"; ask again for the {owed} paise still owed")
    if refund.attempts == 0:  # never called: no call of it reached the gateway
        with connect() as conn:
            if not refunds.refused(conn, refund, (SPENT if owed == 0 else SHRUNK) + why):
                return  # another sender's now (this one's lease ran out), or closed
        tally.spent[refund.provider] += 1
        log.warning(
            "refund_spent",
            extra={"provider": refund.provider.value, "key": refund.idempotency_key,
                   "detail": why},
        )  # fmt: skip
        return
    with connect() as conn:
        if not refunds.held(
            conn,
            refund,
            refunds.wait_after(refund.attempts),
            f"{why}; an earlier call may have made it: held for a person",
        ):
            return  # another sender's now (this one's lease ran out), or closed
    tally.retried[refund.provider] += 1
    log.warning("refund_held", extra={"provider": refund.provider.value,
                                      "key": refund.idempotency_key, "detail": why})  # fmt: skip


def _failed(tally: Tally, refund: Refund, exc: RefundRefused) -> None:
    """A refund the gateway made, then failed (no money went back): counted, and logged."""
    tally.failed[refund.provider] += 1
    log.warning(
        "refund_failed",
        extra={"provider": refund.provider.value, "key": refund.idempotency_key,
               "payment_id": refund.payment_id, "refund_id": refund.gateway_refund_id,
               "amount_paise": refund.amount_paise, "detail": exc.reason},
    )  # fmt: skip


def _retried(
    tally: Tally, refund: Refund, exc: GatewayApiError, said: str, left: bool, **more: object
) -> None:
    """One intent the gateway's API failed for (sending it, or asking about it), logged;
    counted to try again when it was ``left`` so (not when its webhook closed it meanwhile)."""
    tally.retried[refund.provider] += left
    log.info(said, extra={"provider": refund.provider.value, "key": refund.idempotency_key,
                          "detail": exc.reason, "left": left, **more})  # fmt: skip


def _broke(connect: Connect, refund: Refund, tally: Tally, exc: Exception, *, sent: bool) -> None:
    """One intent the pass could not act on: asked again after its backoff, its error kept
    (``payhooks refunds list``; an intent retried after an error is an alert,
    ``payhooks.operations.alerts.refunds``); the others go on."""
    reason = failure_logged(
        log, "refund_step_failed", exc,
        provider=refund.provider.value, key=refund.idempotency_key,
    )  # fmt: skip
    left = True  # unless the write says the intent moved on (its webhook closed it)

    def again(conn: Connection) -> None:
        nonlocal left
        if sent:
            left = refunds.unsettled_again(conn, refund, reason)
        else:  # not written under another lease (its own renewed, its reply lost): still due
            wait = refunds.wait_after(refund.attempts)
            left = refunds.again(conn, refund, wait, reason) or refunds.still_requested(
                conn, refund
            )

    written_down(connect, again, log, "refund_attempt_unrecorded", key=refund.idempotency_key)
    tally.retried[refund.provider] += left


def _wait(refund: Refund, exc: GatewayApiError) -> timedelta:
    """The sender's own backoff, or what the gateway asked for (``retries.asked_wait``) when that
    is longer."""
    return max(refunds.wait_after(refund.attempts), asked_wait(exc))


def _still_left(connect: Connect, refund: Refund, write: Callable[[Connection], bool]) -> bool:
    """``write`` of an intent the gateway's API failed for: whether it is left to try again
    (not closed meanwhile by its webhook). The database refusing it (a row locked) is this
    intent's alone: logged, its lease brings it back, and the API's error still counts, and
    still pauses its gateway."""
    left = True

    def written(conn: Connection) -> None:
        nonlocal left
        left = write(conn)

    written_down(connect, written, log, "refund_attempt_unrecorded", key=refund.idempotency_key)
    return left


class _Acts:
    """What is done with each leased intent: sent (``send``) or asked about (``check``),
    a processed refund handed to ``settle`` before its intent is closed."""

    def __init__(self, settle: Settle | None) -> None:
        self.settle = settle

    def unsettled(self, refund: Refund, tally: Tally) -> str | None:
        """Why ``settle`` could not take the processed refund (the app's handler raised, its
        database refused), counted among those to try again; None when it took it, or there
        is none to give it to. The intent stays open with that error: asked about, and
        handed over, again."""
        if self.settle is None:
            return None
        try:
            self.settle(refund)
        except Exception as exc:
            log.exception(
                "refund_unsettled",
                extra={"provider": refund.provider.value, "key": refund.idempotency_key,
                       "refund_id": refund.gateway_refund_id},
            )  # fmt: skip
            tally.retried[refund.provider] += 1
            reason = f"{type(exc).__name__}: {exc}"
            return f"{refunds.NOT_TAKEN} ({reason})"[:500]
        return None

    def check(
        self, connect: Connect, client: RefundClient, refund: Refund, tally: Tally
    ) -> GatewayApiError | bool:
        """A sent intent asked about; one the gateway said processed already, which only the
        app's hooks did not take (``refunds.NOT_TAKEN``), is handed to them again without
        asking (a processed refund stays processed): an API error then would have replaced
        that error, and the refund the app never recorded looked like one merely unsettled."""
        if (refund.last_error or "").startswith(refunds.NOT_TAKEN):
            self._settle(connect, refund, tally, processed=True)
            return False
        try:
            now = client.refund_status(refund)
        except RefundRefused as exc:
            with connect() as conn:
                refunds.settled(conn, refund, processed=False, error=exc.reason)
            _failed(tally, refund, exc)
            return True
        except GatewayApiError as exc:
            reason, asked = exc.reason, asked_wait(exc)
            left = _still_left(
                connect, refund,
                lambda conn: refunds.unsettled_again(conn, refund, reason, asked=asked),
            )  # fmt: skip
            _retried(tally, refund, exc, "refund_check_retry", left,
                     refund_id=refund.gateway_refund_id)  # fmt: skip
            return exc
        self._settle(connect, refund, tally, processed=now.processed)
        return True

    def _settle(self, connect: Connect, refund: Refund, tally: Tally, *, processed: bool) -> None:
        """The intent closed when the gateway processed it and the app's hooks took it, else
        asked about (and handed over) again."""
        error = self.unsettled(refund, tally) if processed else None
        done = processed and error is None
        with connect() as conn:
            if done:
                refunds.settled(conn, refund, processed=True)
            else:
                refunds.unsettled_again(conn, refund, error)
        tally.settled[refund.provider] += done

    def send(
        self, connect: Connect, client: RefundClient, refund: Refund, tally: Tally
    ) -> GatewayApiError | bool:
        provider = refund.provider
        try:
            with connect() as conn:
                weighed = refunds.weighed(conn, refund, _hold(client))
        except refunds.PaymentBusy as exc:  # its lease brings it back: no write to wait on
            tally.busy[provider] += 1
            log.warning("refund_payment_busy", extra={"provider": provider.value,
                        "key": refund.idempotency_key, "detail": str(exc)})  # fmt: skip
            return False
        if not weighed.calling:
            fresh, room = weighed.refund, weighed.room
            if room.left < refund.amount_paise and fresh and fresh.state is RefundState.REQUESTED:
                _beyond(connect, fresh, tally, room)
            return False  # past requested (its webhook closed it), or its lease ran out: due again
        assert weighed.refund is not None
        try:
            return self._call(connect, client, weighed.refund, tally)
        except DatabaseAway:
            raise
        except Exception as exc:  # a client's bug, the database's: under its renewed lease
            _broke(connect, weighed.refund, tally, exc, sent=False)
            return False

    def _call(
        self, connect: Connect, client: RefundClient, refund: Refund, tally: Tally
    ) -> GatewayApiError | bool:
        """The call of an intent weighed and counted (``refund``, under its renewed lease), and
        what its answer says, written down."""
        provider = refund.provider
        try:
            sent = client.send_refund(refund)
        except RefundFailed as exc:  # made under the gateway's id, failed in the same answer
            made = replace(refund, gateway_refund_id=exc.gateway_refund_id)
            with connect() as conn, conn.transaction():
                refunds.accepted(conn, refund, exc.gateway_refund_id, processed=False)
                refunds.settled(conn, made, processed=False, error=exc.reason)
            _failed(tally, made, exc)
            return True
        except (RefundIncomplete, RefundRefused) as exc:
            _refused(connect, refund, tally, exc)
            return not isinstance(exc, RefundIncomplete)  # an incomplete one is never sent
        except GatewayApiError as exc:
            reason, wait = exc.reason, _wait(refund, exc)
            left = _still_left(
                connect, refund, lambda conn: refunds.again(conn, refund, wait, reason)
            )
            _retried(tally, refund, exc, "refund_retry", left, attempts=refund.attempts)
            return exc
        made = replace(refund, gateway_refund_id=sent.gateway_refund_id)
        error = self.unsettled(made, tally) if sent.processed else None
        processed = sent.processed and error is None
        with connect() as conn:
            refunds.accepted(conn, refund, sent.gateway_refund_id, processed=processed)
            if error is not None:
                refunds.unsettled_again(conn, made, error)
        tally.sent[provider] += 1
        tally.processed[provider] += processed
        log.info(
            "refund_sent",
            extra={"provider": provider.value, "key": refund.idempotency_key,
                   "payment_id": refund.payment_id, "refund_id": sent.gateway_refund_id,
                   "amount_paise": refund.amount_paise, "processed": processed},
        )  # fmt: skip
        return True


__all__ = [
    "SENT_REFUND",
    "RefundClient",
    "RefundFailed",
    "RefundIncomplete",
    "RefundRefused",
    "Sent",
    "Settle",
    "Tally",
    "check_due",
    "is_processed_key",
    "processed_delivery",
    "processed_key",
    "reread",
    "send_due",
]

"""The webhook endpoint every front door shares: a gateway's name, the body the door read and
the request's header pairs in; a ``Reply`` out (status, JSON body, log name and fields).

A door (the reference service, FastAPI or Starlette, Flask, Django) only maps its framework's
request to those three and the reply back to its response. The body is read by the door,
bounded by ``Endpoint.bound(gateway)``; the claim (how and where a verified delivery is
applied) is the door's too, passed in as a function. Everything else is here once: which
gateway, one limit on its name, verify and parse, the answer from ``payhooks.intake.answers``'s
table, and the log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

from payhooks.events import Received
from payhooks.gateways import Adapter
from payhooks.intake.answers import answer, clipped, error_answer, error_status, log_name
from payhooks.intake.ingest import Receipt, header_map, receive
from payhooks.plumbing.errors import (
    PayhooksError,
    PayloadTooLarge,
    ProviderNotConfigured,
    SerializationConflict,
)
from payhooks.plumbing.retries import Retries

MAX_GATEWAY_CHARS = 64
"""An unknown gateway's name is echoed in the 404 and logged: never at the size sent."""

HeaderPairs = Sequence[tuple[str, str]]
Claim = Callable[[Received], Receipt]
AsyncClaim = Callable[[Received], Awaitable[Receipt]]
Offload = Callable[[Callable[[], Received]], Awaitable[Received]]
Seen = Callable[["Reply"], None]
Note = Callable[["Arrival", "Reply"], None]
Pause = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What to answer one delivery, and what was logged about it."""

    status: int
    body: dict[str, Any]
    log_name: str
    log_fields: dict[str, Any]
    outcome: str
    """The receipt's outcome (``processed``, ...) or the error's code (``signature_mismatch``)."""
    received: Received | None = None
    """The delivery as verified, once it was."""
    mismatch: bool = False
    close: bool = False
    """The body was refused unread: a door that can should close the connection after it."""
    retries: int = 0
    """How many times the claim's transaction was run again after a serialization conflict."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """A webhook request as read, before anything about it is proven."""

    gateway: str
    started: float
    received_at: datetime
    body: bytes | None = None

    @classmethod
    def now(cls, gateway: str, body: bytes | None = None) -> Arrival:
        """A request arriving now, timed from here."""
        return cls(
            gateway=gateway, started=time.perf_counter(), received_at=datetime.now(UTC), body=body
        )


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The gateways served (by name), the logger the door's lines go to, where each request
    is noted with its answer (``payhooks.operations.deliverylog.DeliveryLog.note``), if anywhere,
    and how a claim that lost a serialization conflict is run again
    (``payhooks.plumbing.retries``)."""

    adapters: Mapping[str, Adapter]
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("payhooks"))
    note: Note | None = None
    retries: Retries = field(default_factory=Retries)

    @classmethod
    def serving(
        cls, adapters: Iterable[Adapter], log: logging.Logger, note: Note | None = None
    ) -> Endpoint:
        """An endpoint serving ``adapters``, each under its gateway's name."""
        return cls(served(adapters), log, note)

    def adapter(self, gateway: str) -> Adapter:
        """The adapter serving ``gateway``; ``ProviderNotConfigured`` for any other."""
        found = self.adapters.get(gateway)
        if found is None:
            raise ProviderNotConfigured(clipped(gateway, MAX_GATEWAY_CHARS))
        return found

    def bound(self, gateway: str) -> int:
        """How many bytes of body the door may read for ``gateway``; an unknown one is
        refused (``ProviderNotConfigured``) before any."""
        return self.adapter(gateway).max_body_bytes

    def received(self, gateway: str, body: bytes, pairs: HeaderPairs) -> Received:
        """Verified, then parsed; a signature header repeated with two values is refused."""
        adapter = self.adapter(gateway)
        return receive(adapter, body, header_map(pairs, adapter))

    def deliver(
        self, gateway: str, body: bytes, pairs: HeaderPairs, claim: Claim, seen: Seen | None = None
    ) -> Reply:
        """Verify and claim on this thread; anything but a payhooks error is logged
        (``webhook_failed``) and raised, for the framework to answer 500.

        The steps are ``deliver_async``'s, with the claim called rather than awaited and a
        retry's pause slept on this thread: nothing in them waits then, so they run to their
        end here, with no event loop."""
        steps = self.deliver_async(gateway, body, pairs, _awaitable(claim), seen=seen, pause=_slept)
        return _at_once(steps)

    async def deliver_async(
        self,
        gateway: str,
        body: bytes,
        pairs: HeaderPairs,
        claim: AsyncClaim,
        *,
        offload: Offload | None = None,
        seen: Seen | None = None,
        pause: Pause = asyncio.sleep,
    ) -> Reply:
        """``deliver``, awaiting the claim; verification runs where ``offload`` puts it
        (a worker thread), else here. A claim that raises ``SerializationConflict`` is run
        again, whole, within ``self.retries``, after awaiting ``pause``."""
        if self.note is not None:
            seen = _both(seen, partial(self.note, Arrival.now(gateway, body)))
        try:
            if offload is None:
                received = self.received(gateway, body, pairs)
            else:
                received = await offload(partial(self.received, gateway, body, pairs))
        except PayhooksError as exc:
            return _shown(self.refused(gateway, exc), seen)
        except Exception as exc:  # a bug in reading it (an adapter's): said as a handler's is
            _shown(self.broke(gateway, exc), seen)
            raise
        try:
            taken, retries = await self._retried(claim, received, pause)
        except Exception as exc:
            _shown(self.failed(received, exc), seen)
            raise
        if isinstance(taken, PayhooksError):
            reply = self.failed(received, taken)
        else:
            reply = self.answered(received, taken)
        return _shown(replace(reply, retries=retries) if retries else reply, seen)

    async def _retried(
        self, claim: AsyncClaim, received: Received, pause: Pause
    ) -> tuple[Receipt | PayhooksError, int]:
        """The claim's receipt, or the payhooks error it ended with, and how many times it
        was run again. The door's transaction is over when a conflict reaches here (rolled
        back by its ``transaction()`` or ``atomic()`` block), so the handler's writes of the
        failed attempt are gone and it runs again from the claim."""
        started, retries = time.perf_counter(), 0
        while True:
            try:
                return await claim(received), retries
            except SerializationConflict as exc:
                wait = self.retries.pause(retries + 1, time.perf_counter() - started)
                if wait is None:
                    return exc, retries
                retries += 1
                self._retrying(received, exc, retries, wait)
                await pause(wait)
            except PayhooksError as exc:
                return exc, retries

    def _retrying(
        self, received: Received, exc: SerializationConflict, retry: int, wait: float
    ) -> None:
        fields = {**_event_fields(received), "sqlstate": exc.sqlstate, "retry": retry}
        self.log.info("webhook_conflict_retried", extra={**fields, "pause_ms": wait * 1000})

    def unread(self, gateway: str, exc: PayhooksError) -> Reply:
        """``refused`` for a body the door refused to read (too large, no length): noted with
        no size or hash."""
        reply = self.refused(gateway, exc)
        if self.note is not None:
            self.note(Arrival.now(gateway), reply)
        return reply

    def refused(self, gateway: str, exc: PayhooksError) -> Reply:
        """A delivery refused before it was verified: unknown gateway, body, signature."""
        fields = {"provider": clipped(gateway, MAX_GATEWAY_CHARS), **_error_fields(exc)}
        return self._logged(_error_reply(exc, fields))

    def failed(self, received: Received, exc: Exception) -> Reply:
        """A verified delivery not taken: the database refused it, or a handler raised."""
        if isinstance(exc, PayhooksError):
            fields = {**_event_fields(received), **_error_fields(exc)}
            return self._logged(_error_reply(exc, fields, received))
        return self._bug({**_event_fields(received)}, exc, received)

    def broke(self, gateway: str, exc: Exception) -> Reply:
        """A delivery whose reading raised what payhooks does not know (a bug in the adapter's
        verify or parse): answered and said as a handler's bug is."""
        return self._bug({"provider": clipped(gateway, MAX_GATEWAY_CHARS)}, exc, None)

    def _bug(self, fields: dict[str, Any], exc: Exception, received: Received | None) -> Reply:
        said = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        fields = {**fields, "status": 500, "reason": "internal_error"}
        reply = Reply(
            status=500,
            body={"error": "internal_error"},
            log_name="webhook_failed",
            log_fields=fields,
            outcome="internal_error",
            received=received,
        )
        # The bug, said here with its traceback: a framework's own logging, configured away,
        # must never be the only place it shows.
        self.log.error("webhook_failed", extra={**fields, "error": said}, exc_info=exc)
        return reply

    def answered(self, received: Received, receipt: Receipt) -> Reply:
        """The reply to a claimed delivery, from its receipt, and its log line: under the key
        the receipt names, which the claim may have given it (a PayU post naming a second
        ``mihpayid`` is recorded and answered under ``<txnid>:success:<mihpayid>``), so the
        log and the delivery log file the request where its record is."""
        if receipt.event is not received.event:
            received = replace(received, event=receipt.event)
        given = answer(receipt)
        fields = {**_event_fields(received), "order_id": receipt.order_id}
        if receipt.mismatch:
            self.log.warning("webhook_payload_mismatch", extra=_event_fields(received))
        reply = Reply(
            status=given.status,
            body=given.body,
            log_name=f"webhook_{receipt.outcome.value}",
            log_fields=fields,
            outcome=receipt.outcome.value,
            received=received,
            mismatch=receipt.mismatch,
        )
        return self._logged(reply)

    def _logged(self, reply: Reply) -> Reply:
        level = logging.INFO if reply.status < 400 else logging.WARNING
        self.log.log(level, reply.log_name, extra=reply.log_fields)
        return reply


MAX_ERROR_CHARS = 500
"""What a log line keeps of a handler's error."""


def served(adapters: Iterable[Adapter]) -> dict[str, Adapter]:
    """The adapters by gateway name; two for one gateway, or none at all, are refused."""
    found: dict[str, Adapter] = {}
    for adapter in adapters:
        name = adapter.provider.value
        if name in found:
            raise ValueError(f"two adapters for {name}: give one, with all its secrets")
        found[name] = adapter
    if not found:
        raise ValueError("name at least one adapter (Razorpay, Cashfree, PayU)")
    return found


def unfolded(pairs: Iterable[tuple[str, str]], adapter: Adapter) -> list[tuple[str, str]]:
    """Header pairs with the repeats a server folded restored, where that can be done.

    WSGI (and Django, under WSGI or ASGI) gives one value per name: servers join repeats with
    commas (Werkzeug's and gunicorn's ``,``, others ``, ``). No value of a header an adapter
    reads holds a comma (hex and base64 signatures, digits, ids, dates), so those are split
    back into the copies sent, for ``header_map`` to accept when identical and refuse when
    not (401). Other headers stay whole. A server that keeps one copy only leaves nothing to
    restore.
    """
    restored: list[tuple[str, str]] = []
    for name, value in pairs:
        if "," in value and name.lower() in adapter.headers_read:
            restored.extend((name, part.strip()) for part in value.split(","))
        else:
            restored.append((name, value))
    return restored


def _awaitable(claim: Claim) -> AsyncClaim:
    async def called(received: Received) -> Receipt:
        return claim(received)

    return called


async def _slept(seconds: float) -> None:
    time.sleep(seconds)


def _at_once(steps: Coroutine[Any, Any, Reply]) -> Reply:
    """The value of ``steps``, which never wait: they end on their first step."""
    try:
        steps.send(None)
    except StopIteration as done:
        return cast(Reply, done.value)
    steps.close()
    raise RuntimeError("the sync steps of a delivery waited on something")


def _shown(reply: Reply, seen: Seen | None) -> Reply:
    """The reply told to whoever watches (the log line, the delivery log, metrics): a failure
    there never changes the answer, whose work may already be committed."""
    if seen is not None:
        try:
            seen(reply)
        except Exception:
            logging.getLogger("payhooks").exception(
                "webhook_reply_unrecorded", extra={"status": reply.status}
            )
    return reply


def _both(seen: Seen | None, noted: Seen) -> Seen:
    if seen is None:
        return noted

    def both(reply: Reply) -> None:
        noted(reply)
        seen(reply)

    return both


def _error_fields(exc: PayhooksError) -> dict[str, Any]:
    status, code = error_status(exc)
    return {"status": status, "reason": code, "detail": clipped(str(exc))}


def _error_reply(
    exc: PayhooksError, fields: dict[str, Any], received: Received | None = None
) -> Reply:
    given = error_answer(exc)
    return Reply(
        status=given.status,
        body=given.body,
        log_name=log_name(given.status),
        log_fields=fields,
        outcome=fields["reason"],
        received=received,
        close=isinstance(exc, PayloadTooLarge),
    )


def _event_fields(received: Received) -> dict[str, Any]:
    event = received.event
    return {
        "provider": event.provider.value,
        "event_id": event.event_id,
        "event_type": event.event_type,
    }


__all__ = [
    "MAX_GATEWAY_CHARS",
    "Arrival",
    "AsyncClaim",
    "Claim",
    "Endpoint",
    "HeaderPairs",
    "Note",
    "Offload",
    "Pause",
    "Reply",
    "served",
    "unfolded",
]

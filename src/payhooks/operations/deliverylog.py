"""Every webhook request as it was answered, for health and timelines: kept in memory, then
written to ``payhooks_deliveries`` in batches by a thread of its own, after the answer. One
log for every door: the reference service, FastAPI or Starlette, Flask, Django.

The log is what an operator reads; what took effect is in ``processed_webhooks``. So a
delivery never waits for its log line, a failed write is retried with the next batch, and
when the database stays away the oldest lines go first once ``max_pending`` are waiting
(``on_drop`` counts them): a flood costs a bounded queue and one connection, never a
connection a webhook needs. A line the database refuses whatever its state (text it cannot
hold) would fail every batch it is in: the batch is split until that line is alone, and it is
dropped alone (``on_unwritable``) while the lines around it are written.

A COPY holds at most ``MAX_LINES_PER_COPY`` lines, each its own transaction, so the backlog
an outage leaves is written batch by batch within the statement timeout; a batch that still
runs past it is split too (a slow database is not an absent one).

A refused request costs whoever sends it little, so a forged-request flood must not cost a row
each for the retention window: of each kind of refusal (gateway, status, answer), the first
``REFUSALS_WRITTEN_PER_MINUTE`` of a minute are lines of their own, and the rest of that minute
are counted, then written as one line whose ``repeats`` says how many it stands for, once the
minute ends (or at ``close``). Readers count ``sum(repeats)``. Authentic deliveries are never
folded: each is a line.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Protocol, TypeVar

import psycopg

from payhooks.events import Provider, Received
from payhooks.intake.endpoint import Arrival, Reply
from payhooks.plumbing.db import Connection, libpq_url, translated

log = logging.getLogger("payhooks.deliverylog")

T = TypeVar("T")

CONNECT_TIMEOUT_S = 2
STATEMENT_TIMEOUT_MS = 1000
UNKNOWN_GATEWAY = "unknown"
UNKNOWN_GATEWAY_DETAIL = "no gateway of that name is served"
"""A refused line's detail for a gateway payhooks does not know: the name is the client's
choice (a forger's text in the operator's views), so the line never quotes it."""
_KNOWN = frozenset(p.value for p in Provider)
MAX_DETAIL_CHARS = 200
MAX_LINES_PER_COPY = 2_000
REFUSALS_WRITTEN_PER_MINUTE = 20
"""Refusals of one kind in one minute written each as a line; the rest of that minute are one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """One request and its answer. Fields a refused request claimed about itself are left out:
    they were not proven authentic."""

    received_at: datetime
    provider: str
    status: int
    outcome: str
    verified: bool
    event_id: str | None = None
    event_type: str | None = None
    payment_id: str | None = None
    merchant_ref: str | None = None
    mismatch: bool = False
    body_bytes: int = 0
    body_sha256: str | None = None
    detail: str | None = None
    duration_ms: float = 0.0
    repeats: int = 1
    """How many requests the line stands for: past the first refusals of a kind in a minute,
    the rest of that minute are one line."""


def answered(
    received: Received,
    *,
    received_at: datetime,
    status: int,
    outcome: str,
    mismatch: bool = False,
    duration_ms: float = 0.0,
    detail: str | None = None,
) -> Delivery:
    """The log line of an authentic delivery; ``detail``, why it was not taken (a 4xx or 5xx
    of payhooks' own: the database away, a callback past its bound)."""
    event = received.event
    return Delivery(
        received_at=received_at,
        provider=event.provider.value,
        status=status,
        outcome=outcome,
        verified=True,
        event_id=event.event_id,
        event_type=event.event_type,
        payment_id=event.payment_id,
        merchant_ref=event.merchant_ref,
        mismatch=mismatch,
        body_bytes=len(received.body),
        body_sha256=event.payload_sha256,
        detail=None if detail is None else detail[:MAX_DETAIL_CHARS],
        duration_ms=duration_ms,
    )


def refused(
    provider: str,
    *,
    received_at: datetime,
    status: int,
    outcome: str,
    detail: str,
    body: bytes | None,
    duration_ms: float = 0.0,
) -> Delivery:
    """The log line of a request refused before it was proven authentic: its size and hash,
    never its bytes or what it claimed to be."""
    return Delivery(
        received_at=received_at,
        provider=provider,
        status=status,
        outcome=outcome,
        verified=False,
        body_bytes=0 if body is None else len(body),
        body_sha256=None if body is None else hashlib.sha256(body).hexdigest(),
        detail=detail[:MAX_DETAIL_CHARS],
        duration_ms=duration_ms,
    )


def line(arrival: Arrival, reply: Reply) -> Delivery:
    """The log line of a request and its answer: an authentic delivery's, or a refused one's
    (filed under ``unknown``, with ``UNKNOWN_GATEWAY_DETAIL``, when its gateway is not one
    payhooks knows)."""
    duration_ms = (time.perf_counter() - arrival.started) * 1000
    if reply.received is None:
        provider = shown_gateway(arrival.gateway)
        return refused(
            provider,
            received_at=arrival.received_at,
            status=reply.status,
            outcome=reply.outcome,
            detail=_refusal(provider, reply),
            body=arrival.body,
            duration_ms=duration_ms,
        )
    return answered(
        reply.received,
        received_at=arrival.received_at,
        status=reply.status,
        outcome=reply.outcome,
        mismatch=reply.mismatch,
        duration_ms=duration_ms,
        detail=reply.log_fields.get("detail") if reply.status >= 400 else None,
    )


def _refusal(provider: str, reply: Reply) -> str:
    """The step's words for a refusal, but for a gateway payhooks does not know: those quote
    the name the client chose."""
    return UNKNOWN_GATEWAY_DETAIL if provider == UNKNOWN_GATEWAY else reply.log_fields["detail"]


def shown_gateway(name: str) -> str:
    """The path segment a client chose: a gateway payhooks knows, else ``unknown``."""
    return name if name in _KNOWN else UNKNOWN_GATEWAY


class Side(Protocol):
    """The log's own connection: ``work`` run in a transaction, reconnecting after a failure."""

    def run(self, work: Callable[[Connection], T]) -> T:
        """Runs ``work`` in a transaction of the log's own connection."""

    def close(self) -> None:
        """Lets the connection go."""


class OwnConnection:
    """A connection ``connect`` opens on first use and again after a failure, never one a
    webhook needs; each write bounded by ``STATEMENT_TIMEOUT_MS``, set in its transaction so
    a transaction pooler keeps it."""

    def __init__(self, connect: Callable[[], Connection]) -> None:
        self._connect = connect
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[Connection], T]) -> T:
        """Runs ``work`` in a transaction with the statement bound; a broken
        connection is dropped and the next call opens another."""
        with self._lock, translated():
            try:
                if self._conn is None:
                    self._conn = self._connect()
                with self._conn.transaction():
                    self._conn.execute(_TIMEOUT, (str(STATEMENT_TIMEOUT_MS),))
                    return work(self._conn)
            except psycopg.Error:
                self._drop()
                raise

    def close(self) -> None:
        """Closes the connection, if one is open."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def own_connection(conninfo: str, **kwargs: Any) -> OwnConnection:
    """A connection of its own to the database ``conninfo`` names (with the keywords a
    psycopg pool keeps in its ``kwargs``), given up after ``CONNECT_TIMEOUT_S``."""
    options = {"connect_timeout": CONNECT_TIMEOUT_S, **kwargs, "autocommit": True}
    return OwnConnection(partial(psycopg.Connection.connect, libpq_url(conninfo), **options))


_TIMEOUT = "SELECT set_config('statement_timeout', %s, true)"
_FIELDS = tuple(Delivery.__dataclass_fields__)
_COPY = f"COPY payhooks_deliveries ({', '.join(_FIELDS)}) FROM STDIN"


_Kind = tuple[str, int, str, datetime]
"""A refusal's gateway, status and answer, and the minute it arrived in."""


@dataclass(slots=True)
class _Fold:
    """The refusals of one kind in one minute: how many were seen, and those past the ones
    written as lines, to be one line when the minute ends."""

    seen: int = 0
    repeats: int = 0
    latest: Delivery | None = None
    largest: int = 0
    duration_ms: float = 0.0

    def absorb(self, delivery: Delivery) -> None:
        self.repeats += delivery.repeats
        self.largest = max(self.largest, delivery.body_bytes)
        self.duration_ms += delivery.duration_ms * delivery.repeats
        if self.latest is None or delivery.received_at >= self.latest.received_at:
            self.latest = delivery

    def line(self) -> Delivery | None:
        """The line standing for them, received when the last of them was, with the largest
        body's size; no hash (their bodies may differ), and the mean time to answer."""
        if self.latest is None:
            return None
        return replace(
            self.latest,
            body_bytes=self.largest,
            body_sha256=None,
            detail=f"and {self.repeats:,} more refused like it this minute",
            duration_ms=self.duration_ms / self.repeats,
            repeats=self.repeats,
        )


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


class DeliveryLog:
    """``add`` from any thread; a thread of its own writes what has piled up: ``start`` runs
    it until ``close``, else the first line added starts it and it ends, letting its
    connection go, once nothing is left to write (a door with no start-up of its own). What
    is still waiting when the app stops is written by ``close`` or ``stop``, which the door's
    shutdown calls (else ``closed_at_exit``'s, at the process's end).

    A refusal past the first ``refusals_per_minute`` of its kind in its minute is counted, not
    queued: ``max_pending`` bounds the lines waiting, the minutes' summaries among them, and
    ``on_drop`` counts the requests the lines it drops stood for. ``clock`` says when a
    minute has ended."""

    def __init__(
        self,
        side: Side,
        *,
        max_pending: int = 50_000,
        every_seconds: float = 0.5,
        on_drop: Callable[[int], None] = lambda n: None,
        on_unwritable: Callable[[int], None] = lambda n: None,
        logger: logging.Logger = log,
        refusals_per_minute: int = REFUSALS_WRITTEN_PER_MINUTE,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._side = side
        self._log = logger
        self._pending: deque[Delivery] = deque()
        self._folds: dict[_Kind, _Fold] = {}
        self._max_pending = max_pending
        self._every = every_seconds
        self._on_drop = on_drop
        self._on_unwritable = on_unwritable
        self._refusals_per_minute = refusals_per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._started = False
        self._failing = False

    def add(self, delivery: Delivery) -> None:
        """Keep a line to write, or count a refusal into its minute's summary; past
        ``max_pending`` the oldest line goes, after ``close`` this one."""
        with self._lock:
            if self._closed:
                dropped = delivery.repeats
            else:
                dropped = 0 if self._folded(delivery) else self._queued(delivery)
                if not self._started and self._thread is None:
                    self._thread = _daemon(self._run_while_pending)
        if dropped:
            self._on_drop(dropped)

    def _folded(self, delivery: Delivery) -> bool:
        """Whether ``delivery`` was counted into its minute's summary (under the lock)."""
        if delivery.verified:
            return False
        kind = (delivery.provider, delivery.status, delivery.outcome, _minute(delivery.received_at))
        fold = self._folds.get(kind)
        if fold is None:
            fold = self._folds[kind] = _Fold()
        fold.seen += 1
        if fold.seen <= self._refusals_per_minute:
            return False
        fold.absorb(delivery)
        return True

    def _queued(self, delivery: Delivery) -> int:
        """Queue ``delivery``, then the requests dropped to stay within ``max_pending``."""
        self._pending.append(delivery)
        return self._trimmed()

    def _trimmed(self) -> int:
        dropped = 0
        while len(self._pending) > self._max_pending:
            dropped += self._pending.popleft().repeats
        return dropped

    def _settled(self, before: datetime | None) -> int:
        """Queue the summary of each minute before ``before`` (of every one when ``None``), and
        forget those minutes; the requests dropped to stay within ``max_pending``."""
        ended = [kind for kind in self._folds if before is None or kind[3] < before]
        for kind in ended:
            summary = self._folds.pop(kind).line()
            if summary is not None:
                self._pending.append(summary)
        return self._trimmed()

    def _summaries_due(self) -> bool:
        return any(fold.repeats for fold in self._folds.values())

    def note(self, arrival: Arrival, reply: Reply) -> None:
        """The line of ``reply`` to the request ``arrival``: ``Endpoint``'s ``note``."""
        self.add(line(arrival, reply))

    def start(self) -> None:
        """Starts the thread that writes the lines (again, after ``close``)."""
        with self._lock:
            self._started = True
            waiting = self._thread
        if waiting is not None:
            waiting.join(timeout=10)
        self._thread = _daemon(self._run)

    def close(self) -> None:
        """Stop the thread, then write what is left, the summary of the minute going on too:
        once, and what a database away makes impossible is counted as dropped (so is a line
        added after closing)."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=10)
        self._write(self._taken(None))
        with self._lock:
            self._closed = True
            lines = len(self._pending)
            lost = sum(line.repeats for line in self._pending)
            self._pending.clear()
        if lost:
            self._on_drop(lost)
            self._log.warning("delivery_log_lines_lost", extra={"lines": lines, "requests": lost})
        self._side.close()

    def stop(self) -> None:
        """``close``, then take lines again, each first one starting a thread anew: for an app
        that stops and may start again in the same process (a test client's second block)."""
        self.close()
        with self._lock:
            self._closed = self._started = False
            self._thread = None
            self._stopping.clear()

    def flush(self) -> int:
        """Write every waiting line, ``MAX_LINES_PER_COPY`` at most per COPY, and say how many
        were written. When the database refuses the data, or a batch runs past the statement
        timeout, the batch is halved: a refused line alone is dropped, a slow line alone is
        kept. Any other failure (the database away) leaves the lines not yet written waiting
        for the next try, in their order. The minutes that have ended are written with their
        summaries."""
        return self._write(self._taken(_minute(self._clock())))

    def _taken(self, ended_before: datetime | None) -> list[Delivery]:
        """The lines waiting, the summaries of the minutes before ``ended_before`` with them."""
        with self._lock:
            dropped = self._settled(ended_before)
            batch = list(self._pending)
            self._pending.clear()
        if dropped:
            self._on_drop(dropped)
        return batch

    def _write(self, batch: list[Delivery]) -> int:
        written, chunks = 0, _bounded(batch)
        while chunks:
            chunk = chunks.pop()
            try:
                self._side.run(partial(_copy, batch=chunk))
            except _UNWRITABLE as exc:
                if len(chunk) > 1:
                    chunks.extend(_halves(chunk))
                else:
                    self._unwritable(exc)
                continue
            except _TooSlow:
                if len(chunk) > 1:
                    chunks.extend(_halves(chunk))
                    continue
                self._put_back(chunks, chunk, "statement timeout on one line")
                return written
            except Exception as exc:
                self._put_back(chunks, chunk, str(exc)[:200])
                return written
            written += len(chunk)
            self._failing = False
        return written

    def _put_back(self, chunks: list[list[Delivery]], chunk: list[Delivery], error: str) -> None:
        if self._started or not self._failing:  # a door's log says so once per outage
            self._log.warning("delivery_log_write_failed", extra={"error": error})
        self._failing = True
        waiting = [line for part in (*chunks, chunk) for line in reversed(part)]
        with self._lock:
            self._pending.extendleft(waiting)

    def _unwritable(self, exc: Exception) -> None:
        """Only the kind of error: its text can quote the value the database refused."""
        self._on_unwritable(1)
        self._log.warning(
            "delivery_log_line_unwritable",
            extra={"error": getattr(exc, "sqlstate", None) or type(exc).__name__},
        )

    def _run(self) -> None:
        while not self._stopping.wait(self._every):
            self.flush()

    def _run_while_pending(self) -> None:
        while not self._stopping.wait(self._every):
            self.flush()
            with self._lock:
                if self._pending or self._started or self._summaries_due():
                    continue
                self._thread = None
            self._side.close()
            return


def closed_at_exit(log: DeliveryLog) -> DeliveryLog:
    """``log``, closed when the interpreter exits: its thread is a daemon, stopped there with
    the lines of its last half second unwritten (a server's worker ending, no lifespan said
    so). Held weakly: a log nobody keeps any more is not kept for this."""
    atexit.register(_close_if_kept, weakref.ref(log))
    return log


def _close_if_kept(kept: weakref.ref[DeliveryLog]) -> None:
    log = kept()
    if log is not None:
        log.close()


def _daemon(run: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=run, name="payhooks-delivery-log", daemon=True)
    thread.start()
    return thread


# What a line's own data causes, whatever the database's state: text no encoding holds
# (a lone surrogate, caught as the row is encoded), or one PostgreSQL refuses (a NUL, class 22).
_UNWRITABLE = (UnicodeError, psycopg.DataError)


class _TooSlow(Exception):
    """A COPY cancelled by the statement timeout: the batch, not the database, is the matter."""


def _bounded(batch: list[Delivery]) -> list[list[Delivery]]:
    """Batches of at most ``MAX_LINES_PER_COPY``, to be popped first batch first."""
    step = MAX_LINES_PER_COPY
    return [batch[at : at + step] for at in range(0, len(batch), step)][::-1]


def _halves(chunk: list[Delivery]) -> tuple[list[Delivery], list[Delivery]]:
    """Both halves, to be popped first half first."""
    middle = len(chunk) // 2
    return chunk[middle:], chunk[:middle]


def _copy(conn: psycopg.Connection[tuple[object, ...]], batch: list[Delivery]) -> None:
    try:
        with conn.cursor() as cur, cur.copy(_COPY) as copy:
            for delivery in batch:
                copy.write_row([getattr(delivery, name) for name in _FIELDS])
    except psycopg.errors.QueryCanceled as exc:
        raise _TooSlow from exc


__all__ = [
    "Delivery",
    "DeliveryLog",
    "OwnConnection",
    "Side",
    "answered",
    "closed_at_exit",
    "line",
    "own_connection",
    "refused",
    "shown_gateway",
]

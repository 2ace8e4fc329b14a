"""How long delivery records are kept, and the purge that deletes them, for every host of the
core's tables: a merchant's app (``payhooks.operations.retention.purge``, ``payhooks purge
--database-url``), the Django app and the reference service, which purge on top of it.

Small batches, each its own short transaction, so deliveries keep flowing while a million old
rows go. Parked records are kept until applied: they are unfinished money business; so are
the expectation and the payment claim a parked delivery will meet when it is replayed, and the
expectation of an amount mismatch not yet resolved. A capture being parked for its amount
locks its expectation, and the purge deletes only what it could lock, checking again once it
holds the locks, so the two running at once never leave a parked delivery without it."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import psycopg

from payhooks.plumbing.db import Connection, first_line, query, row_refused
from payhooks.plumbing.errors import RetentionTooShort

log = logging.getLogger("payhooks.retention")

# Razorpay retries for 24 hours and replays events up to 15 days old (its FAQ); a record
# purged before that could let a replay act twice on anything not business-keyed.
MIN_RETENTION_DAYS = 15
DEFAULT_RETENTION_DAYS = 90
MAX_RETENTION_DAYS = 36_500
"""A hundred years: a window much longer makes a cut-off PostgreSQL's timestamps cannot hold
(a few million days overflow them)."""
BATCH_ROWS = 5000

REFUNDABLE_DAYS = 365
"""How long a captured payment's record (``payhooks.intake.payments``: its order, its ids, what was
paid) is kept whatever the window: a refund of it reads them there, and a refund may be
asked for long after its deliveries are purged."""

CUTOFF = "SELECT now() - make_interval(days => %s)"
# A record goes past the window unless it is unfinished business (parked, confirming) or a
# refund reconciliation applied (``reconcile:<refund id>:…``, Juspay's): the status API lists
# an order's refunds again each time it is asked, under the same keys, and a refund has no
# payment record to answer for it, so its record is kept as long as a capture's.
_PAST = f"""
processed_at < %s AND outcome NOT IN ('parked', 'confirming')
AND NOT (event_type LIKE 'reconcile.refund.%%'
         AND processed_at >= now() - make_interval(days => {REFUNDABLE_DAYS}))
"""
EXPIRED = "SELECT count(*) FROM processed_webhooks WHERE " + _PAST


def _delete_batch(besides: str = "") -> str:
    """A batch of records past the window, oldest first, ``besides`` narrowing them."""
    return f"""
DELETE FROM processed_webhooks
WHERE (provider, event_id) IN (
    SELECT provider, event_id FROM processed_webhooks
    WHERE {_PAST}{besides}
    ORDER BY processed_at
    LIMIT %s
    FOR UPDATE SKIP LOCKED)
"""


# Each batch is a short transaction of its own, on the real key (provider, event_id).
DELETE_BATCH = _delete_batch()
# After a batch the database refused (a row of it held by a foreign key of the app's, or a
# trigger), the batch is deleted a record at a time, the ones it refuses kept (``kept``) and
# left out of every batch after, so the rest are purged past them.
_EXCEPT = " AND (provider, event_id) NOT IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
_DELETE_BATCH_EXCEPT = _delete_batch(_EXCEPT)
_BATCH_KEYS = (
    "SELECT provider, event_id FROM processed_webhooks WHERE "
    + _PAST
    + _EXCEPT
    + " ORDER BY processed_at LIMIT %s FOR UPDATE SKIP LOCKED"
)
_DELETE_ONE = "DELETE FROM processed_webhooks WHERE provider = %s AND event_id = %s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Aged:
    """The rows of one table a purge deletes, in batches: those ``past`` says (over the row
    ``x``, with the purge's ``%(cutoff)s`` and ``%(days)s``), ``order`` first; ``named`` is how
    an operator reads a row the database refused to delete. Each batch is locked first (``FOR
    UPDATE SKIP LOCKED``: a row a writer holds waits for the next purge), then deleted by its
    row ids in a statement of its own that asks ``past`` again, whose snapshot, taken once the
    locks are held, sees every write committed before them. A batch the database refuses (a
    row of it held by a foreign key of the app's, or a trigger) is deleted a row at a time, the
    rows it refuses kept and left out of every batch after, so the rest are purged past them."""

    table: str
    past: str
    named: str
    order: str = ""

    @property
    def locking(self) -> str:
        """A batch's rows locked, by row id, those kept left out."""
        return (
            f"SELECT x.ctid::text FROM {self.table} x"
            f" WHERE ({self.past}) AND x.ctid <> ALL (%(kept)s::tid[])"
            f" {self.order} LIMIT %(rows)s FOR UPDATE SKIP LOCKED"
        )

    @property
    def deleting(self) -> str:
        """The locked rows deleted, those ``past`` says still."""
        return (
            f"DELETE FROM {self.table} x WHERE x.ctid = ANY (%(locked)s::tid[]) AND ({self.past})"
        )

    @property
    def remaining(self) -> str:
        """Which of the locked rows are there still."""
        return f"SELECT x.ctid::text FROM {self.table} x WHERE x.ctid = ANY (%(locked)s::tid[])"

    @property
    def naming(self) -> str:
        """The locked rows ``past`` says still, by row id and name."""
        return (
            f"SELECT x.ctid::text, {self.named} FROM {self.table} x"
            f" WHERE x.ctid = ANY (%(locked)s::tid[]) AND ({self.past})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Held:
    """A row of another table past the window the database refused to delete: its table, the
    row as an operator reads it (``Aged.named``), the database's words."""

    table: str
    row: str
    error: str


def _unwaited(parked: str, waiting: str, *, parked_by: str | None = None) -> str:
    """No delivery parked (its ``parked_by`` column, ``parked`` by default, naming the row's
    ``parked``) nor callback waiting for its gateway's word (``waiting``) names the row: its
    replay or its confirmation will meet it."""
    return f"""NOT EXISTS (SELECT 1 FROM processed_webhooks w WHERE w.outcome = 'parked'
                AND w.provider = x.provider AND w.{parked_by or parked} = x.{parked})
AND NOT EXISTS (SELECT 1 FROM payhooks_confirmations c WHERE c.verdict IS NULL
                AND c.provider = x.provider AND c.{waiting} = x.{waiting})"""


# A payment claim stays while a parked delivery of that payment may yet be replayed, or a
# callback of its order waits for the gateway's word, or the replay or the
# payment the API reports would reach the handler a second time; a capture's, while a refund
# of it is possible:
# for REFUNDABLE_DAYS, and while a refund of it is not settled. No index on applied_at (the
# claim's insert stays cheap): no ORDER BY, so a batch reads only as far as its rows.
PAYMENTS = Aged(
    table="payhooks_payments",
    past="""
x.applied_at < %(cutoff)s
AND (x.kind <> 'payment_captured'
     OR x.applied_at < least(%(cutoff)s, now() - make_interval(days => %(days)s)))
AND NOT EXISTS (SELECT 1 FROM payhooks_refunds r WHERE r.state IN ('requested', 'sent')
                AND r.provider = x.provider AND r.payment_id = x.payment_id)
AND """
    + _unwaited("payment_id", "gateway_order_id"),
    named="concat_ws(' ', x.provider, x.payment_id, x.kind)",
)
# An expectation stays while a delivery parked for its order may yet be replayed, a callback
# of its order waits for the gateway's word (its records are never purged, nor what they will
# meet), or a payment's amount mismatch with it is not resolved: a replay or a confirmation
# without it would skip the amount check. Its reconciliation row goes with it (ON DELETE
# CASCADE). A capture being parked locks the expectation it does not meet (FOR KEY SHARE):
# the batch skips it, and the delete's snapshot sees every parking committed before.
EXPECTATIONS = Aged(
    table="payhooks_expectations",
    past="""
x.created_at < %(cutoff)s
AND NOT EXISTS (SELECT 1 FROM payhooks_amount_mismatches m WHERE m.resolved_at IS NULL
                AND m.provider = x.provider AND m.gateway_order_id = x.gateway_order_id)
AND """
    + _unwaited("gateway_order_id", "gateway_order_id", parked_by="merchant_ref"),
    named="concat_ws(' ', x.provider, x.gateway_order_id)",
    order="ORDER BY x.created_at",
)
# The delivery log (every request a webhook door answered, refused ones too) ages out with the
# deliveries: a forged-request flood must not stay forever.
_LOGGED = "SELECT count(*) FROM payhooks_deliveries WHERE received_at < %s"
LOGGED = Aged(
    table="payhooks_deliveries",
    past="x.received_at < %(cutoff)s",
    named="concat_ws(' ', 'line', x.id, x.provider, x.event_id)",
    order="ORDER BY x.received_at",
)
# The claims of failed and pending attempts (core 0042) go with the deliveries they answer for,
# but, as a payment's claim, while a parked delivery of the payment may yet be replayed or a
# callback of it waits for the gateway's word: either would reach the handler a second time.
REPORTS = Aged(
    table="payhooks_attempt_reports",
    past="""
x.reported_at < %(cutoff)s
AND """
    + _unwaited("payment_id", "payment_id"),
    named="concat_ws(' ', x.provider, x.payment_id, x.kind, x.attempt_id)",
    order="ORDER BY x.reported_at",
)
# Payment events a relay published (``payhooks.relay``) go with the deliveries that applied
# them; one not yet published is never deleted.
RELAYED = Aged(
    table="payhooks_outbox",
    past="x.kind = 'event' AND x.sent_at < %(cutoff)s",
    named="concat_ws(' ', 'relayed event', x.id)",
)
# The console's door: ended sessions and failed logins past the rate limit's look-back are not
# kept at all (a stranger's failed login writes a row: the table must not grow with them).
CONSOLE = (
    Aged(
        table="payhooks_console_sessions",
        past="x.expires_at < now()",
        named="concat_ws(' ', 'console session of', x.operator)",
    ),
    Aged(
        table="payhooks_console_login_failures",
        past="x.failed_at < now() - interval '1 day'",
        named="concat_ws(' ', 'failed login', x.id)",
    ),
)
_PURGE_LOCK = 0x70757267  # "purg": one purge at a time, whichever process runs it
_TRY_LOCK = "SELECT pg_try_advisory_xact_lock(%s)"
_UNBOUNDED = "SELECT set_config('statement_timeout', '0', true)"
# An app's deferred foreign key or constraint trigger refuses a delete as the statement ends,
# not at the commit: a record's refusal is then that record's, caught in its savepoint.
_IMMEDIATE = "SET CONSTRAINTS ALL IMMEDIATE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Purge:
    """What a purge did: its cutoff, the records past it, and how many it deleted; the same
    of the delivery log's lines (``payhooks_deliveries``), apart: a line is a request a door
    answered, not a delivery, and a flood of refused ones can be millions."""

    cutoff: datetime
    expired: int
    """Delivery records past the window when the purge began (parked ones not counted)."""
    deleted: int
    log_lines_expired: int
    """Delivery-log lines past the window when the purge began."""
    log_lines_deleted: int
    kept: tuple[Kept, ...] = ()
    """Records past the window the database refused to delete (each logged as
    ``purge_record_refused``); the rest were deleted past them."""
    held: tuple[Held, ...] = ()
    """Rows of the other tables a purge deletes from (payment records, expectations, the
    delivery log...) the database refused to delete (each logged as ``purge_row_refused``);
    the rest were deleted past them."""

    def counted(self, *, dry_run: bool) -> str:
        """What it deleted (``dry_run``: would delete), as every purge command says it."""
        if dry_run:
            return (
                f"would delete {self.expired} record(s) and {self.log_lines_expired} "
                "delivery-log line(s)"
            )
        return f"deleted {self.deleted} record(s) and {self.log_lines_deleted} delivery-log line(s)"

    @property
    def refused(self) -> int:
        """Records and rows the database refused to delete: kept past the window."""
        return len(self.kept) + len(self.held)

    def kept_said(self) -> str:
        """What a purge's line ends with when it kept anything: ``; kept N ...``, or nothing."""
        return f"; kept {self.refused} the database refused to delete" if self.refused else ""

    def refusals(self) -> str:
        """What was kept, and why, for an operator (the first ten)."""
        named = [f"{k.provider} {k.event_id}: {k.error}" for k in self.kept]
        named += [f"{h.table} {h.row}: {h.error}" for h in self.held]
        more = f"; and {len(named) - 10} more" if len(named) > 10 else ""
        return (
            f"{self.refused} record(s) or row(s) past the window kept, the database refused to "
            f"delete them ({'; '.join(named[:10])}{more}): what holds them (a foreign key or a "
            "trigger of the app's) must let them go"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Kept:
    """A record past the window the database refused to delete, and its words."""

    provider: str
    event_id: str
    error: str


WINDOW_SETTING = "PAYHOOKS_RETENTION_DAYS"
"""The deployment's window, read alike by the reference service, the ``payhooks`` command
and Django's ``payhooks_purge`` (``window_setting``)."""


class WindowRefused(ValueError):
    """``PAYHOOKS_RETENTION_DAYS`` refused, and why (``reason``, without the name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{WINDOW_SETTING} {reason}")
        self.name, self.reason = WINDOW_SETTING, reason


def window_setting(environ: Mapping[str, str]) -> int:
    """The window ``PAYHOOKS_RETENTION_DAYS`` sets, else ``DEFAULT_RETENTION_DAYS``; one that
    is no whole number, or is refused by ``window_refused``, raises ``WindowRefused``."""
    raw = environ.get(WINDOW_SETTING, "").strip()
    if not raw:
        return DEFAULT_RETENTION_DAYS
    if not (raw.isascii() and raw.isdecimal()) or not raw.strip("0"):
        raise WindowRefused(
            f"must be a whole number of days from {MIN_RETENTION_DAYS} to {MAX_RETENTION_DAYS},"
            f" not {raw[:40]!r}"
        )
    digits = raw.lstrip("0")
    days = int(digits) if len(digits) <= 9 else MAX_RETENTION_DAYS + 1
    refused = window_refused(days)
    if refused is not None:
        raise WindowRefused(refused if len(digits) <= 9 else refused.replace(str(days), digits))
    return days


def window_refused(days: int) -> str | None:
    """Why a deployment's window of ``days`` is refused, or None: one shorter than the
    gateways' replays, which a purge that runs on a schedule would refuse, and so purge
    nothing, every day."""
    if days > MAX_RETENTION_DAYS:
        return f"must be at most {MAX_RETENTION_DAYS} days (a hundred years), not {days}"
    if days >= MIN_RETENTION_DAYS:
        return None
    return (
        f"must be at least {MIN_RETENTION_DAYS} days, not {days}: a gateway replays a delivery "
        "for days after it was sent. Set it to that or more (or unset it: "
        f"{DEFAULT_RETENTION_DAYS}); a shorter window is purged by hand, with the variable unset, "
        "by `payhooks purge --older-than-days N --force`"
    )


def check_window(days: int, *, force: bool) -> None:
    """A window shorter than the gateways' replays is refused unless forced; a negative one
    always (``ValueError``: it would take records not yet made as old)."""
    if days < 0:
        raise ValueError(f"a window of {days} days: it must be 0 or more")
    if days > MAX_RETENTION_DAYS:
        raise ValueError(f"a window of {days} days: it must be at most {MAX_RETENTION_DAYS}")
    if days < MIN_RETENTION_DAYS and not force:
        raise RetentionTooShort(days, MIN_RETENTION_DAYS)


@contextlib.contextmanager
def unbounded(conn: Connection) -> Iterator[None]:
    """A transaction with no statement timeout (counting ten million rows may take longer
    than a webhook may), set for it alone: no session state, which a transaction pooler
    would hand to another client."""
    with conn.transaction():
        conn.execute(_UNBOUNDED)
        conn.execute(_IMMEDIATE)
        yield


def plan(conn: Connection, days: int) -> Purge:
    """What a purge would delete now, deleting nothing (``--dry-run``)."""
    with unbounded(conn):
        cutoff = query(conn, CUTOFF, (days,)).fetchone()[0]  # type: ignore[index]
        expired = query(conn, EXPIRED, (cutoff,)).fetchone()[0]  # type: ignore[index]
        lines = query(conn, _LOGGED, (cutoff,)).fetchone()[0]  # type: ignore[index]
    return Purge(
        cutoff=cutoff, expired=expired, deleted=0, log_lines_expired=lines, log_lines_deleted=0
    )


def _never() -> bool:
    return False


def delete_expired(
    conn: Connection,
    planned: Purge,
    *,
    batch_rows: int = BATCH_ROWS,
    on_batch: Callable[[int], None] | None = None,
    within_batch: Callable[[int], object] | None = None,
    stop: Callable[[], bool] = _never,
    also: Sequence[Aged] = (),
) -> Purge:
    """Delete the delivery records before ``planned.cutoff``, batch by batch, each its own
    transaction (``within_batch`` runs in it with the batch's count, ``on_batch`` after its
    commit); then the payment claims, the expectations, the delivery log's lines, the
    payment events published to a broker and the failed and pending attempts' claims older
    than that, the console's ended sessions and day-old failed logins, and ``also`` (a host's
    own tables). A record or row the database refuses to delete is kept, the rest purged past
    it (``Purge.kept``, ``Purge.held``). ``batch_rows`` below 1 is a ``ValueError`` (a batch
    of none would never end)."""
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, not {batch_rows}")
    deleted = 0
    kept: dict[tuple[str, str], str] = {}
    careful = False  # a record at a time, from a batch that fell short with records left
    while not stop():
        batch = _one_by_one if careful else _together
        done, read = batch(conn, planned.cutoff, batch_rows, kept, within_batch)
        deleted += done
        if on_batch is not None:
            on_batch(done)
        if read < batch_rows:
            # A batch short of records while some past the window are left: an app's trigger
            # skipped some without a word, and every batch would take them first again.
            if careful or not _left_behind(conn, planned.cutoff, kept):
                break
            careful = True
    held: list[Held] = []
    params = {"cutoff": planned.cutoff, "days": REFUNDABLE_DAYS}
    lines = 0
    for aged in (PAYMENTS, EXPECTATIONS, LOGGED, RELAYED, REPORTS, *CONSOLE, *also):
        done = _sweep(conn, aged, params, batch_rows, held, stop)
        lines += done if aged is LOGGED else 0
    refused = tuple(Kept(provider=p, event_id=e, error=why) for (p, e), why in kept.items())
    return replace(
        planned, deleted=deleted, log_lines_deleted=lines, kept=refused, held=tuple(held)
    )


def _batch(
    cutoff: datetime, batch_rows: int, kept: Mapping[tuple[str, str], str]
) -> tuple[str, tuple[object, ...]]:
    if not kept:
        return DELETE_BATCH, (cutoff, batch_rows)
    return _DELETE_BATCH_EXCEPT, (cutoff, *_columns(kept), batch_rows)


def _columns(kept: Mapping[tuple[str, str], str]) -> tuple[list[str], list[str]]:
    """The kept records' gateways and keys, as ``_EXCEPT`` takes them."""
    return [provider for provider, _ in kept], [event_id for _, event_id in kept]


def _together(
    conn: Connection,
    cutoff: datetime,
    batch_rows: int,
    kept: dict[tuple[str, str], str],
    within_batch: Callable[[int], object] | None,
) -> tuple[int, int]:
    """A batch of records deleted in one statement, or, the database refusing it, a record at
    a time (``_one_by_one``). The records deleted, and those read."""
    try:
        with unbounded(conn):
            done = conn.execute(*_batch(cutoff, batch_rows, kept)).rowcount
            if within_batch is not None:
                within_batch(done)
        return done, done
    except psycopg.DatabaseError as exc:
        if not row_refused(conn, exc):
            raise  # the database away, a pooler's or a bug: not a record's refusal
    return _one_by_one(conn, cutoff, batch_rows, kept, within_batch)


def _one_by_one(
    conn: Connection,
    cutoff: datetime,
    batch_rows: int,
    kept: dict[tuple[str, str], str],
    within_batch: Callable[[int], object] | None,
) -> tuple[int, int]:
    """A batch a record at a time, each in a savepoint: those the database refuses, or leaves
    without a word (an app's trigger skipping them), are added to ``kept``, the first
    ``LOGGED_REFUSALS`` of a purge logged each. The records deleted, and those read."""
    deleted = 0
    with unbounded(conn):
        rows = query(conn, _BATCH_KEYS, (cutoff, *_columns(kept), batch_rows))
        found = [(str(provider), str(event_id)) for provider, event_id in rows.fetchall()]
        for key in found:
            try:
                with conn.transaction():
                    gone = conn.execute(_DELETE_ONE, key).rowcount
            except psycopg.DatabaseError as exc:
                if not row_refused(conn, exc):
                    raise
                gone, why = 0, first_line(exc)
            else:
                why = _LEFT
            if not gone:
                kept[key] = why
                if len(kept) <= LOGGED_REFUSALS:
                    log.error(
                        "purge_record_refused",
                        extra={"provider": key[0], "event_id": key[1], "error": why},
                    )
                continue
            deleted += 1
        if within_batch is not None:
            within_batch(deleted)
    return deleted, len(found)


def _left_behind(conn: Connection, cutoff: datetime, kept: Mapping[tuple[str, str], str]) -> bool:
    """Whether records past the window, not kept, are there still (none a claim holds)."""
    with unbounded(conn):
        return query(conn, _BATCH_KEYS, (cutoff, *_columns(kept), 1)).fetchone() is not None


LOGGED_REFUSALS = 20
"""Records a purge logs it kept, one line each; ``Purge.kept`` holds them all."""


def _sweep(
    conn: Connection,
    aged: Aged,
    params: Mapping[str, object],
    batch_rows: int,
    held: list[Held],
    stop: Callable[[], bool],
) -> int:
    """``aged``'s rows past the purge's cutoff deleted in short transactions until a batch
    falls short; those the database refuses, or leaves (an app's trigger skipping them), added
    to ``held`` and left out of the batches after. The rows it deleted."""
    deleted = 0
    kept: list[str] = []
    while not stop():
        with unbounded(conn):
            locking = {**params, "kept": kept, "rows": batch_rows}
            locked = [str(row[0]) for row in query(conn, aged.locking, locking)]
            done, moved = _deleted(conn, aged, params, locked, kept, held) if locked else (0, 0)
        deleted += done
        if moved:  # rewritten, they would be locked again under new row ids by every batch
            _held(aged, f"{moved} row(s)", _MOVED, held)
            break
        if len(locked) < batch_rows:
            break
    return deleted


def _deleted(
    conn: Connection,
    aged: Aged,
    params: Mapping[str, object],
    locked: list[str],
    kept: list[str],
    held: list[Held],
) -> tuple[int, int]:
    """The ``locked`` rows deleted together, or, the database refusing, each in a savepoint of
    its own. Those it refused or left are kept (``kept``: their row ids; ``held``: for the
    operator, the first ``LOGGED_REFUSALS`` of a purge logged): a row an app's trigger skips
    (``RETURN NULL``) raises nothing, and read again it would fill every batch for ever. The
    rows deleted, and those the database changed instead (gone from their row ids, there
    still: their new ones are not known)."""
    deleted, refused = 0, 0
    try:
        with conn.transaction():
            deleted = conn.execute(aged.deleting, {**params, "locked": locked}).rowcount
    except psycopg.DatabaseError as exc:
        if not row_refused(conn, exc):
            raise  # the database away, a pooler's or a bug: not a row's refusal
        for ctid in locked:
            try:
                with conn.transaction():
                    deleted += conn.execute(aged.deleting, {**params, "locked": [ctid]}).rowcount
            except psycopg.DatabaseError as exc:
                if not row_refused(conn, exc):
                    raise
                _hold(conn, aged, params, ctid, first_line(exc), held)
                kept.append(ctid)
                refused += 1
    left: list[str] = []
    if deleted + refused < len(locked):  # some left without a word: which
        there = {str(row[0]) for row in query(conn, aged.remaining, {"locked": locked})}
        left = [ctid for ctid in locked if ctid in there and ctid not in kept]
        kept.extend(left)
        for _, named in query(conn, aged.naming, {**params, "locked": left}).fetchall():
            _held(aged, str(named), _LEFT, held)
    return deleted, len(locked) - deleted - refused - len(left)


_LEFT = "the database did not delete it, and said nothing (a trigger or rule of the app's)"
_MOVED = (
    "the database changed them instead of deleting them (a trigger or rule of the app's "
    "rewriting them): this table's purge stopped at them"
)


def _hold(
    conn: Connection,
    aged: Aged,
    params: Mapping[str, object],
    ctid: str,
    error: str,
    held: list[Held],
) -> None:
    """The row ``ctid`` the database refused to delete, held with its words."""
    row = query(conn, aged.naming, {**params, "locked": [ctid]}).fetchone()
    _held(aged, "?" if row is None else str(row[1]), error, held)


def _held(aged: Aged, named: str, error: str, held: list[Held]) -> None:
    held.append(Held(table=aged.table, row=named, error=error))
    if len(held) <= LOGGED_REFUSALS:
        log.error("purge_row_refused", extra={"table": aged.table, "row": named, "error": error})


@contextlib.contextmanager
def exclusively(holder: Connection) -> Iterator[bool]:
    """Whether this process may purge: False while another purge runs, whichever process.

    The lock is held by a transaction left open on ``holder`` for the whole purge, not by a
    session: behind a transaction pooler a session-level lock would stay with a server
    session that other clients go on using, and its unlock could reach another session. An
    open transaction keeps its server session, and ends with its client."""
    with holder.transaction():
        yield bool(query(holder, _TRY_LOCK, (_PURGE_LOCK,)).fetchone()[0])  # type: ignore[index]


@contextlib.contextmanager
def alongside(conn: Connection) -> Iterator[Connection]:
    """A second connection to ``conn``'s database, opened as it was, to hold the lock."""
    with psycopg.connect(
        conn.info.dsn,
        password=conn.info.password or None,
        autocommit=True,
        prepare_threshold=conn.prepare_threshold,
    ) as other:
        yield other


def purge(
    conn: Connection,
    days: int = DEFAULT_RETENTION_DAYS,
    *,
    force: bool = False,
    batch_rows: int = BATCH_ROWS,
    holder: Connection | None = None,
    on_batch: Callable[[int], None] | None = None,
    planned: Purge | None = None,
    stop: Callable[[], bool] = _never,
) -> Purge | None:
    """Delete the core's records older than ``days`` (the cutoff fixed at the start): delivery
    records, except parked ones, in batches of ``batch_rows``, each its own short transaction;
    then payment claims and expectations (with their reconciliation rows) as old, except
    those a parked delivery will need. None, deleting nothing, while another purge runs.

    ``conn`` is autocommit, or out of autocommit with no transaction open. The lock is held on
    ``holder`` (by default a second connection opened like ``conn``) for the whole purge.
    Raises ``RetentionTooShort`` for a window shorter than the gateways' replays, unless
    ``force``."""
    check_window(days, force=force)
    with _locked(conn, holder) as mine:
        if not mine:
            return None
        return delete_expired(
            conn,
            planned or plan(conn, days),
            batch_rows=batch_rows,
            on_batch=on_batch,
            stop=stop,
        )


@contextlib.contextmanager
def _locked(conn: Connection, holder: Connection | None) -> Iterator[bool]:
    if holder is not None:
        with exclusively(holder) as mine:
            yield mine
        return
    with alongside(conn) as other, exclusively(other) as mine:
        yield mine

"""The notifier: each alert (``payhooks.operations.alerts``) sent once to people, by email and a
chat webhook, repeated at most every so often while it lasts, and a word when it clears
(docs/operations.md, "Alerts"); a dispute's alerts are news, said once each
(``alerts.NOT_REPEATED``, ``alerts.RESOLVED_SILENTLY``).

Deduplication is the project's own claim: one conditional write on the alert's row in
``payhooks_alerts`` (raise it if absent or resolved; repeat it if last notified before the
interval; resolve it if no longer found), and only the notifier whose write took queues the
notices, one per channel on the outbound queue (``payhooks.operations.outbox``, the queue that
also carries an application's own emails), in the same transaction. So several worker hosts
looking at once send each alert once.

Sending is after commit, one notice at a time: leased (its next attempt pushed past the call),
sent with a timeout, then marked sent, or put back with backoff when the channel failed. A
channel that fails is not asked again in the same tick, so a chat endpoint that hangs costs one
timeout per tick, never the worker's loop. A notifier killed mid-call leaves the lease to run
out and the notice is sent again: at least once, never lost. Time is an argument throughout.
"""

from __future__ import annotations

import http.client
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

import psycopg

from payhooks.operations import outbox
from payhooks.operations.alarms import in_utc
from payhooks.operations.alerts import NOT_REPEATED, RESOLVED_SILENTLY, Alert, Source, observe
from payhooks.plumbing.db import Connection, row_refused
from payhooks.plumbing.errors import NoticeFailed
from payhooks.plumbing.logs import failure_logged

log = logging.getLogger("payhooks.notifier")


class NoticeKind(StrEnum):
    """What a notice says of its alert."""

    RAISED = "raised"
    REPEATED = "repeated"
    RESOLVED = "resolved"


_PREFIXES = {
    NoticeKind.RAISED: "[payhooks] ALERT",
    NoticeKind.REPEATED: "[payhooks] STILL",
    NoticeKind.RESOLVED: "[payhooks] RESOLVED",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """One message about one alert to one channel, leased by the notifier sending it."""

    id: int
    alert_key: str
    kind: NoticeKind
    channel: str
    title: str
    body: str
    attempts: int
    """This attempt's number: 1 the first time it is sent."""
    created_at: datetime
    dedupe_key: str = ""
    """Its key on the outbound queue (``payhooks.operations.outbox``)."""

    @property
    def message_key(self) -> str:
        """What an email's Message-ID is made from: the same on every attempt, so the mail
        system can drop a repeat."""
        return self.dedupe_key or f"alert-notice:{self.id}"

    @property
    def text(self) -> str:
        """Title and body in one: what a chat message shows."""
        return f"{self.title}\n{self.body}"


class Channel(Protocol):
    """Where notices go. ``send`` raises ``NoticeFailed`` when the notice was not taken."""

    @property
    def name(self) -> str:
        """The channel's name, as notices are queued for it."""

    def send(self, notice: Notice) -> None:
        """Sends one notice; raising leaves it to be retried."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """How often an alert is repeated, and how a notice that fails is retried."""

    repeat: timedelta = timedelta(minutes=60)
    """An alert that lasts is said again at most this often (PAYHOOKS_ALERT_REPEAT_MINUTES)."""
    retry_base: timedelta = timedelta(seconds=30)
    retry_cap: timedelta = timedelta(minutes=15)
    give_up: timedelta = timedelta(hours=24)
    """A notice no channel took for this long is given up (logged ``alert_notice_failed``)."""
    lease: timedelta = timedelta(minutes=2)
    """Longer than any one call: a notice leased is sent by its leaser alone."""

    def delay(self, attempts: int) -> timedelta:
        """The wait before attempt ``attempts + 1``: doubling from ``retry_base`` up to
        ``retry_cap``."""
        step: timedelta = self.retry_base * 2 ** min(max(0, attempts - 1), 20)
        return min(self.retry_cap, step)


@dataclass(slots=True, kw_only=True)
class Tally:
    """What one notifier pass found and did."""

    raised: int = 0
    repeated: int = 0
    resolved: int = 0
    sent: int = 0
    retried: int = 0
    failed: int = 0
    open: list[str] = field(default_factory=list)
    """The keys of the alerts found this pass."""
    unread: list[str] = field(default_factory=list)
    """The conditions whose source failed this pass (its query, its table): their alerts
    neither raised nor resolved."""
    unrecorded: list[str] = field(default_factory=list)
    """The alerts found this pass that the database refused to record (a lock held past its
    bound, a row it refused): neither raised nor sent, looked at again next pass."""

    def summary(self) -> str:
        """One line of the pass's counts."""
        return (
            f"{len(self.open)} alert(s) open: {self.raised} raised, {self.repeated} repeated, "
            f"{self.resolved} resolved; {self.sent} notice(s) sent, {self.retried} to retry, "
            f"{self.failed} given up"
        ) + (f"; {len(self.unread)} condition(s) unread" if self.unread else "")

    def trouble(self) -> str | None:
        """What a pass left undone that a person must know of (``alerts --once`` exits 1
        with it): notices not sent, conditions not read, alerts not recorded."""
        said = []
        if self.retried or self.failed:
            said.append(
                f"{self.retried + self.failed} notice(s) not sent ({self.retried} to retry, "
                f"{self.failed} given up): see the alert_notice_* log lines"
            )
        if self.unread:
            said.append(
                f"conditions that could not be read: {', '.join(self.unread)} (alert_source_failed)"
            )
        if self.unrecorded:
            said.append(
                f"alerts the database refused to record: {', '.join(self.unrecorded)} "
                "(alert_record_failed, or alert_resolve_failed for one gone)"
            )
        return "; ".join(said) or None


_RAISE = """
INSERT INTO payhooks_alerts AS a (key, condition, subject, title, body, raised_at, notified_at)
VALUES (%(key)s, %(condition)s, %(subject)s, %(title)s, %(body)s, %(now)s, %(now)s)
ON CONFLICT (key) DO UPDATE SET
    title = excluded.title, body = excluded.body, raised_at = excluded.raised_at,
    notified_at = excluded.notified_at, notices = 1, resolved_at = NULL
WHERE a.resolved_at IS NOT NULL
RETURNING 1
"""
_REPEAT = """
UPDATE payhooks_alerts SET title = %(title)s, body = %(body)s, notified_at = %(now)s,
    notices = notices + 1
WHERE key = %(key)s AND resolved_at IS NULL AND notified_at <= %(due)s
RETURNING raised_at
"""
# The keys found are many where each dispute has its alerts: matched by hash, not each open
# alert against every key found.
_GONE = """
a.resolved_at IS NULL AND a.condition = ANY(%(conditions)s)
  AND NOT EXISTS (SELECT 1 FROM unnest(%(keys)s::text[]) AS found (key) WHERE found.key = a.key)
"""
_RESOLVE = f"""
UPDATE payhooks_alerts a SET resolved_at = %(now)s
WHERE {_GONE}
RETURNING a.key, a.title, a.raised_at, a.condition
"""
# One by one, when the database refuses one of them (``Notifier._resolve``).
_GONE_KEYS = f"SELECT a.key FROM payhooks_alerts a WHERE {_GONE} ORDER BY a.key"
_RESOLVE_ONE = f"""
UPDATE payhooks_alerts a SET resolved_at = %(now)s
WHERE {_GONE} AND a.key = %(one)s
RETURNING a.key, a.title, a.raised_at, a.condition
"""
# The alerts said once that are open already: found again, they have nothing more to write.
_TOLD = """
SELECT key FROM payhooks_alerts WHERE resolved_at IS NULL AND condition = ANY(%(conditions)s)
"""
# Notices sent or given up on are kept this long (what was said, and when), then deleted a
# batch per pass: the alerts' own rows are one per condition and gateway, and stay.
KEPT = timedelta(days=30)


class Notifier:
    """Alerts from ``sources`` to ``channels``. ``tick`` is one pass: what is wrong recorded
    (``evaluate``), then the notices due sent (``send_due``)."""

    def __init__(
        self,
        channels: Sequence[Channel],
        sources: Sequence[Source],
        policy: Policy | None = None,
        *,
        stop: Callable[[], bool] = lambda: False,
    ) -> None:
        self.channels = {channel.name: channel for channel in channels}
        self.sources = list(sources)
        self.policy = policy or Policy()
        self.stop = stop

    def tick(self, conn: Connection, now: datetime, *, limit: int = 100) -> Tally:
        """One pass: the conditions evaluated, then the notices due sent."""
        tally = self.evaluate(conn, now)
        self.send_due(conn, now, limit=limit, tally=tally)
        return tally

    def evaluate(self, conn: Connection, now: datetime) -> Tally:
        """What is wrong read, then in one short transaction: each alert found raised or
        repeated, each one gone resolved, and their notices queued, by whichever notifier's
        conditional write took."""
        tally = Tally()
        found, read = self._observe(conn, now, tally)  # reads only: no transaction held over them
        tally.open = [alert.key for alert in found]
        with conn.transaction():
            told = self._told(conn)
            for alert in found:
                if alert.key not in told:
                    self._record(conn, alert, now, tally)
            self._resolve(conn, found, read, now, tally)
            outbox.prune(conn, now - KEPT)
        return tally

    @staticmethod
    def _told(conn: Connection) -> frozenset[str]:
        """The open alerts of the conditions said once (one per dispute, thousands with as
        many disputes): each found again is left alone, with no write of its own."""
        params = {"conditions": sorted(c.value for c in NOT_REPEATED)}
        return frozenset(key for (key,) in conn.execute(_TOLD, params))

    def _observe(
        self, conn: Connection, now: datetime, tally: Tally
    ) -> tuple[list[Alert], list[Source]]:
        """What each source finds, and the sources read: one that fails (its query, its
        table) is logged (``alert_source_failed``), its alerts left as they are, neither
        raised nor resolved, and the others are read."""
        found: dict[str, Alert] = {}
        read: list[Source] = []
        for source in self.sources:
            try:
                with conn.transaction():
                    for alert in observe(conn, now, [source]):
                        found.setdefault(alert.key, alert)
            except Exception as exc:
                conditions = sorted(c.value for c in source.conditions)
                failure_logged(log, "alert_source_failed", exc, conditions=conditions)
                tally.unread.extend(conditions)
                continue
            read.append(source)
        return list(found.values()), read

    def _record(self, conn: Connection, alert: Alert, now: datetime, t: Tally) -> None:
        """One alert raised or repeated under a savepoint of its own: a row the database
        refuses is logged (``alert_record_failed``) and looked at again next pass, and the
        other alerts are raised."""
        try:
            with conn.transaction():
                self._raise_or_repeat(conn, alert, now, t)
        except Exception as exc:
            failure_logged(log, "alert_record_failed", exc, alert=alert.key)
            t.unrecorded.append(alert.key)

    def _raise_or_repeat(self, conn: Connection, alert: Alert, now: datetime, t: Tally) -> None:
        fields = {
            "key": alert.key,
            "condition": alert.condition.value,
            "subject": alert.subject,
            "title": alert.title,
            "body": alert.body,
            "now": now,
        }
        if conn.execute(_RAISE, fields).fetchone() is not None:
            self._queue(conn, alert.key, NoticeKind.RAISED, alert.title, alert.body, now)
            t.raised += 1
            log.warning("alert_raised", extra={"alert": alert.key})
            return
        if alert.condition in NOT_REPEATED:
            return
        row = conn.execute(_REPEAT, {**fields, "due": now - self.policy.repeat}).fetchone()
        if row is not None:
            body = f"{alert.body}\n\nOpen since {in_utc(row[0])}."
            self._queue(conn, alert.key, NoticeKind.REPEATED, alert.title, body, now)
            t.repeated += 1

    def _resolve(
        self, conn: Connection, found: list[Alert], read: list[Source], now: datetime, t: Tally
    ) -> None:
        watched = sorted({c.value for source in read for c in source.conditions})
        keys = [alert.key for alert in found]
        params = {"now": now, "conditions": watched, "keys": keys}
        try:
            with conn.transaction():
                gone = conn.execute(_RESOLVE, params).fetchall()
        except psycopg.Error as exc:
            if not row_refused(conn, exc):
                raise
            gone = self._resolve_each(conn, params, t)
        for key, title, raised_at, condition in gone:
            t.resolved += 1
            log.info("alert_resolved", extra={"alert": key})
            if condition in RESOLVED_SILENTLY:  # what it said stays true: no notice
                continue
            lasted = max(0, round((now - raised_at).total_seconds() / 60))
            body = f"Cleared at {in_utc(now)}, after {lasted} minute(s)."
            self._queue(conn, key, NoticeKind.RESOLVED, title, body, now)

    @staticmethod
    def _resolve_each(conn: Connection, params: dict[str, Any], t: Tally) -> list[Any]:
        """The alerts gone resolved one by one, each under a savepoint: one whose row the
        database refuses (an app's trigger) stays open, logged (``alert_resolve_failed``) and
        counted unrecorded, and the others are resolved."""
        gone: list[Any] = []
        for (key,) in conn.execute(_GONE_KEYS, params).fetchall():
            try:
                with conn.transaction():
                    gone.extend(conn.execute(_RESOLVE_ONE, {**params, "one": key}).fetchall())
            except psycopg.Error as exc:
                if not row_refused(conn, exc):
                    raise
                failure_logged(log, "alert_resolve_failed", exc, alert=key)
                t.unrecorded.append(key)
        return gone

    def _queue(
        self, conn: Connection, key: str, kind: NoticeKind, title: str, body: str, now: datetime
    ) -> None:
        """One notice per channel on the outbound queue, each under a key of its own: its
        Message-ID when the channel is email."""
        for channel in sorted(self.channels):
            notice = outbox.Message(
                kind=kind,
                dedupe_key=f"alert:{key}:{kind.value}:{channel}:{now.isoformat()}",
                channel=channel,
                alert_key=key,
                subject=f"{_PREFIXES[kind]}: {title}",
                body=body,
            )
            outbox.enqueue(conn, notice, now=now)

    def send_due(
        self, conn: Connection, now: datetime, *, limit: int = 100, tally: Tally | None = None
    ) -> Tally:
        """Up to ``limit`` notices due, each on its channel; a channel that fails is left
        alone for the rest of this pass."""
        tally = tally if tally is not None else Tally()
        working = sorted(self.channels)
        for _ in range(limit):
            if not working or self.stop():
                break
            found = outbox.lease_next(conn, now, now + self.policy.lease, working)
            if found is None:
                break
            notice = self._read(conn, found, now, tally)
            if notice is not None and not self._send(conn, notice, now, tally):
                working.remove(notice.channel)
        return tally

    def _read(
        self, conn: Connection, found: outbox.Pending, now: datetime, tally: Tally
    ) -> Notice | None:
        """The notice leased; None for one this release cannot read (a kind a newer release
        queued before a rollback): it is backed off by itself, saying why, and given up past
        ``Policy.give_up``, so it never ends the pass for the notices after it."""
        try:
            return _notice(found)
        except ValueError as exc:
            fields: dict[str, object] = {"notice": found.id, "alert": found.alert_key,
                                         "channel": found.channel}  # fmt: skip
            reason = f"this release cannot read it: {_reason(exc)}"
            log.error("alert_notice_unreadable", extra={**fields, "error": reason})
            held = _Held(id=found.id, attempts=found.attempts + 1, created_at=found.created_at)
            self._failed(conn, held, NoticeFailed(found.channel, reason), now, tally, fields)
            return None

    def _send(self, conn: Connection, notice: Notice, now: datetime, tally: Tally) -> bool:
        """Whether the channel took it."""
        fields = {"notice": notice.id, "alert": notice.alert_key, "channel": notice.channel}
        try:
            self.channels[notice.channel].send(notice)
        except NoticeFailed as exc:
            self._failed(conn, notice, exc, now, tally, fields)
            return False
        except Exception as exc:  # this notice's: a channel's bug, a text it cannot take
            self._broke(conn, notice, exc, now, tally, fields)
            return True
        try:
            with conn.transaction():
                outbox.mark_sent(conn, notice.id, now=now)
        except Exception as exc:  # its row refused: it is said again after its backoff
            self._broke(conn, notice, exc, now, tally, fields)
            return True
        tally.sent += 1
        log.info("alert_notice_sent", extra=fields)
        return True

    def _failed(
        self,
        conn: Connection,
        notice: Notice | _Held,
        exc: NoticeFailed,
        now: datetime,
        tally: Tally,
        fields: dict[str, object],
    ) -> None:
        """The notice backed off after ``exc`` (given up past ``Policy.give_up``, or when the
        failure is permanent). A row the database refuses even that is left to its lease: the
        other notices and channels go on."""
        error = exc.reason
        try:
            with conn.transaction():
                if exc.permanent or now - notice.created_at >= self.policy.give_up:
                    outbox.give_up(conn, notice.id, error, now=now)
                    tally.failed += 1
                    log.error("alert_notice_failed", extra={**fields, "error": error})
                    return
                delay = self.policy.delay(notice.attempts).total_seconds()
                outbox.retry_later(conn, notice.id, error, delay, now=now)
        except Exception:
            log.exception("alert_notice_unrecorded", extra=fields)
            tally.retried += 1  # not sent, and said again once its lease ends
            return
        tally.retried += 1
        log.warning("alert_notice_retry", extra={**fields, "error": error})

    def _broke(
        self,
        conn: Connection,
        notice: Notice,
        exc: Exception,
        now: datetime,
        tally: Tally,
        fields: dict[str, object],
    ) -> None:
        """Anything but the channel's own failure, raised by one notice: recorded on it and
        backed off like a failed send (given up past ``Policy.give_up``), the channel kept
        for the others. A row the database refuses even that is left to its lease."""
        reason = failure_logged(log, "alert_notice_broken", exc, **fields)
        self._failed(conn, notice, NoticeFailed(notice.channel, reason), now, tally, fields)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Held:
    """What backing off a leased notice needs of it, when it cannot be read as a ``Notice``."""

    id: int
    attempts: int
    created_at: datetime


def _notice(found: outbox.Pending) -> Notice:
    """A leased row as the notice it is; ``ValueError`` for a kind this release does not
    know, or a row that speaks for no alert."""
    if found.alert_key is None:
        raise ValueError("a notice that names no alert")
    return Notice(
        id=found.id,
        alert_key=found.alert_key,
        kind=NoticeKind(found.kind),
        channel=found.channel,
        title=found.subject,
        body=found.body,
        attempts=found.attempts + 1,
        created_at=found.created_at,
        dedupe_key=found.dedupe_key,
    )


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A chat endpoint that redirects is answered as a failure, never followed: urllib would
    follow a POST's redirect as a GET, without the message."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Webhook:
    """A chat tool's incoming webhook: one POST of ``{"text": ...}``, the shape Slack, Google
    Chat, Mattermost, Rocket.Chat, Discord (its ``/slack`` address) and a Teams workflow that
    posts the body's ``text`` all take (docs/operations.md, "Alerts"). The URL holds the
    chat's secret: it is never logged or put in an error."""

    url: str
    timeout_s: float = 5.0
    name: str = "webhook"

    def send(self, notice: Notice) -> None:
        """Posts the notice as ``{"text": ...}``; a redirect (never followed), an
        error answer or no answer is ``NoticeFailed``, permanent for a 4xx but 408 and 429."""
        request = urllib.request.Request(
            self.url,
            data=json.dumps({"text": notice.text}).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "payhooks-notifier"},
            method="POST",
        )
        opener = urllib.request.build_opener(_NoRedirects)
        try:
            with opener.open(request, timeout=self.timeout_s) as answer:
                answer.read(4096)
        except urllib.error.HTTPError as exc:
            permanent = exc.code < 500 and exc.code not in (408, 429)  # 3xx: not followed
            raise NoticeFailed(self.name, f"answered {exc.code}", permanent=permanent) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            # refused, reset, timed out; or an answer that is not HTTP (a junk status line, a
            # body cut short), which http.client raises as its own, not an OSError
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise NoticeFailed(self.name, f"unreachable: {_described(reason)}") from None


def _described(reason: object) -> str:
    """The kind of failure, never the socket's whole text (it may quote the address)."""
    if isinstance(reason, OSError) and reason.strerror:
        return f"{type(reason).__name__}: {reason.strerror}"
    return type(reason).__name__ if isinstance(reason, BaseException) else str(reason)


__all__ = ["Channel", "Notice", "NoticeKind", "Notifier", "Policy", "Tally", "Webhook"]

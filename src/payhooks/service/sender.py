"""Sending the shop's messages on the outbound queue (``payhooks.operations.outbox``): each due
one performed after commit, under a row lock.

Each message is taken under a row lock that other workers skip (``FOR UPDATE SKIP LOCKED``),
sent, and marked sent in the same transaction. The one unavoidable at-least-once window: the
SMTP server accepts the message and the worker dies before its commit; the row is then sent
again, with the same Message-ID, so the receiving side can drop the repeat. Whatever fails
while building or sending one message counts against that message alone.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field
from email.message import EmailMessage

import psycopg_pool

from payhooks.plumbing import db
from payhooks.service import database, outbox
from payhooks.service.config import Settings
from payhooks.service.errors import MailerUnavailable, MessageRejected, RelayRefused
from payhooks.service.mail import Mailer, SmtpTarget, compose

log = logging.getLogger("payhooks.service.worker")

# A message still unsent and not given up, locked: its attempts as they are now.
_STILL = """
SELECT attempts FROM payhooks_outbox WHERE id = %s AND sent_at IS NULL AND failed_at IS NULL
FOR UPDATE
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """What one message came to: whether the server answered it itself (sent it, or refused
    it for a reason of its own: it relays for that recipient), or refused its recipient for
    relaying before any answer (the message, and why)."""

    answered: bool = False
    relaying: tuple[outbox.Pending, RelayRefused] | None = None


@dataclass(slots=True)
class Sender:
    """The shop's messages on the outbound queue, sent over SMTP (PAYHOOKS_SMTP_URL)."""

    pool: psycopg_pool.ConnectionPool
    settings: Settings
    _: KW_ONLY
    batch: int
    policy: outbox.RetryPolicy
    jitter: Callable[[], float]
    stopping: threading.Event
    target: SmtpTarget = field(init=False)
    unavailable: bool = field(init=False, default=False)
    """Whether the last ``drain`` found the SMTP server unavailable."""

    def __post_init__(self) -> None:
        if not self.settings.smtp_url:
            raise MailerUnavailable("PAYHOOKS_SMTP_URL is not set: nowhere to send")
        self.target = SmtpTarget.from_url(self.settings.smtp_url)
        if self.settings.alert_email is None:
            log.warning("alert_email_not_set", extra={"effect": "every alert is dead-lettered"})

    def drain(self) -> int:
        """Perform up to one batch of due messages over one SMTP session; returns how many.

        A recipient refused for relaying may be that recipient's domain alone or every one
        (no login): the server answering another message in this drain (sending it, or
        refusing it for a reason of its own) says it is the recipient's, which then counts
        against its message. Before any answer, the refused message goes to the back of the
        queue, uncounted, and the next is tried; a second refused before any answer is the
        server's, for every message, and the queue waits as for any server unavailable."""
        handled, self.unavailable = 0, False
        relays_others = False  # the server answered a message of this drain itself
        refused: list[tuple[outbox.Pending, RelayRefused]] = []  # before any answer
        with Mailer(self.target) as mailer:
            while handled < self.batch and not self.stopping.is_set():
                try:
                    turn = self.perform_one(mailer, relays_others=relays_others)
                except MailerUnavailable as exc:
                    self._unavailable(exc)
                    break
                if turn is None:
                    break
                if turn.relaying is not None:
                    if refused:  # a second refusal before any answer: the server's
                        self._unavailable(turn.relaying[1])
                        break
                    refused.append(turn.relaying)
                    continue
                if turn.answered and not relays_others:
                    relays_others = True
                    self._counted(refused)
                    refused.clear()
                handled += 1
        return handled

    def _unavailable(self, exc: MailerUnavailable) -> None:
        self.unavailable = True
        log.warning("smtp_unavailable", extra={"error": str(exc)})

    def _counted(self, refused: Iterable[tuple[outbox.Pending, RelayRefused]]) -> None:
        """Each message refused for relaying before the server answered another: its own
        refusal, counted as a temporary one, unless another worker counted or sent it since
        (its row read again under its lock)."""
        for message, exc in refused:
            with database.connection(self.pool) as conn, conn.transaction():
                now = conn.execute(_STILL, (message.id,)).fetchone()
                if now is None or now[0] != message.attempts:
                    continue
                fields = {"outbox_id": message.id, "dedupe_key": message.dedupe_key}
                self._rejected(conn, message, MessageRejected(str(exc), permanent=False), fields)

    def perform_one(self, mailer: Mailer, *, relays_others: bool = False) -> Turn | None:
        """Send the next due message: what it came to, None when none is due. SMTP down:
        leaves it queued (``MailerUnavailable``). Its recipient refused for relaying before
        the server answered another message of the drain (``relays_others``): it goes to the
        back of the queue, uncounted, for ``drain`` to tell whose refusal that is."""
        message: outbox.Pending | None = None
        turn = Turn()
        with database.connection(self.pool) as conn:
            try:
                with conn.transaction():
                    message = outbox.next_due(conn)
                    if message is None:
                        return None
                    turn = self._perform(conn, mailer, message, relays_others=relays_others)
            except MailerUnavailable:
                raise
            except Exception as exc:  # leasing is the database's; anything after, this row's
                if message is None:
                    raise
                self._broke(conn, message, exc)
        return turn

    def _broke(self, conn: db.Connection, message: outbox.Pending, exc: Exception) -> None:
        """One message whose step failed (its row refused by the database, anything raised
        while sending it): retried with backoff like a temporary rejection, dead-lettered
        after the last attempt (the dead-letter alert); the batch goes on. The server may
        have taken it: sent again, under the same Message-ID."""
        fields = {"outbox_id": message.id, "dedupe_key": message.dedupe_key}
        log.exception("outbox_step_failed", extra={**fields, "error": _describe(exc)})
        failed = MessageRejected(f"could not be sent: {_describe(exc)}"[:500], permanent=False)
        try:
            with conn.transaction():
                self._rejected(conn, message, failed, fields)
        except Exception:  # the database away: the row stays due and is tried again
            log.exception("outbox_attempt_unrecorded", extra=fields)

    def _perform(
        self, conn: db.Connection, mailer: Mailer, message: outbox.Pending, *, relays_others: bool
    ) -> Turn:
        fields = {"outbox_id": message.id, "dedupe_key": message.dedupe_key}
        if message.kind == outbox.MessageKind.EMAIL and not message.recipient:
            # Never the operators' address: a customer's email in their inbox.
            self._dead_letter(conn, message, "an email that names no recipient", fields)
            return Turn()
        recipient = message.recipient or self.settings.alert_email
        if recipient is None:
            outbox.dead_letter(conn, message.id, "PAYHOOKS_ALERT_EMAIL is not set")
            log.error("outbox_dead_letter", extra={**fields, "error": "no alert address"})
            return Turn()
        try:
            email = self._compose(message, recipient)
        except Exception as exc:  # whatever this one row holds, it is this row's problem
            self._dead_letter(conn, message, f"cannot build the email: {_describe(exc)}", fields)
            return Turn()
        try:
            mailer.send(email)
        except RelayRefused as exc:
            if not relays_others:  # the drain tells whose refusal it is
                outbox.to_the_back(conn, message.id, str(exc))
                return Turn(relaying=(message, exc))
            self._rejected(conn, message, MessageRejected(str(exc), permanent=False), fields)
            return Turn()
        except MessageRejected as exc:
            self._rejected(conn, message, exc, fields)
            return Turn(answered=True)
        outbox.mark_sent(conn, message.id)
        log.info("outbox_sent", extra=fields)
        return Turn(answered=True)

    def _compose(self, message: outbox.Pending, recipient: str) -> EmailMessage:
        return compose(
            sender=self.settings.mail_from,
            recipient=recipient,
            subject=message.subject,
            body=message.body,
            dedupe_key=message.dedupe_key,
        )

    def _dead_letter(
        self, conn: db.Connection, message: outbox.Pending, reason: str, fields: dict[str, object]
    ) -> None:
        outbox.dead_letter(conn, message.id, reason)
        log.error("outbox_dead_letter", extra={**fields, "error": reason})

    def _rejected(
        self,
        conn: db.Connection,
        message: outbox.Pending,
        exc: MessageRejected,
        fields: dict[str, object],
    ) -> None:
        policy = self.policy
        if exc.permanent or message.attempts + 1 >= policy.max_attempts:
            self._dead_letter(conn, message, str(exc), fields)
            return
        delay = policy.delay(message.attempts + 1, self.jitter())
        outbox.retry_later(conn, message.id, str(exc), delay)
        log.warning("outbox_retry", extra={**fields, "error": str(exc), "delay_s": round(delay, 1)})


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

"""The notifier as the reference service and ``payhooks alerts`` run it (docs/operations.md,
"Alerts"): the core's conditions, the shop's own (emails dead-lettered, payments to refund),
email through the SMTP server the outbox uses, and the chat webhook."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.operations.alarms import in_utc
from payhooks.operations.alerts import Alert, Condition, Source, core_sources
from payhooks.operations.notifier import Channel, Notice, Notifier, Policy, Webhook
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import NoticeFailed
from payhooks.service.config import Settings
from payhooks.service.errors import MailerUnavailable, MessageRejected
from payhooks.service.mail import Mailer, SmtpTarget, compose
from payhooks.service.shop import authorised, double_refunds

# An SMTP server slow to answer is waited for this long per notice; the outbox's own sender
# waits longer (a reply to DATA may come late), but an alert must not hold its thread.
EMAIL_TIMEOUT_S = 20.0
WEBHOOK_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Email:
    """One message per notice to PAYHOOKS_ALERT_EMAIL, from PAYHOOKS_MAIL_FROM, its
    Message-ID stable across retries so the mail system can drop a repeat."""

    target: SmtpTarget
    sender: str
    recipient: str
    timeout_s: float = EMAIL_TIMEOUT_S
    name: str = "email"

    def send(self, notice: Notice) -> None:
        message = compose(
            sender=self.sender,
            recipient=self.recipient,
            subject=notice.title,
            body=notice.body,
            dedupe_key=notice.message_key,
        )
        try:
            with Mailer(self.target, timeout=self.timeout_s) as mailer:
                mailer.send(message)
        except MailerUnavailable as exc:
            raise NoticeFailed(self.name, str(exc)) from exc
        except MessageRejected as exc:
            raise NoticeFailed(self.name, exc.reason, permanent=exc.permanent) from exc


_DEAD_LETTERS = """
SELECT count(*), min(failed_at) FROM payhooks_outbox
WHERE failed_at IS NOT NULL AND alert_key IS NULL
"""
_TO_REFUND = """
SELECT provider, count(*) FROM payments WHERE needs_refund GROUP BY 1 ORDER BY 1
"""


def dead_letters(conn: Connection, now: datetime) -> list[Alert]:
    count, oldest = conn.execute(_DEAD_LETTERS).fetchone() or (0, None)
    if not count:
        return []
    return [
        Alert(
            condition=Condition.DEAD_LETTERS,
            subject="outbox",
            title=f"{count} email(s) dead-lettered",
            body=(
                f"{count} email(s) were given up on (the oldest at {in_utc(oldest)}): a "
                "customer's confirmation or an alert nobody received. See why with "
                "`payhooks outbox --failed`; queue them again with `payhooks outbox --retry ID` "
                "or `--retry-all` once the cause is fixed."
            ),
        )
    ]


def refunds_needed(conn: Connection, now: datetime) -> list[Alert]:
    given_up = double_refunds.given_up(conn)
    return [
        Alert(
            condition=Condition.REFUNDS_NEEDED,
            subject=provider,
            title=f"{provider}: {count} payment(s) to refund",
            body=(
                f"{count} {provider} payment(s) are marked as needing a refund (a cart paid "
                "twice, an amount not what was asked). With PAYHOOKS_REFUND_DOUBLE_PAYMENTS "
                "on, the worker refunds double payments itself; the others need a person. "
                f"{_given_up(given_up.get(provider, 0))}`payhooks trace ID` shows each."
            ),
        )
        for provider, count in conn.execute(_TO_REFUND).fetchall()
    ]


# The payments the worker still asks about (``authorised.ATTEMPTED_WINDOW``): past it, it asks
# no more, and the authorisation lapses at the gateway.
_CAPTURES_FAILING = """
SELECT provider, count(*), min(capture_error) FROM payments
WHERE provider = ANY(%s) AND status = 'authorized' AND capture_attempts >= %s
  AND created_at > now() - %s
GROUP BY provider ORDER BY provider
"""


def captures_failing(conn: Connection, now: datetime) -> list[Alert]:
    capturing = [p.value for p, found in GATEWAYS.items() if found.captures_authorized]
    bounds = (capturing, authorised.ALERTED_AFTER, authorised.ATTEMPTED_WINDOW)
    rows = conn.execute(_CAPTURES_FAILING, bounds).fetchall()
    return [_capture_alert(provider, count, error) for provider, count, error in rows]


def _capture_alert(provider: str, count: int, error: str | None) -> Alert:
    title = GATEWAYS[Provider(provider)].title
    return Alert(
        condition=Condition.CAPTURES_FAILING,
        subject=provider,
        title=f"{provider}: {count} authorised payment(s) failing to be captured",
        body=(
            f"The worker failed {authorised.ALERTED_AFTER} times or more to capture and "
            f"apply {count} authorised {title} payment(s) (one error: {error}). It keeps "
            "asking, backed off to once an hour, until "
            f"{authorised.ATTEMPTED_WINDOW.days} days after each was authorised. "
            "`payhooks trace ID` shows each; capture "
            f"one in {title}'s dashboard, or leave it to lapse and be refunded by {title}."
        ),
    )


def _given_up(count: int) -> str:
    if not count:
        return ""
    return (
        f"{count} of them refused or failed {double_refunds.TRIES} times when the worker "
        "asked: refund those by hand (the console's Refund button, or the gateway's "
        "dashboard). "
    )


def shop_sources() -> list[Source]:
    """The reference shop's own conditions, on top of the core's."""
    return [
        Source(conditions=frozenset({Condition.DEAD_LETTERS}), observe=dead_letters),
        Source(conditions=frozenset({Condition.REFUNDS_NEEDED}), observe=refunds_needed),
        Source(conditions=frozenset({Condition.CAPTURES_FAILING}), observe=captures_failing),
    ]


def channels(settings: Settings) -> list[Channel]:
    """Email when an SMTP server and an alert address are set, the chat webhook when its URL
    is: either, both, or none (then no alert leaves the console)."""
    found: list[Channel] = []
    if settings.smtp_url and settings.alert_email:
        target = SmtpTarget.from_url(settings.smtp_url)
        found.append(
            Email(target=target, sender=settings.mail_from, recipient=settings.alert_email)
        )
    if settings.alert_webhook_url:
        found.append(Webhook(url=settings.alert_webhook_url, timeout_s=WEBHOOK_TIMEOUT_S))
    return found


def notifier(
    settings: Settings, *, shop: bool, stop: Callable[[], bool] = lambda: False
) -> Notifier:
    """The service's notifier (``shop``: the reference shop's conditions too), or a merchant
    app's (the core's alone)."""
    sources = core_sources(
        after=timedelta(seconds=settings.reconcile_after_s),
        window=timedelta(seconds=settings.reconcile_window_s),
        dispute_warning=timedelta(hours=settings.dispute_warning_hours),
    )
    if shop:
        sources += shop_sources()
    policy = Policy(repeat=timedelta(minutes=settings.alert_repeat_minutes))
    return Notifier(channels(settings), sources, policy, stop=stop)


__all__ = [
    "Email",
    "captures_failing",
    "channels",
    "dead_letters",
    "notifier",
    "refunds_needed",
    "shop_sources",
]

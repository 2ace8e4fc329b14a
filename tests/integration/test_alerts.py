"""The notifier on real PostgreSQL, posting to a real HTTP receiver over a loopback socket and
emailing through a real SMTP server: each alert once however many notifiers look, repeated at
most every interval, resolved once, and a failing channel retried without holding back the
others or losing the alert. Time is the clock argument; nothing here sleeps for minutes."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.operations.alarms import FAILURES_TO_WARN
from payhooks.operations.alerts import (
    PARKED_WAIT,
    RECONCILE_GRACE,
    REFUND_UNSENT,
    REFUND_UNSETTLED,
    Condition,
    core_sources,
)
from payhooks.operations.notifier import Notifier, Policy, Webhook
from payhooks.service import alerting
from payhooks.service.mail import SmtpTarget
from tests.conftest import released_together
from tests.factories import SETTINGS

T0 = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
EVERY = timedelta(seconds=60)  # the worker looks at what is wrong once a minute


@dataclass
class Receiver:
    """A chat tool's incoming webhook on loopback: answers ``statuses`` in turn (then 200),
    and holds the first ``hang`` requests for ``hang_s`` seconds before answering."""

    statuses: list[int] = field(default_factory=list)
    hang: int = 0
    hang_s: float = 3.0
    received: list[dict[str, object]] = field(default_factory=list)
    requests: int = 0
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)

    def texts(self) -> list[str]:
        with self.lock:
            return [str(body["text"]) for body in self.received]


@contextmanager
def receiving(receiver: Receiver) -> Iterator[Receiver]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            with receiver.lock:
                receiver.requests += 1
                hang = receiver.requests <= receiver.hang
                status = receiver.statuses.pop(0) if receiver.statuses else 200
            if hang:
                receiver.released.wait(receiver.hang_s)
                status = 200
            if status == 200 and not hang:
                with receiver.lock:
                    receiver.received.append(json.loads(body))
            try:
                self.send_response(status)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
            except OSError:  # the notifier gave up waiting and closed
                pass

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/T000/B000/secret"
    try:
        yield receiver
    finally:
        receiver.released.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def chat() -> Iterator[Receiver]:
    with receiving(Receiver()) as receiver:
        yield receiver


PATIENT_S = 10.0
"""A chat endpoint's timeout where none is meant to run out: on a loaded two-core machine the
test's own receiver can take over a second to answer."""


def webhook_notifier(url: str, **policy: object) -> Notifier:
    return Notifier([Webhook(url=url, timeout_s=PATIENT_S)], core_sources(), Policy(**policy))


OUTCOMES = {200: "processed", 401: "signature_mismatch"}
"""What the delivery log files an answer under: a 401 is a signature refused, the rest here
the database away."""


def answered(conn, provider: str, status: int, at: datetime, count: int = 1) -> None:
    outcome = OUTCOMES.get(status, "database_unavailable")
    for n in range(count):
        conn.execute(
            "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
            " body_bytes, duration_ms) VALUES (%s, %s, %s, %s, true, 300, 1)",
            (at + timedelta(seconds=n), provider, status, outcome),
        )


DJANGO_TWINS = frozenset(
    {"confirm", "parked", "purge", "reconcile", "replay", "resolve", "settlements"}
)
"""The ``payhooks`` commands a Django app runs as ``manage.py payhooks_<name>``."""


def says_djangos_too(text: str) -> None:
    """An alert naming a command names Django's beside it (docs/django.md, "Alerts by email
    and chat"), and beside the console, Django's admin: a Django app has neither the command's
    database settings nor the console."""
    named = re.findall(r"`payhooks (\w+)([^`]*)`", text)
    assert named, text
    for command, rest in named:
        if command in DJANGO_TWINS:
            head = rest.split(" KEY")[0].split(" --hooks")[0]
            assert f"`manage.py payhooks_{command}{head}" in text, (command, text)
    if "console" in text:
        assert "admin" in text, text


def notices(conn) -> list[tuple[str, str, str, bool]]:
    return conn.execute(
        "SELECT alert_key, kind, channel, sent_at IS NOT NULL FROM payhooks_outbox ORDER BY id"
    ).fetchall()


def test_a_gateway_answering_5xx_is_posted_to_chat_at_the_first_look_after_its_third_failure(
    conn, chat
):
    notifier = webhook_notifier(chat.url)
    failures = [T0 + timedelta(seconds=s) for s in (5, 50, 95)]  # a gateway's quick retries
    looks = [T0 + EVERY * n for n in range(1, 4)]
    for at in failures[: FAILURES_TO_WARN - 1]:
        answered(conn, "razorpay", 503, at)
    assert notifier.tick(conn, looks[0]).sent == 0  # two failures: not yet an alert
    answered(conn, "razorpay", 503, failures[-1])
    first_after = next(look for look in looks if look >= failures[-1])
    assert first_after - failures[-1] <= EVERY
    tally = notifier.tick(conn, first_after)
    assert (tally.raised, tally.sent) == (1, 1)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: razorpay: webhook deliveries answered 5xx")
    assert "3 of 3 deliveries in the last hour were answered 5xx" in text


def test_two_notifiers_looking_at_once_send_an_alert_once(conn, database_url, chat):
    answered(conn, "cashfree", 500, T0, count=FAILURES_TO_WARN)
    now = T0 + EVERY

    @contextmanager
    def connected(_: int) -> Iterator[psycopg.Connection]:
        with psycopg.connect(database_url, autocommit=True) as own:
            yield own

    tallies = released_together(
        list(range(4)), connected, lambda c, _: webhook_notifier(chat.url).evaluate(c, now)
    )
    assert sum(t.raised for t in tallies) == 1
    assert notices(conn) == [("failing:cashfree", "raised", "webhook", False)]
    assert webhook_notifier(chat.url).send_due(conn, now).sent == 1
    assert len(chat.texts()) == 1


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_a_lasting_alert_is_said_again_only_once_the_repeat_interval_has_passed(conn, chat, zone):
    """Its times in UTC whatever the session's zone (India's: it was written 5h30 off)."""
    conn.execute("SELECT set_config('TimeZone', %s, false)", (zone,))
    answered(conn, "payu", 502, T0, count=FAILURES_TO_WARN)
    notifier = webhook_notifier(chat.url, repeat=timedelta(minutes=30))
    assert notifier.tick(conn, T0 + timedelta(minutes=1)).raised == 1
    for minutes in (2, 15, 30):  # still failing, not yet 30 minutes since it was said
        answered(conn, "payu", 502, T0 + timedelta(minutes=minutes - 1), count=FAILURES_TO_WARN)
        assert notifier.tick(conn, T0 + timedelta(minutes=minutes)).sent == 0
    tally = notifier.tick(conn, T0 + timedelta(minutes=31))
    assert (tally.repeated, tally.sent) == (1, 1)
    assert notifier.tick(conn, T0 + timedelta(minutes=32)).sent == 0
    raised, repeated = chat.texts()
    assert raised.startswith("[payhooks] ALERT: payu")
    assert repeated.startswith("[payhooks] STILL: payu")
    assert "Open since 2026-12-03 09:01 UTC" in repeated


def test_an_alert_that_clears_is_said_resolved_once(conn, chat):
    answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
    notifier = webhook_notifier(chat.url)
    notifier.tick(conn, T0 + timedelta(minutes=1))
    answered(conn, "razorpay", 200, T0 + timedelta(minutes=2), count=200)  # healthy again
    later = T0 + timedelta(hours=1, minutes=5)  # the failures have left the last hour
    tally = notifier.tick(conn, later)
    assert (tally.resolved, tally.sent) == (1, 1)
    assert notifier.tick(conn, later + EVERY).sent == 0
    resolved = chat.texts()[-1]
    assert resolved.startswith("[payhooks] RESOLVED: razorpay: webhook deliveries answered 5xx")
    assert "after 64 minute(s)" in resolved


def test_an_alert_back_after_it_cleared_is_raised_again(conn, chat):
    notifier = webhook_notifier(chat.url)
    answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
    notifier.tick(conn, T0 + EVERY)
    notifier.tick(conn, T0 + timedelta(hours=2))  # resolved
    answered(conn, "razorpay", 503, T0 + timedelta(hours=2), count=FAILURES_TO_WARN)
    assert notifier.tick(conn, T0 + timedelta(hours=2) + EVERY).raised == 1
    assert [t.split(":")[0] for t in chat.texts()] == [
        "[payhooks] ALERT",
        "[payhooks] RESOLVED",
        "[payhooks] ALERT",
    ]


def test_a_chat_endpoint_answering_5xx_is_asked_again_later_and_the_alert_arrives(conn):
    with receiving(Receiver(statuses=[503, 500])) as chat:
        answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
        notifier = webhook_notifier(chat.url)
        now = T0 + EVERY
        assert notifier.tick(conn, now).retried == 1
        assert notifier.send_due(conn, now + timedelta(seconds=29)).sent == 0  # not yet due
        assert notifier.send_due(conn, now + timedelta(seconds=30)).retried == 1
        assert notifier.send_due(conn, now + timedelta(seconds=90)).sent == 1
        [text] = chat.texts()
        assert "razorpay" in text
        [(attempts, error)] = conn.execute(
            "SELECT attempts, last_error FROM payhooks_outbox"
        ).fetchall()
        assert (attempts, error) == (3, None)


def emailing(port: int) -> alerting.Email:
    """The email channel, to the tests' SMTP server on ``port``."""
    return alerting.Email(
        target=SmtpTarget.from_url(f"smtp://127.0.0.1:{port}"),
        sender="payhooks@example.com",
        recipient="ops@example.com",
    )


def test_a_chat_endpoint_that_hangs_costs_one_timeout_a_pass_and_email_still_goes(conn, inbox):
    box, port = inbox
    with receiving(Receiver(hang=1)) as chat:
        for provider in ("razorpay", "cashfree"):
            answered(conn, provider, 503, T0, count=FAILURES_TO_WARN)
        email = emailing(port)
        notifier = Notifier([email, Webhook(url=chat.url, timeout_s=0.3)], core_sources())
        tally = notifier.tick(conn, T0 + EVERY)
        assert (tally.raised, tally.sent, tally.retried) == (2, 2, 1)
        assert chat.requests == 1  # the second chat notice waits for the next pass
        subjects = sorted(m["Subject"] for m in box.messages)
        assert subjects == [
            "[payhooks] ALERT: cashfree: webhook deliveries answered 5xx",
            "[payhooks] ALERT: razorpay: webhook deliveries answered 5xx",
        ]
        [error] = conn.execute(
            "SELECT last_error FROM payhooks_outbox WHERE last_error IS NOT NULL"
        ).fetchone() or [None]
        assert error == "unreachable: TimeoutError"
        chat.released.set()
        assert notifier.send_due(conn, T0 + EVERY * 3).sent == 2
        assert len(chat.texts()) == 2


def test_a_chat_endpoint_refusing_the_address_is_given_up_at_once(conn):
    with receiving(Receiver(statuses=[404])) as chat:
        answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
        tally = webhook_notifier(chat.url).tick(conn, T0 + EVERY)
        assert (tally.sent, tally.retried, tally.failed) == (0, 0, 1)
        [(error, failed)] = conn.execute(
            "SELECT last_error, failed_at IS NOT NULL FROM payhooks_outbox"
        ).fetchall()
        assert (error, failed) == ("answered 404", True)


def test_a_notice_no_channel_took_for_a_day_is_given_up(conn):
    with receiving(Receiver(statuses=[503] * 100)) as chat:
        answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
        notifier = webhook_notifier(chat.url)
        notifier.tick(conn, T0 + EVERY)
        assert notifier.send_due(conn, T0 + timedelta(hours=12)).retried == 1
        assert notifier.send_due(conn, T0 + timedelta(hours=25)).failed == 1


def test_a_failing_chat_endpoint_is_recorded_and_logged_without_its_url(conn, caplog):
    with receiving(Receiver(statuses=[503])) as chat:
        answered(conn, "razorpay", 401, T0, count=10)
        caplog.set_level("DEBUG", logger="payhooks.notifier")
        assert webhook_notifier(chat.url).tick(conn, T0 + EVERY).retried == 1
        [error] = conn.execute("SELECT last_error FROM payhooks_outbox").fetchone() or []
        assert error == "answered 503"
        logged = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
        assert "alert_notice_retry" in logged and "/hooks/" not in logged


def test_deliveries_parked_for_a_while_are_alerted_by_gateway(conn, chat):
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
        " payload_sha256, body, processed_at) VALUES"
        " ('payu', 'e1', 'payment.captured', 'parked', 'x1', '', %s),"
        " ('payu', 'e2', 'payment.captured', 'parked', 'x2', '', %s)",
        (T0, T0 + PARKED_WAIT),
    )
    notifier = webhook_notifier(chat.url)
    assert notifier.tick(conn, T0 + PARKED_WAIT - timedelta(seconds=1)).raised == 0
    notifier.tick(conn, T0 + PARKED_WAIT + EVERY)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: payu: 1 parked delivery waiting")
    says_djangos_too(text)


def test_checkouts_never_asked_about_say_reconciliation_is_not_running(conn, chat):
    conn.execute(
        "INSERT INTO payhooks_expectations (provider, gateway_order_id, amount_paise, currency,"
        " reference, created_at) VALUES ('cashfree', 'order_1', 100, 'INR', 'cart_1', %s)",
        (T0,),
    )
    notifier = webhook_notifier(chat.url)
    due = T0 + timedelta(seconds=900)  # PAYHOOKS_RECONCILE_AFTER_S's default
    assert notifier.tick(conn, due + RECONCILE_GRACE - timedelta(seconds=1)).raised == 0
    notifier.tick(conn, due + RECONCILE_GRACE + EVERY)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: cashfree: reconciliation is not running")
    says_djangos_too(text)


def test_credentials_refused_by_a_gateway_are_alerted(conn, chat):
    conn.execute(
        "INSERT INTO payhooks_reconcile_totals (provider, refused_since, refused_reason)"
        " VALUES ('razorpay', %s, '401 Unauthorized')",
        (T0,),
    )
    webhook_notifier(chat.url).tick(conn, T0 + EVERY)
    [text] = chat.texts()
    assert "razorpay: reconciliation's API credentials refused" in text
    assert "401 Unauthorized" in text


def test_refunds_refused_at_the_gateway_are_alerted(conn, chat):
    conn.execute(
        "INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id, amount_paise,"
        " currency, captured_paise, reason, requested_by, state, last_error, requested_at,"
        " settled_at) VALUES ('razorpay', 'k1', 'pay_1', 100, 'INR', 100, 'double', 'ops',"
        " 'refused', 'BAD_REQUEST_ERROR', %s, %s)",
        (T0, T0),
    )
    webhook_notifier(chat.url).tick(conn, T0 + EVERY)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: razorpay: refunds not going through")
    assert "1 refused or failed at razorpay in the last day" in text
    # A refusal may say the money went back already ("fully refunded already"): the person
    # told is sent to its words, never told to refund it another way regardless.
    assert "must be refunded another way" not in text
    assert "last_error" in text and "if the money is still owed" in text


def refund_intent(conn, key: str, state: str, at: datetime) -> None:
    conn.execute(
        "INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id, amount_paise,"
        " currency, captured_paise, reason, requested_by, state, requested_at, sent_at)"
        " VALUES ('cashfree', %s, 'pay_1', 100, 'INR', 100, 'double', 'ops', %s, %s,"
        " CASE WHEN %s = 'sent' THEN %s END)",
        (key, state, at, state, at),
    )


def test_refunds_not_settled_within_their_bound_are_alerted(conn, chat):
    """No error seen, yet not settled: an intent never sent (no sender runs) past
    ``REFUND_UNSENT``, and one the gateway accepted and never settled past
    ``REFUND_UNSETTLED``; those within their bounds say nothing."""
    refund_intent(conn, "k-unsent", "requested", T0 - REFUND_UNSENT - EVERY)
    refund_intent(conn, "k-unsettled", "sent", T0 - REFUND_UNSETTLED - EVERY)
    refund_intent(conn, "k-new", "requested", T0 - EVERY)
    refund_intent(conn, "k-pending", "sent", T0 - REFUND_UNSETTLED + timedelta(days=1))
    webhook_notifier(chat.url).tick(conn, T0)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: cashfree: refunds not going through")
    assert "1 not sent within 1 hour(s)" in text
    assert "1 not settled within 10 day(s) of being sent" in text
    assert "cashfree's refund intents: 1 not sent within 1 hour(s); 1 not settled" in text
    # the commands as they run: every option they require, the payment the list needs
    assert "payhooks refunds list pay_1 --provider cashfree" in text
    assert "payhooks refunds cancel KEY --provider cashfree --reason WHY --by WHO" in text
    assert "--not-at-gateway" in text and "look in its dashboard" in text


def test_captures_not_settled_in_time_are_alerted_and_cleared_by_their_payout(conn, chat):
    from payhooks.gateways._settlements import Line, LineKind
    from payhooks.settlements import flags, records

    conn.execute(
        "INSERT INTO payhooks_payments (provider, payment_id, kind, gateway_order_id, event_id,"
        " reconciled, applied_at) VALUES ('razorpay', 'pay_late', 'payment_captured', 'order_1',"
        " 'evt_1', false, %s)",
        (T0 - timedelta(days=10),),
    )
    notifier = webhook_notifier(chat.url)
    assert notifier.tick(conn, T0).raised == 0  # nothing flagged before a review
    assert flags.review(conn, T0).flagged == 1
    notifier.tick(conn, T0 + EVERY)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: razorpay: 1 captured payment not settled")
    says_djangos_too(text)
    paid = Line(provider=Provider.RAZORPAY, settlement_id="setl_1", entry_id="pay_late",
                kind=LineKind.PAYMENT, entry_type="payment", payment_id="pay_late",
                gateway_order_id=None, amount_paise=100, fee_paise=2, tax_paise=0,
                net_paise=98)  # fmt: skip
    records.record(conn, [], [paid])
    notifier.tick(conn, T0 + 2 * EVERY)
    assert chat.texts()[-1].startswith("[payhooks] RESOLVED: razorpay: 1 captured payment")


def test_settlement_lines_naming_no_known_payment_are_alerted(conn, chat):
    from payhooks.gateways._settlements import Line, LineKind
    from payhooks.settlements import records

    stray = Line(provider=Provider.CASHFREE, settlement_id="77", entry_id="e1",
                 kind=LineKind.PAYMENT, entry_type="PAYMENT", payment_id="5114910810523",
                 gateway_order_id=None, amount_paise=100, fee_paise=2, tax_paise=0,
                 net_paise=98)  # fmt: skip
    records.record(conn, [], [stray])
    webhook_notifier(chat.url).tick(conn, T0)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: cashfree: 1 settlement line naming no known")
    says_djangos_too(text)


def test_settlement_lines_it_cannot_read_are_alerted_until_a_fetch_reads_them(conn, chat):
    import json

    from payhooks.gateways._settlements import Line, LineKind
    from payhooks.gateways.cashfree import settlements
    from payhooks.settlements import records

    item = {"event_details": {"event_id": "e9", "event_type": "PAYMENT", "sale_type": "SALE"},
            "settlement_details": {"cf_settlement_id": "78"}}  # fmt: skip
    page = settlements.recon(json.dumps({"data": [item], "cursor": None}).encode())
    records.record(conn, [], [], page.unreadable)
    notifier = webhook_notifier(chat.url)
    notifier.tick(conn, T0)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: cashfree: 1 settlement report line payhooks cannot")
    assert "payhooks settlements --unreadable" in text
    says_djangos_too(text)
    read = Line(provider=Provider.CASHFREE, settlement_id="78", entry_id="e9",
                kind=LineKind.PAYMENT, entry_type="PAYMENT", payment_id=None,
                gateway_order_id=None, amount_paise=100, fee_paise=2, tax_paise=0,
                net_paise=98)  # fmt: skip
    records.record(conn, [], [read])  # the gateway corrected it
    notifier.tick(conn, T0 + EVERY)
    assert chat.texts()[-1].startswith("[payhooks] RESOLVED: cashfree: 1 settlement report line")


def test_settlement_reports_not_read_for_days_are_alerted_until_a_fetch_reads_them(conn, chat):
    """A gateway whose report was last read whole more than ``UNREAD_DAYS`` days ago (India's
    days: T0 is 3 December there too): its captures since go unreviewed, so it is said, with
    the command that reads the days missed; a fetch that reads them clears it. Days within
    the bound say nothing."""
    from datetime import date

    from payhooks.settlements import reads

    today = date(2026, 12, 3)
    last = today - timedelta(days=reads.UNREAD_DAYS + 2)  # one day over the bound unread
    reads.moved(conn, Provider.RAZORPAY, last, last, today=today)
    reads.moved(conn, Provider.CASHFREE, last, last + timedelta(days=1), today=today)
    notifier = webhook_notifier(chat.url)
    notifier.tick(conn, T0)
    [text] = chat.texts()
    assert text.startswith(
        f"[payhooks] ALERT: razorpay: settlement reports read only through {last}"
    )
    assert "`payhooks settlements --catch-up`" in text
    assert "`manage.py payhooks_settlements --catch-up`" in text
    says_djangos_too(text)
    reads.moved(conn, Provider.RAZORPAY, last + timedelta(days=1), today, today=today)
    notifier.tick(conn, T0 + EVERY)
    assert chat.texts()[-1].startswith("[payhooks] RESOLVED: razorpay: settlement reports read")
    assert len(chat.texts()) == 2


def test_settlement_reports_not_read_say_when_they_last_were_in_utc(conn, chat):
    """The session's time zone (a merchant's database set to India's) changes nothing."""
    from datetime import date

    from payhooks.settlements import reads

    today = date(2026, 12, 3)
    last = today - timedelta(days=reads.UNREAD_DAYS + 2)
    reads.moved(conn, Provider.RAZORPAY, last, last, today=today)
    conn.execute("UPDATE payhooks_settlement_reads SET read_at = '2026-11-28 10:00+00'")
    conn.execute("SET TimeZone = 'Asia/Kolkata'")
    webhook_notifier(chat.url).tick(conn, T0)
    [text] = chat.texts()
    assert "(the last fetch that moved it on: 2026-11-28 10:00 UTC)" in text


def test_the_shop_alerts_dead_letters_and_payments_to_refund(conn, chat):
    conn.execute("SET TimeZone = 'Asia/Kolkata'")  # its time is written in UTC all the same
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, subject, body, failed_at, last_error)"
        " VALUES ('email', 'x', 's', 'b', %s, 'recipient refused')",
        (T0,),
    )
    settings = replace(SETTINGS, alert_webhook_url=chat.url, smtp_url=None)
    tally = alerting.notifier(settings, shop=True).tick(conn, T0 + EVERY)
    assert tally.open == ["dead_letters:outbox"]
    assert chat.texts()[0].startswith("[payhooks] ALERT: 1 email(s) dead-lettered")
    assert f"(the oldest at {T0:%Y-%m-%d %H:%M} UTC)" in chat.texts()[0]


def test_a_merchant_apps_notifier_leaves_the_shops_alerts_alone(conn, chat):
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, subject, body, failed_at)"
        " VALUES ('email', 'x', 's', 'b', %s)",
        (T0,),
    )
    settings = replace(SETTINGS, alert_webhook_url=chat.url, smtp_url=None)
    alerting.notifier(settings, shop=True).tick(conn, T0 + EVERY)
    assert alerting.notifier(settings, shop=False).tick(conn, T0 + EVERY * 2).resolved == 0
    assert Condition.DEAD_LETTERS.value == "dead_letters"


def test_the_running_worker_posts_a_failing_gateway_to_chat_and_emails_it(
    conn, database_url, chat, inbox
):
    from payhooks.service import database
    from payhooks.service.worker import Worker, WorkerOptions
    from tests.acceptance.conftest import wait_until

    box, port = inbox
    answered(conn, "razorpay", 503, datetime.now(UTC), count=FAILURES_TO_WARN)
    settings = replace(
        SETTINGS,
        smtp_url=f"smtp://127.0.0.1:{port}",
        alert_email="ops@example.com",
        mail_from="shop@example.com",
        alert_webhook_url=chat.url,
    )
    pool = database.open_pool(database_url, settings, max_size=4, deadline=False)
    worker = Worker(pool, settings, WorkerOptions(purge_every_seconds=None), jitter=lambda: 0.0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: bool(chat.texts()) and bool(box.messages), timeout=30, what="alerts")
    finally:
        worker.stop()
        thread.join(timeout=30)
        worker.close()
        pool.close()
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: razorpay: webhook deliveries answered 5xx")
    assert [m["Subject"] for m in box.messages] == [text.splitlines()[0]]


def test_notices_said_a_month_ago_are_deleted_and_the_alert_kept(conn, chat):
    answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
    notifier = webhook_notifier(chat.url)
    notifier.tick(conn, T0 + EVERY)  # raised and sent
    notifier.tick(conn, T0 + timedelta(days=2))  # resolved and sent
    notifier.evaluate(conn, T0 + timedelta(days=31))
    assert [kind for _, kind, _, _ in notices(conn)] == ["resolved"]
    notifier.evaluate(conn, T0 + timedelta(days=33))
    assert notices(conn) == []
    [(key, resolved)] = conn.execute(
        "SELECT key, resolved_at IS NOT NULL FROM payhooks_alerts"
    ).fetchall()
    assert (key, resolved) == ("failing:razorpay", True)


def refuse(conn, table: str, when: str) -> None:
    """A real fault for one row: a trigger on ``table`` raising when ``when`` holds."""
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        f"CREATE TRIGGER refuse_one BEFORE INSERT OR UPDATE ON {table}"
        f" FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION refuse_one()"
    )


def three_notices(conn, chat) -> tuple[Any, datetime, int]:
    """Three gateways' warnings raised for the chat channel: the notifier, when, and the first
    notice's id."""
    for provider in ("cashfree", "juspay", "razorpay"):
        answered(conn, provider, 503, T0, count=FAILURES_TO_WARN)
    notifier = webhook_notifier(chat.url)
    now = T0 + EVERY
    assert notifier.evaluate(conn, now).raised == 3
    [first] = conn.execute("SELECT min(id) FROM payhooks_outbox").fetchone() or []
    return notifier, now, first


def notice_state(conn, notice_id: int) -> tuple[bool, str, datetime]:
    """Whether the notice is sent, its last error, and when it is due again."""
    [found] = conn.execute(
        "SELECT sent_at IS NOT NULL, last_error, next_attempt_at FROM payhooks_outbox"
        " WHERE id = %s",
        (notice_id,),
    ).fetchall()
    return found


def test_one_notice_that_cannot_be_marked_sent_is_backed_off_and_the_others_are_sent(conn, chat):
    notifier, now, first = three_notices(conn, chat)
    refuse(conn, "payhooks_outbox", f"NEW.id = {first} AND NEW.sent_at IS NOT NULL")
    tally = notifier.send_due(conn, now)
    assert (tally.sent, tally.retried) == (2, 1)
    sent, error, due = notice_state(conn, first)
    assert not sent and "refused by a trigger" in error
    assert due == now + notifier.policy.delay(1)
    assert notifier.send_due(conn, now + timedelta(hours=25)).failed == 1  # past the bound


def test_one_notice_this_release_cannot_read_is_backed_off_and_the_others_are_sent(conn, chat):
    """A notice of a kind a newer release wrote (its migration let the table take it) raised
    once leased: the pass ended there, each time its lease ran out, the notices after it
    left for the next. It is backed off saying why, given up past the bound, and the others
    are sent."""
    notifier, now, first = three_notices(conn, chat)
    conn.execute("ALTER TABLE payhooks_outbox DROP CONSTRAINT payhooks_outbox_kind_check")
    conn.execute("UPDATE payhooks_outbox SET kind = 'escalated' WHERE id = %s", (first,))
    tally = notifier.send_due(conn, now)
    assert (tally.sent, tally.retried) == (2, 1) and len(chat.texts()) == 2
    sent, error, due = notice_state(conn, first)
    assert not sent and "escalated" in error and due == now + notifier.policy.delay(1)
    assert notifier.send_due(conn, now + timedelta(hours=25)).failed == 1  # past the bound


def test_a_failed_notice_whose_row_cannot_be_written_holds_back_no_other_channel(conn, inbox):
    """The chat endpoint fails and the database refuses to record that on its notice: left
    to its lease, and the emails of every alert are still sent this pass."""
    box, port = inbox
    with receiving(Receiver(statuses=[500, 500])) as chat:
        for provider in ("razorpay", "cashfree"):
            answered(conn, provider, 503, T0, count=FAILURES_TO_WARN)
        email = emailing(port)
        notifier = Notifier([email, Webhook(url=chat.url, timeout_s=PATIENT_S)], core_sources())
        assert notifier.evaluate(conn, T0 + EVERY).raised == 2
        refuse(conn, "payhooks_outbox", "NEW.channel = 'webhook' AND NEW.last_error IS NOT NULL")
        tally = notifier.send_due(conn, T0 + EVERY)
        assert tally.sent == 2 and len(box.messages) == 2
        assert chat.requests == 1  # the channel failed: left alone for the rest of the pass
        assert tally.retried >= 1 and tally.trouble()  # not sent, and said so


def test_one_alert_whose_row_cannot_be_written_holds_back_no_other(conn, chat):
    for provider in ("cashfree", "razorpay"):
        answered(conn, provider, 503, T0, count=FAILURES_TO_WARN)
    refuse(conn, "payhooks_alerts", "NEW.key = 'failing:cashfree'")
    tally = webhook_notifier(chat.url).tick(conn, T0 + EVERY)
    assert (tally.raised, tally.sent) == (1, 1)
    [text] = chat.texts()
    assert text.startswith("[payhooks] ALERT: razorpay: webhook deliveries answered 5xx")
    # said, so that ``alerts --once`` and the worker's pass exit 1: the alert never went
    assert tally.unrecorded == ["failing:cashfree"]
    assert "refused to record: failing:cashfree" in (tally.trouble() or "")


def test_one_alert_whose_resolution_cannot_be_written_holds_back_no_other(conn, chat):
    """An alert gone, whose row the database refuses to mark resolved (an app's trigger):
    the one statement resolving every alert gone failed, the pass's whole transaction with
    it, and an alert raised in that pass was never recorded nor sent, on every tick. The
    refused one stays open, named; the others are raised and resolved."""
    answered(conn, "cashfree", 503, T0, count=FAILURES_TO_WARN)
    answered(conn, "payu", 503, T0, count=FAILURES_TO_WARN)
    notifier = webhook_notifier(chat.url)
    assert notifier.tick(conn, T0 + EVERY).raised == 2
    refuse(conn, "payhooks_alerts",
           "NEW.key = 'failing:cashfree' AND NEW.resolved_at IS NOT NULL")  # fmt: skip
    later = T0 + timedelta(days=1)  # both gateways' 5xx long past: both alerts gone
    answered(conn, "razorpay", 503, later - EVERY, count=FAILURES_TO_WARN)
    tally = notifier.tick(conn, later)
    assert (tally.raised, tally.resolved) == (1, 1)
    told = [text.split("\n")[0] for text in chat.texts()[2:]]
    assert sorted(told) == [
        "[payhooks] ALERT: razorpay: webhook deliveries answered 5xx",
        "[payhooks] RESOLVED: payu: webhook deliveries answered 5xx",
    ]
    assert tally.unrecorded == ["failing:cashfree"]
    assert "failing:cashfree" in (tally.trouble() or "")
    still = "SELECT key FROM payhooks_alerts WHERE resolved_at IS NULL ORDER BY key"
    assert conn.execute(still).fetchall() == [("failing:cashfree",), ("failing:razorpay",)]


def test_one_source_that_cannot_be_read_holds_back_no_other_and_its_alerts_stay_open(conn, chat):
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, subject, body, failed_at)"
        " VALUES ('alert', 'alert:dead', 's', 'b', %s)",
        (T0,),
    )
    notifier = Notifier([Webhook(url=chat.url, timeout_s=PATIENT_S)],
                        [*core_sources(), *alerting.shop_sources()])  # fmt: skip
    assert notifier.tick(conn, T0 + EVERY).raised == 1  # the dead letter
    conn.execute("ALTER TABLE outbox RENAME TO outbox_away")  # the shop's source fails
    answered(conn, "razorpay", 503, T0 + EVERY, count=FAILURES_TO_WARN)
    tally = notifier.tick(conn, T0 + EVERY * 2)
    assert (tally.raised, tally.resolved) == (1, 0)
    assert chat.texts()[-1].startswith("[payhooks] ALERT: razorpay: webhook deliveries")
    still = "SELECT key FROM payhooks_alerts WHERE resolved_at IS NULL ORDER BY key"
    assert conn.execute(still).fetchall() == [("dead_letters:outbox",), ("failing:razorpay",)]


def test_a_chat_endpoint_answering_no_http_is_unreachable_not_a_broken_notifier():
    """An answer that is not HTTP (a status line of junk, a body cut short) is http.client's
    own error, not an OSError: it fell through as an error of payhooks' own and the channel
    was not marked unreachable, so every later notice of the tick waited its timeout again."""
    import socket
    import threading

    from payhooks.operations.notifier import Notice, NoticeFailed, NoticeKind

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def junk() -> None:
        peer, _ = server.accept()
        with peer:
            peer.recv(65536)
            peer.sendall(b"NOT-HTTP junk\r\n\r\n")

    thread = threading.Thread(target=junk, daemon=True)
    thread.start()
    try:
        with pytest.raises(NoticeFailed, match="unreachable: BadStatusLine"):
            notice = Notice(id=1, alert_key="test", kind=NoticeKind.RAISED, channel="webhook",
                            title="payhooks", body="test", attempts=1, created_at=T0)  # fmt: skip
            Webhook(url=f"http://127.0.0.1:{port}/hook", timeout_s=5.0).send(notice)
    finally:
        thread.join(timeout=5)
        server.close()


def test_the_parked_alerts_time_is_utc_on_a_database_whose_zone_is_indias(conn, chat):
    """The alerts write their times as UTC: a time the session gave in its own zone (India's,
    as many merchants' databases are set) was written as it came, labelled UTC, 5h30 off."""
    conn.execute("SET TimeZone = 'Asia/Kolkata'")
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
        " payload_sha256, body, processed_at) VALUES"
        " ('payu', 'e1', 'payment.captured', 'parked', 'x1', '', %s)",
        (T0,),
    )
    notifier = webhook_notifier(chat.url)
    notifier.tick(conn, T0 + PARKED_WAIT + EVERY)
    [raised] = chat.texts()
    assert f"(the oldest since {T0:%Y-%m-%d %H:%M} UTC)" in raised

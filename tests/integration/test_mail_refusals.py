"""A refusal that would meet every message (of the sender, for want of TLS or a login, of
relaying) leaves the queue waiting, dead-letters nothing; a refused recipient or an oversized
message still counts against that message alone. And a worker says when it cannot apply
parked deliveries or send alerts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest

from payhooks.events import Provider
from payhooks.service import database, outbox
from payhooks.service.shop import carts
from payhooks.service.worker import Worker, WorkerOptions
from tests.conftest import Inbox, free_port
from tests.factories import GATEWAY, SETTINGS, deliver, product


@pytest.fixture
def pool(database_url: str) -> Iterator[database.psycopg_pool.ConnectionPool]:
    opened = database.open_pool(database_url, SETTINGS, max_size=4, deadline=False)
    yield opened
    opened.close()


class RefusingInbox(Inbox):
    """An Inbox that answers MAIL FROM, or RCPT TO, with ``refusal`` while one is set."""

    def __init__(self, *, at: str, refusal: str) -> None:
        super().__init__()
        self.at = at
        self.refusal: str | None = refusal

    async def handle_MAIL(self, server, session, envelope, address, mail_options):
        if self.at == "MAIL" and self.refusal:
            return self.refusal
        envelope.mail_from = address
        return "250 OK"

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.at == "RCPT" and self.refusal:
            return self.refusal
        return await super().handle_RCPT(server, session, envelope, address, rcpt_options)


@contextmanager
def serving(handler: Inbox, **smtp_options: object) -> Iterator[int]:
    from aiosmtpd.controller import Controller

    controller = Controller(handler, hostname="127.0.0.1", port=free_port(), **smtp_options)
    controller.start()
    try:
        yield controller.port
    finally:
        controller.stop()


def worker_for(pool, port: int, options: WorkerOptions | None = None, **settings) -> Worker:
    configured = replace(
        SETTINGS,
        **{
            "smtp_url": f"smtp://127.0.0.1:{port}",
            "alert_email": "ops@example.com",
            "mail_from": "shop@example.com",
            **settings,
        },
    )
    chosen = options or WorkerOptions(purge_every_seconds=None, parked_every_seconds=None)
    return Worker(pool, configured, chosen, jitter=lambda: 0.0)


def queue(conn, key: str, recipient: str = "buyer@example.com") -> None:
    outbox.enqueue(
        conn,
        outbox.Message(
            kind=outbox.MessageKind.EMAIL,
            dedupe_key=key,
            recipient=recipient,
            subject=key,
            body="body",
        ),
    )


def rows(conn) -> list[tuple[str, int, bool, bool]]:
    """(key, attempts, sent, dead-lettered) of every message, in key order; sending counts
    as an attempt."""
    return conn.execute(
        "SELECT dedupe_key, attempts, sent_at IS NOT NULL, failed_at IS NOT NULL FROM outbox "
        "ORDER BY dedupe_key"
    ).fetchall()


WHOLE_SERVER_REFUSALS = {
    "STARTTLS required at MAIL": ("MAIL", "530 Must issue a STARTTLS command first"),
    "sender refused at MAIL": ("MAIL", "553 5.7.1 <shop@example.com>: Sender address rejected"),
    "relay denied at MAIL": ("MAIL", "554 5.7.1 Relay access denied"),
    "login required at RCPT": ("RCPT", "530 5.7.0 Authentication required"),
    "relay denied at RCPT": ("RCPT", "554 5.7.1 <buyer@example.com>: Relay access denied"),
    "relay denied, Exchange": ("RCPT", "550 5.7.54 SMTP; Unable to relay recipient in domain"),
    "closing at RCPT": ("RCPT", "421 4.3.2 Service shutting down"),
}


@pytest.mark.parametrize(
    ("at", "refusal"), WHOLE_SERVER_REFUSALS.values(), ids=WHOLE_SERVER_REFUSALS
)
def test_a_refusal_meeting_every_message_dead_letters_nothing_and_the_queue_waits(
    conn, pool, at, refusal
):
    queue(conn, "mail:1")
    queue(conn, "mail:2")
    handler = RefusingInbox(at=at, refusal=refusal)
    with serving(handler) as port:
        runner = worker_for(pool, port)
        assert runner.drain() == 0
        assert runner.sender.unavailable
        assert rows(conn) == [("mail:1", 0, False, False), ("mail:2", 0, False, False)]
        handler.refusal = None
        assert worker_for(pool, port).drain() == 2
    assert sorted(m["Subject"] for m in handler.messages) == ["mail:1", "mail:2"]
    assert rows(conn) == [("mail:1", 1, True, False), ("mail:2", 1, True, False)]


def test_a_server_demanding_a_login_leaves_the_backlog_waiting(conn, pool):
    """aiosmtpd's own policy: 530 5.7.0 to MAIL FROM until the client has logged in."""
    queue(conn, "mail:1")
    queue(conn, "mail:2")
    options = {"auth_required": True, "auth_require_tls": False}
    with serving(Inbox(), **options) as port:
        runner = worker_for(pool, port)
        assert runner.drain() == 0 and runner.sender.unavailable
    assert rows(conn) == [("mail:1", 0, False, False), ("mail:2", 0, False, False)]


def test_a_refused_recipient_still_counts_against_that_message_alone(conn, pool):
    box = Inbox()
    queue(conn, "mail:1", recipient="reject@example.com")
    queue(conn, "mail:2")
    with serving(box) as port:
        assert worker_for(pool, port).drain() == 2
    assert rows(conn) == [("mail:1", 1, False, True), ("mail:2", 1, True, False)]

    assert [m["Subject"] for m in box.messages] == ["mail:2"]


def test_a_customer_email_that_lost_its_recipient_is_dead_lettered_not_sent_to_the_operators(
    conn, pool
):
    """An application's email whose row names no recipient (an app's own write, a bug) was
    sent to PAYHOOKS_ALERT_EMAIL: a customer's order email in the operators' inbox. Only an
    alert goes to the operators; an email without its recipient is a dead letter saying so."""
    box = Inbox()
    queue(conn, "mail:1")
    conn.execute("UPDATE payhooks_outbox SET recipient = NULL WHERE dedupe_key = 'mail:1'")
    queue(conn, "mail:2")
    with serving(box) as port:
        assert worker_for(pool, port).drain() == 2
    assert rows(conn) == [("mail:1", 1, False, True), ("mail:2", 1, True, False)]
    assert [m["Subject"] for m in box.messages] == ["mail:2"]
    (why,) = conn.execute(
        "SELECT last_error FROM payhooks_outbox WHERE dedupe_key = 'mail:1'"
    ).fetchone()
    assert "names no recipient" in why


class RelayingForItsOwn(Inbox):
    """A server that relays only for its own domain, refusing every other recipient with
    Postfix's ``reject_unauth_destination`` reply, which names that recipient."""

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if not address.endswith("@example.com"):
            return f"554 5.7.1 <{address}>: Relay access denied"
        return await super().handle_RCPT(server, session, envelope, address, rcpt_options)


def test_a_recipient_refused_relaying_counts_against_its_message_and_the_rest_are_sent(conn, pool):
    box = RelayingForItsOwn()
    queue(conn, "mail:1", recipient="buyer@elsewhere.example")
    for n in (2, 3, 4):
        queue(conn, f"mail:{n}")
    with serving(box) as port:
        runner = worker_for(pool, port)
        assert runner.drain() == 3
        assert not runner.sender.unavailable
    assert rows(conn) == [("mail:1", 1, False, False), ("mail:2", 1, True, False),
                          ("mail:3", 1, True, False), ("mail:4", 1, True, False)]  # fmt: skip
    assert sorted(m["Subject"] for m in box.messages) == ["mail:2", "mail:3", "mail:4"]
    (error,) = conn.execute("SELECT last_error FROM outbox WHERE dedupe_key = 'mail:1'").fetchone()
    assert "Relay access denied" in error


def test_two_recipients_refused_relaying_are_each_counted_once_the_server_answers_another(
    conn, pool
):
    """Two customers at an outside domain, then two messages the server takes: the first drain
    cannot tell (two refusals before any answer), the next sends the two and counts the two
    refused against their messages; none waits uncounted for ever."""
    box = RelayingForItsOwn()
    queue(conn, "mail:1", recipient="one@elsewhere.example")
    queue(conn, "mail:2", recipient="two@elsewhere.example")
    queue(conn, "mail:3")
    queue(conn, "mail:4")
    with serving(box) as port:
        runner = worker_for(pool, port)
        runner.drain()
        runner.drain()
        assert not runner.sender.unavailable
    assert rows(conn) == [("mail:1", 1, False, False), ("mail:2", 1, False, False),
                          ("mail:3", 1, True, False), ("mail:4", 1, True, False)]  # fmt: skip


# A worker says what it cannot do.


def park_applicable(conn, reference: str) -> None:
    """A capture that beat its checkout, and the checkout that came later: it now applies."""
    sku = product(conn, price_paise=49_900).sku
    delivery = GATEWAY.razorpay(
        "payment.captured",
        payment_id=f"pay_{reference[-14:]}",
        order_id=reference,
        amount_paise=49_900,
    )
    assert deliver(conn, delivery).outcome == "parked"
    cart = carts.create_cart(conn, "late@example.com", [carts.LineItem(sku=sku, quantity=1)])
    carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, reference)


def _without_razorpay() -> dict[str, tuple[str, ...]]:
    secrets = dict(SETTINGS.webhook_secrets)
    del secrets["PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS"]
    return secrets


def warnings_named(caplog, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == name and r.levelno == logging.WARNING]


def test_parked_deliveries_of_a_gateway_without_its_secret_are_warned_about_once_a_pass(
    conn, pool, inbox, caplog
):
    _, port = inbox
    for n in range(3):
        park_applicable(conn, f"order_nosecret{n:05d}")
    caplog.set_level(logging.WARNING, logger="payhooks.service.worker")
    every_pass = WorkerOptions(purge_every_seconds=None, parked_every_seconds=0.0)
    runner = worker_for(pool, port, every_pass, webhook_secrets=_without_razorpay())
    assert runner.maybe_retry_parked() == 0
    assert runner.maybe_retry_parked() == 0
    warned = warnings_named(caplog, "parked_provider_not_configured")
    assert [r.provider for r in warned] == ["razorpay", "razorpay"]


def test_no_parked_warning_when_the_gateway_has_its_secret(conn, pool, inbox, caplog):
    _, port = inbox
    park_applicable(conn, "order_withsecret0")
    caplog.set_level(logging.WARNING, logger="payhooks.service.worker")
    every_pass = WorkerOptions(purge_every_seconds=None, parked_every_seconds=0.0)
    assert worker_for(pool, port, every_pass).maybe_retry_parked() == 1
    assert warnings_named(caplog, "parked_provider_not_configured") == []


def test_a_worker_without_an_alert_address_warns_when_it_starts(pool, inbox, caplog):
    _, port = inbox
    caplog.set_level(logging.WARNING, logger="payhooks.service.worker")
    worker_for(pool, port, alert_email=None)
    assert len(warnings_named(caplog, "alert_email_not_set")) == 1

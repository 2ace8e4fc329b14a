"""The worker never dies on one message or one failing step, and finds every parked delivery
whose checkout now exists, however many others stay parked."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from email.message import EmailMessage

import pytest

from payhooks import db
from payhooks.mail import Mailer, MessageRejected, SmtpTarget, compose
from payhooks.worker import Worker, WorkerOptions
from tests.acceptance.conftest import wait_until
from tests.conftest import Inbox, free_port
from tests.factories import SETTINGS


@pytest.fixture
def pool(database_url: str) -> Iterator[db.psycopg_pool.ConnectionPool]:
    opened = db.open_pool(database_url, SETTINGS, max_size=4, deadline=False)
    yield opened
    opened.close()


def worker_for(pool, port: int, options: WorkerOptions | None = None) -> Worker:
    configured = replace(
        SETTINGS,
        smtp_url=f"smtp://127.0.0.1:{port}",
        alert_email="ops@example.com",
        mail_from="shop@example.com",
    )
    chosen = options or WorkerOptions(purge_every_seconds=None)
    return Worker(pool, configured, chosen, jitter=lambda: 0.0)


def insert_row(conn, key: str, *, recipient: str = "b@example.com", subject: str = "hi") -> None:
    """As a row written before addresses were checked: straight into the table."""
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, recipient, subject, body) "
        "VALUES ('email', %s, %s, %s, 'body')",
        (key, recipient, subject),
    )


def state(conn, key: str) -> tuple[bool, bool, str | None]:
    sent, failed, error = conn.execute(
        "SELECT sent_at IS NOT NULL, failed_at IS NOT NULL, last_error FROM outbox "
        "WHERE dedupe_key = %s",
        (key,),
    ).fetchone()
    return sent, failed, error


@pytest.mark.parametrize("recipient", ["x@[y", "a@[b", "a@[", "postmaster,me@example.com"])
def test_a_stored_unusable_recipient_is_dead_lettered_and_the_next_message_is_sent(
    conn, pool, inbox, recipient
):
    box, port = inbox
    insert_row(conn, "bad", recipient=recipient)
    insert_row(conn, "good")
    worker_for(pool, port).drain()
    assert [m["Subject"] for m in box.messages] == ["hi"]
    sent, failed, error = state(conn, "bad")
    assert (sent, failed) == (False, True)
    assert "not a usable email address" in error


def test_a_stored_subject_holding_a_line_feed_is_dead_lettered_and_the_next_is_sent(
    conn, pool, inbox
):
    box, port = inbox
    insert_row(conn, "bad", subject="Order\nBcc: everyone@example.com")
    insert_row(conn, "good")
    worker_for(pool, port).drain()
    assert [m["To"] for m in box.messages] == ["b@example.com"]
    sent, failed, error = state(conn, "bad")
    assert (sent, failed) == (False, True)
    assert "linefeed" in error


def test_compose_refuses_an_unusable_recipient_instead_of_splitting_it():
    from payhooks.mail import InvalidAddress

    with pytest.raises(InvalidAddress):
        compose(
            sender="shop@example.com",
            recipient="postmaster,me@example.com",
            subject="s",
            body="b",
            dedupe_key="k",
        )


def message_smtplib_refuses() -> EmailMessage:
    """Two Resent- blocks: smtplib raises ValueError before saying a word to the server."""
    message = compose(
        sender="shop@example.com", recipient="b@example.com", subject="s", body="b", dedupe_key="k"
    )
    message["Resent-Date"] = "Mon, 30 Nov 2026 07:01:30 +0000"
    message["Resent-Date"] = "Mon, 30 Nov 2026 07:01:31 +0000"
    return message


def test_an_unexpected_error_while_sending_rejects_that_message_for_good(inbox):
    _, port = inbox
    with (
        Mailer(SmtpTarget(host="127.0.0.1", port=port)) as mailer,
        pytest.raises(MessageRejected, match="ValueError") as refused,
    ):
        mailer.send(message_smtplib_refuses())
    assert refused.value.permanent


def test_the_mailer_goes_on_with_the_next_message_after_an_unexpected_error(inbox):
    box, port = inbox
    good = compose(
        sender="shop@example.com", recipient="b@example.com", subject="ok", body="b", dedupe_key="g"
    )
    with Mailer(SmtpTarget(host="127.0.0.1", port=port)) as mailer:
        with pytest.raises(MessageRejected):
            mailer.send(message_smtplib_refuses())
        mailer.send(good)
    assert [m["Subject"] for m in box.messages] == ["ok"]


def broken_purge_worker(conn, pool, port: int) -> Worker:
    """A worker whose daily purge fails on every pass: its progress table is gone."""
    conn.execute("DROP TABLE maintenance_runs")
    options = WorkerOptions(
        poll_seconds=0.05, purge_every_seconds=0.0, smtp_backoff_cap_seconds=0.1
    )
    return worker_for(pool, port, options)


@pytest.fixture
def running_worker():
    started: list[tuple[Worker, threading.Thread]] = []
    errors: list[BaseException] = []

    def start(runner: Worker) -> threading.Thread:
        def run() -> None:
            try:
                runner.run()
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        started.append((runner, thread))
        return thread

    yield start, errors
    for runner, thread in started:
        runner.stop()
        thread.join(timeout=30)


def test_run_goes_on_after_a_step_fails_unexpectedly(conn, pool, inbox, running_worker):
    box, port = inbox
    start, errors = running_worker
    insert_row(conn, "first")
    thread = start(broken_purge_worker(conn, pool, port))
    wait_until(lambda: len(box.messages) == 1 or not thread.is_alive(), timeout=30, what="first")
    insert_row(conn, "second")
    wait_until(lambda: len(box.messages) == 2 or not thread.is_alive(), timeout=30, what="second")
    assert thread.is_alive() and errors == []
    assert len(box.messages) == 2


def test_a_failing_step_is_logged_with_its_traceback_under_a_stable_name(
    conn, pool, inbox, running_worker, caplog
):
    _, port = inbox
    start, _ = running_worker
    caplog.set_level(logging.ERROR, logger="payhooks.worker")
    thread = start(broken_purge_worker(conn, pool, port))

    def logged() -> bool:
        return any(r.getMessage() == "worker_step_failed" for r in caplog.records)

    wait_until(lambda: logged() or not thread.is_alive(), timeout=30, what="the log line")
    [record, *_] = [r for r in caplog.records if r.getMessage() == "worker_step_failed"]
    assert record.exc_info is not None and record.step == "maybe_purge"


@pytest.fixture
def ascii_inbox() -> Iterator[tuple[Inbox, int]]:
    """A real SMTP server that does not offer SMTPUTF8."""
    from aiosmtpd.controller import Controller

    box = Inbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port(), enable_SMTPUTF8=False)
    controller.start()
    yield box, controller.port
    controller.stop()


def test_a_mailbox_under_an_international_domain_goes_out_in_its_ascii_form(
    conn, pool, ascii_inbox
):
    box, port = ascii_inbox
    insert_row(conn, "idn", recipient="asha@उदाहरण.भारत")
    worker_for(pool, port).drain()
    assert [m["To"] for m in box.messages] == ["asha@xn--p1b6ci4b4b3a.xn--h2brj9c"]


def test_an_international_mailbox_name_is_dead_lettered_by_a_server_without_smtputf8(
    conn, pool, ascii_inbox
):
    _, port = ascii_inbox
    insert_row(conn, "utf8", recipient="आशा@example.com")
    worker_for(pool, port).drain()
    sent, failed, error = state(conn, "utf8")
    assert (sent, failed) == (False, True) and "SMTPUTF8" in error

"""The one outbound queue (``payhooks.operations.outbox``): a customer's email, an alert's
email and its chat notice side by side in ``payhooks_outbox``, sent by workers racing over a
real SMTP server and a real chat endpoint on loopback, each exactly once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta

import pytest

from payhooks.operations import outbox
from payhooks.operations.alarms import FAILURES_TO_WARN
from payhooks.service import database
from payhooks.service.mail import message_id
from payhooks.service.worker import Worker, WorkerOptions
from tests.conftest import Inbox, released_together, smtp_server
from tests.factories import SETTINGS, deliver, purchase
from tests.integration.test_alerts import T0, Receiver, answered, receiving

ALERT = "[payhooks] ALERT: razorpay: webhook deliveries answered 5xx"


@pytest.fixture
def pool(database_url: str) -> Iterator[database.psycopg_pool.ConnectionPool]:
    opened = database.open_pool(database_url, SETTINGS, max_size=6, deadline=False)
    yield opened
    opened.close()


def racer(pool, port: int, chat_url: str) -> Worker:
    settings = replace(
        SETTINGS,
        smtp_url=f"smtp://127.0.0.1:{port}",
        alert_email="ops@example.com",
        mail_from="shop@example.com",
        alert_webhook_url=chat_url,
    )
    return Worker(pool, settings, WorkerOptions(purge_every_seconds=None), jitter=lambda: 0.0)


QUEUE = """
SELECT kind, channel, alert_key IS NOT NULL, attempts, sent_at IS NOT NULL FROM payhooks_outbox
ORDER BY kind, channel
"""


def test_two_workers_racing_send_an_order_email_an_alert_email_and_a_chat_notice_once_each(
    conn, pool
):
    box = Inbox(delay=0.2)  # each message keeps its sender on it while the other looks
    receipt = deliver(conn, purchase(conn).captured())
    answered(conn, "razorpay", 503, T0, count=FAILURES_TO_WARN)
    now = T0 + timedelta(seconds=60)
    with smtp_server(box) as port, receiving(Receiver()) as chat:
        workers = [racer(pool, port, chat.url) for _ in range(2)]

        def work(_: object, worker: Worker) -> int:
            return worker.drain() + worker.alert(now)

        sent = released_together(workers, lambda _: nullcontext(), work)
        for worker in workers:
            worker.close()
        assert sum(sent) == 3
        assert [worker.drain() + worker.alert(now) for worker in workers] == [0, 0]
        texts = chat.texts()
    assert conn.execute(QUEUE).fetchall() == [
        ("email", "email", False, 1, True),
        ("raised", "email", True, 1, True),
        ("raised", "webhook", True, 1, True),
    ]
    [alert_key] = conn.execute(
        "SELECT dedupe_key FROM payhooks_outbox WHERE kind = 'raised' AND channel = 'email'"
    ).fetchone() or [None]
    by_id = {m["Message-ID"]: m for m in box.messages}
    assert len(box.messages) == len(by_id) == 2
    order = by_id[message_id(f"order_confirmation:{receipt.order_id}")]
    assert order["To"] == "buyer@example.com"
    assert by_id[message_id(alert_key)]["Subject"] == ALERT
    assert by_id[message_id(alert_key)]["To"] == "ops@example.com"
    assert [text.splitlines()[0] for text in texts] == [ALERT]


def test_one_dedupe_key_is_queued_once(conn):
    message = outbox.Message(
        kind=outbox.MessageKind.EMAIL,
        dedupe_key="order_confirmation:o1",
        recipient="buyer@example.com",
        subject="Your order o1 is confirmed",
        body="Thank you.",
    )
    assert outbox.enqueue(conn, message)
    assert not outbox.enqueue(conn, replace(message, subject="a second one"))
    assert conn.execute("SELECT subject FROM payhooks_outbox").fetchall() == [
        ("Your order o1 is confirmed",)
    ]


def test_an_alerts_notices_are_neither_dead_letters_nor_revived(conn):
    conn.execute(
        "INSERT INTO payhooks_alerts (key, condition, subject, title, body, raised_at,"
        " notified_at) VALUES ('failing:payu', 'failing', 'payu', 't', 'b', now(), now())"
    )
    notice = outbox.Message(
        kind="raised", dedupe_key="alert:failing:payu", channel="webhook",
        alert_key="failing:payu", subject="t", body="b",
    )  # fmt: skip
    assert outbox.enqueue(conn, notice)
    conn.execute("UPDATE payhooks_outbox SET failed_at = now()")
    assert outbox.failed(conn) == []
    assert outbox.revive(conn) == 0
    assert outbox.counts(conn) == {"pending": 0, "sent": 0, "failed": 0}


def test_a_message_of_a_kind_the_queue_does_not_take_is_refused_when_made_naming_the_kinds():
    """Not by the table's CHECK inside a webhook's transaction, where every copy the gateway
    retried would be answered 500 until the code changed."""
    with pytest.raises(ValueError, match=r"'email' or 'alert'.*not 'order_confirmation'"):
        outbox.Message(kind="order_confirmation", dedupe_key="k", subject="s", body="b")
    assert outbox.Message(kind=outbox.MessageKind.EMAIL, dedupe_key="k", subject="s", body="b")


def test_the_kinds_a_message_may_have_are_the_ones_the_table_takes(conn):
    (check,) = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conrelid = 'payhooks_outbox'::regclass AND contype = 'c'"
        " AND pg_get_constraintdef(oid) LIKE '%%kind%%'"
    ).fetchone()
    taken = set(re.findall(r"'(\w+)'::text", check))
    assert taken == {*outbox.QUEUED_KINDS, "event"}  # events: the claim's own statement
    from payhooks.operations.notifier import NoticeKind

    assert {k.value for k in NoticeKind} <= outbox.QUEUED_KINDS


def test_a_retry_waits_its_delay_from_the_failure_not_from_when_the_row_was_held(conn):
    """The sender holds a message's row in a transaction while it sends (``hold_next``): an
    SMTP server that hung for the 60 s timeout had used up the retry's wait, since it was
    counted from the transaction's start, and the message was tried again at once."""
    message = outbox.Message(
        kind=outbox.MessageKind.EMAIL, dedupe_key="order_confirmation:o2",
        recipient="buyer@example.com", subject="Your order o2 is confirmed", body="Thank you.",
    )  # fmt: skip
    assert outbox.enqueue(conn, message)
    with conn.transaction():
        held = outbox.hold_next(conn)
        assert held is not None
        conn.execute("SELECT pg_sleep(2)")  # the send, hanging
        outbox.retry_later(conn, held.id, "SMTP session lost", 10)
        [(waits,)] = conn.execute(
            "SELECT extract(epoch FROM next_attempt_at - now()) FROM payhooks_outbox"
        ).fetchall()  # from the transaction's start: the hang, then the delay
    assert float(waits) >= 11.5

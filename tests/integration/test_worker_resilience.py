"""The worker never dies on one message or one failing step, and finds every parked delivery
whose checkout now exists, however many others stay parked."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage

import pytest

from payhooks.events import Provider
from payhooks.plumbing.errors import DatabaseAway
from payhooks.service import database
from payhooks.service.errors import MessageRejected
from payhooks.service.mail import Mailer, SmtpTarget, compose
from payhooks.service.maintenance import (
    _MATCHING_PARKED,
    MARGIN,
    PARKED_RETRIES,
    START,
    last_pass,
    matching_parked,
)
from payhooks.service.shop import carts
from payhooks.service.worker import Worker, WorkerOptions
from payhooks.sim.gateway import new_payment_id
from tests.acceptance.conftest import wait_until
from tests.conftest import Inbox, free_port
from tests.factories import GATEWAY, SETTINGS, deliver, product, purchase


@pytest.fixture
def pool(database_url: str) -> Iterator[database.psycopg_pool.ConnectionPool]:
    opened = database.open_pool(database_url, SETTINGS, max_size=4, deadline=False)
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
    from payhooks.service.errors import InvalidAddress

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
        poll_seconds=0.05,
        purge_every_seconds=0.0,
        parked_every_seconds=None,  # its pass is recorded in the same table
        smtp_backoff_cap_seconds=0.1,
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
    caplog.set_level(logging.ERROR, logger="payhooks.service.worker")
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


# Parked deliveries: every one whose checkout (or payment) now exists is applied, however
# many others are parked for good.


def parked_worker(pool, port: int, batch: int = 100) -> Worker:
    options = WorkerOptions(batch=batch, parked_every_seconds=0.0, purge_every_seconds=None)
    return worker_for(pool, port, options)


def park_unmatched(conn, count: int) -> None:
    """Payments of another integration on the same gateway account: never a checkout here."""
    for n in range(count):
        delivery = GATEWAY.razorpay(
            "payment.captured",
            payment_id=f"pay_other{n:07d}",
            order_id=f"order_other{n:07d}",
            amount_paise=100,
        )
        assert deliver(conn, delivery).outcome == "parked"


def park_for_late_checkout(conn, reference: str) -> tuple[str, str]:
    """A capture that beat its checkout; returns (sku, payment id)."""
    sku = product(conn, price_paise=49_900).sku
    payment_id = new_payment_id(Provider.RAZORPAY)
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id=payment_id, order_id=reference, amount_paise=49_900
    )
    assert deliver(conn, delivery).outcome == "parked"
    return sku, payment_id


def check_out_late(conn, sku: str, reference: str) -> str:
    cart = carts.create_cart(conn, "late@example.com", [carts.LineItem(sku=sku, quantity=1)])
    carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, reference)
    return cart.cart_id


def outcome_of(conn, payment_id: str) -> str:
    return conn.execute(
        "SELECT outcome FROM processed_webhooks WHERE payment_id = %s", (payment_id,)
    ).fetchone()[0]


def test_a_parked_payment_behind_150_unmatched_ones_is_applied_once_its_checkout_exists(
    conn, pool, inbox
):
    _, port = inbox
    park_unmatched(conn, 150)
    sku, payment_id = park_for_late_checkout(conn, "order_late_one")
    cart_id = check_out_late(conn, sku, "order_late_one")
    assert parked_worker(pool, port).maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_id).order_id is not None
    assert outcome_of(conn, payment_id) == "processed"


def test_every_matching_parked_delivery_is_applied_batch_after_batch(conn, pool, inbox):
    _, port = inbox
    park_unmatched(conn, 12)
    late = [park_for_late_checkout(conn, f"order_late{n:03d}") for n in range(25)]
    cart_ids = [check_out_late(conn, sku, f"order_late{n:03d}") for n, (sku, _) in enumerate(late)]
    assert parked_worker(pool, port, batch=10).maybe_retry_parked() == 25
    assert all(carts.get_cart(conn, cart_id).status == "paid" for cart_id in cart_ids)


def test_the_parked_query_reads_only_deliveries_that_now_match(conn):
    park_unmatched(conn, 30)
    sku, payment_id = park_for_late_checkout(conn, "order_late_two")
    check_out_late(conn, sku, "order_late_two")
    found = matching_parked(conn, START, limit=100)
    assert [row.event_id for row in found] == [
        conn.execute(
            "SELECT event_id FROM processed_webhooks WHERE payment_id = %s", (payment_id,)
        ).fetchone()[0]
    ]


def test_a_parked_refund_is_applied_once_its_payment_is_recorded(conn, pool, inbox):
    _, port = inbox
    park_unmatched(conn, 150)
    buy = purchase(conn)
    refund = GATEWAY.razorpay(
        "refund.processed",
        payment_id=buy.payment_id,
        order_id="",  # a refund that names no order: only its payment ties it to a cart
        amount_paise=buy.amount_paise,
        refund_id="rfnd_parked000001",
    )
    assert deliver(conn, refund).outcome == "parked"
    assert deliver(conn, buy.captured()).outcome == "processed"
    assert parked_worker(pool, port).maybe_retry_parked() == 1
    refunds = conn.execute("SELECT refund_id FROM refunds").fetchall()
    assert refunds == [("rfnd_parked000001",)]


def forget_reference(conn, payment_id: str) -> None:
    """As a row parked before the reference was kept with the delivery (schema version 5)."""
    conn.execute(
        "UPDATE processed_webhooks SET merchant_ref = NULL WHERE payment_id = %s", (payment_id,)
    )


def test_a_delivery_parked_before_references_were_kept_is_applied_once_its_checkout_exists(
    conn, pool, inbox
):
    _, port = inbox
    park_unmatched(conn, 150)
    sku, payment_id = park_for_late_checkout(conn, "order_late_legacy")
    forget_reference(conn, payment_id)
    cart_id = check_out_late(conn, sku, "order_late_legacy")
    assert parked_worker(pool, port).maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_id).status == "paid"


def test_a_delivery_parked_before_references_were_kept_gets_its_reference_filled_in(
    conn, pool, inbox
):
    _, port = inbox
    park_unmatched(conn, 1)
    conn.execute("UPDATE processed_webhooks SET merchant_ref = NULL")
    parked_worker(pool, port).maybe_retry_parked()
    refs = conn.execute("SELECT merchant_ref FROM processed_webhooks").fetchall()
    assert refs == [("order_other0000000",)]


def test_a_parked_delivery_is_retried_under_the_key_it_was_stored_with(conn, pool, inbox):
    _, port = inbox
    sku, payment_id = park_for_late_checkout(conn, "order_late_rekeyed")
    conn.execute(  # as keys derived by an earlier version of the adapter
        "UPDATE processed_webhooks SET event_id = 'key-of-an-earlier-version' "
        "WHERE payment_id = %s",
        (payment_id,),
    )
    cart_id = check_out_late(conn, sku, "order_late_rekeyed")
    assert parked_worker(pool, port).maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_id).status == "paid"
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0] == 1


def test_the_worker_command_retries_parked_deliveries_every_minute():
    from payhooks.cli.commands import worker_options

    assert worker_options(once=False, batch=100).parked_every_seconds == 60.0


def test_a_login_smtplib_cannot_encode_is_the_server_being_unavailable():
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    from payhooks.service.errors import MailerUnavailable

    controller = Controller(
        Inbox(),
        hostname="127.0.0.1",
        port=free_port(),
        auth_require_tls=False,
        authenticator=lambda *_: AuthResult(success=True),
    )
    controller.start()
    target = SmtpTarget(host="127.0.0.1", port=controller.port, username="shop", password="pä")
    message = compose(
        sender="shop@example.com", recipient="b@example.com", subject="s", body="b", dedupe_key="k"
    )
    try:
        with Mailer(target) as mailer, pytest.raises(MailerUnavailable, match="UnicodeEncodeError"):
            mailer.send(message)
    finally:
        controller.stop()


def test_a_parked_row_of_an_unknown_gateway_does_not_stop_the_rows_after_it(conn, pool, inbox):
    _, port = inbox
    conn.execute(
        "INSERT INTO carts (id, customer_email, amount_paise) "
        "VALUES ('cart_odd', 'o@example.com', 1)"
    )
    conn.execute("INSERT INTO checkouts VALUES ('stripe', 'order_odd', 'cart_odd')")
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, merchant_ref,"
        " payload_sha256, body, processed_at) VALUES ('stripe', 'evt_odd', 'charge.succeeded',"
        " 'parked', 'order_odd', 'x', '{}', now() - interval '1 hour')"
    )
    sku, _ = park_for_late_checkout(conn, "order_after_odd")
    cart_id = check_out_late(conn, sku, "order_after_odd")
    assert parked_worker(pool, port).maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_id).status == "paid"


def test_a_pass_is_recorded_and_the_next_looks_only_at_what_came_since(conn, pool, inbox):
    _, port = inbox
    worker = parked_worker(pool, port)
    sku, _ = park_for_late_checkout(conn, "order_late_three")
    check_out_late(conn, sku, "order_late_three")
    assert worker.maybe_retry_parked() == 1
    passed = last_pass(conn)
    assert passed is not None
    # A checkout from before the last pass's margin is not looked at again...
    sku, _ = park_for_late_checkout(conn, "order_late_four")
    check_out_late(conn, sku, "order_late_four")
    conn.execute(
        "UPDATE checkouts SET created_at = %s WHERE gateway_order_id = 'order_late_four'",
        (passed - MARGIN - timedelta(seconds=1),),
    )
    assert matching_parked(conn, START, limit=10, since=passed - MARGIN) == []
    # ...while one within it is found.
    conn.execute(
        "UPDATE checkouts SET created_at = %s WHERE gateway_order_id = 'order_late_four'",
        (passed - MARGIN + timedelta(seconds=1),),
    )
    assert len(matching_parked(conn, START, limit=10, since=passed - MARGIN)) == 1


REFUSE_ORDERS = (
    "CREATE FUNCTION refuse_order() RETURNS trigger LANGUAGE plpgsql AS"
    " $$ BEGIN RAISE EXCEPTION 'the order is refused'; END $$;"
    " CREATE TRIGGER refuse_order BEFORE INSERT ON orders"
    " FOR EACH ROW EXECUTE FUNCTION refuse_order()"
)


def checked_out_long_ago(conn, reference: str) -> tuple[str, str]:
    """A capture parked for its checkout, and the checkout, made before any pass's margin
    reaches back; returns (cart id, payment id)."""
    sku, payment_id = park_for_late_checkout(conn, reference)
    cart_id = check_out_late(conn, sku, reference)
    conn.execute(
        "UPDATE checkouts SET created_at = now() - %s WHERE gateway_order_id = %s",
        (MARGIN * 2, reference),
    )
    return cart_id, payment_id


def test_a_parked_delivery_whose_retry_failed_is_tried_again_at_the_next_pass(conn, pool, inbox):
    """The database refused its order once: the pass that failed on it does not move its
    watermark past it, so the next pass finds it again, though its checkout is older than
    the margin."""
    _, port = inbox
    worker = parked_worker(pool, port)
    cart_id, payment_id = checked_out_long_ago(conn, "order_late_refused")
    conn.execute(REFUSE_ORDERS)
    assert worker.maybe_retry_parked() == 0
    assert outcome_of(conn, payment_id) == "parked"
    conn.execute("DROP TRIGGER refuse_order ON orders")
    assert worker.maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_id).status == "paid"


def test_a_parked_delivery_that_always_fails_holds_the_watermark_for_a_bounded_number_of_passes(
    conn, pool, inbox
):
    """Tried again at each pass, up to PARKED_RETRIES tries; then the passes go on without it
    (it stays parked, for the parked alert and a person)."""
    _, port = inbox
    worker = parked_worker(pool, port)
    _, payment_id = checked_out_long_ago(conn, "order_late_always")
    conn.execute(REFUSE_ORDERS)
    for _ in range(PARKED_RETRIES - 1):
        assert worker.maybe_retry_parked() == 0
        assert last_pass(conn) is None
    assert worker.maybe_retry_parked() == 0
    assert last_pass(conn) is not None
    assert outcome_of(conn, payment_id) == "parked"


def test_the_pass_starts_from_recent_checkouts_never_from_every_parked_delivery(conn):
    """With many parked that match nothing and many old checkouts, a pass reads neither: the
    plan starts from the checkouts (and payments) made since the last pass, by created_at."""
    conn.execute(PARKED_JUNK, (20_000,))
    conn.execute(OLD_CARTS, (20_000,))
    conn.execute(OLD_CHECKOUTS)
    conn.execute("ANALYZE")
    params = {"since": datetime.now(UTC), "at": START[0], "provider": "", "id": "", "limit": 100}
    plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + _MATCHING_PARKED, params))
    assert "checkouts_created_at" in plan, plan
    assert "processed_webhooks_parked " not in plan + " "  # never a walk of every parked row


PARKED_JUNK = """
INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256, body,
                                merchant_ref)
SELECT 'razorpay', 'junk' || g, 'payment.captured', 'parked', md5('junk' || g), '\\x00',
       'order_foreign' || g
FROM generate_series(1, %s) AS g
"""
OLD_CARTS = """
INSERT INTO carts (id, customer_email, amount_paise)
SELECT 'cart_old' || g, 'old@example.com', 100 FROM generate_series(1, %s) AS g
"""
OLD_CHECKOUTS = """
INSERT INTO checkouts (provider, gateway_order_id, cart_id, created_at)
SELECT 'cashfree', 'old' || substr(id, 9), id, now() - interval '400 days'
FROM carts WHERE id LIKE 'cart_old%'
"""


def test_a_pass_run_once_ends_on_the_database_going_away_said_once(proxy, inbox):
    """Every duty after the first would wait out the pool's timeout in turn and fail on the
    same outage; the pass ends on it instead, for its caller to say once (``worker --once``
    said the first duty's function name)."""
    _, port = inbox
    pool = database.open_pool(proxy.url, SETTINGS, max_size=2, wait_s=1.0)
    runner = worker_for(pool, port)
    try:
        proxy.cut()
        with pytest.raises(DatabaseAway):
            runner.once()
    finally:
        proxy.restore()
        runner.close()
        pool.close()

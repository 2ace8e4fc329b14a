"""The outbox worker against a real SMTP server on loopback and real PostgreSQL."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from payhooks.service import database, outbox
from payhooks.service.mail import message_id
from payhooks.service.worker import Worker, WorkerOptions
from tests.conftest import Inbox, free_port, smtp_server
from tests.factories import SETTINGS, deliver, purchase

NO_PURGE = WorkerOptions(purge_every_seconds=None)


@pytest.fixture
def pool(database_url: str) -> Iterator[database.psycopg_pool.ConnectionPool]:
    opened = database.open_pool(database_url, SETTINGS, max_size=4, deadline=False)
    yield opened
    opened.close()


def worker_for(pool, port: int, **settings) -> Worker:
    configured = replace(
        SETTINGS,
        smtp_url=f"smtp://127.0.0.1:{port}",
        alert_email="ops@example.com",
        mail_from="shop@example.com",
    )
    return Worker(pool, replace(configured, **settings), NO_PURGE, jitter=lambda: 0.0)


def queue(conn, key: str, recipient: str | None = "buyer@example.com") -> None:
    outbox.enqueue(
        conn,
        outbox.Message(
            kind=outbox.MessageKind.EMAIL if recipient else outbox.MessageKind.ALERT,
            dedupe_key=key,
            recipient=recipient,
            subject=f"subject {key}",
            body="body",
        ),
    )


def row(conn, key: str):
    return conn.execute(
        "SELECT attempts, sent_at, failed_at, last_error, available_at > now() "
        "FROM outbox WHERE dedupe_key = %s",
        (key,),
    ).fetchone()


def test_order_confirmation_is_sent_once_with_a_stable_message_id(conn, pool, inbox):
    box, port = inbox
    receipt = deliver(conn, purchase(conn).captured())
    assert worker_for(pool, port).drain() == 1
    assert worker_for(pool, port).drain() == 0
    [mail] = box.messages
    assert mail["To"] == "buyer@example.com" and mail["From"] == "shop@example.com"
    assert mail["Message-ID"] == message_id(f"order_confirmation:{receipt.order_id}")
    assert receipt.order_id in mail.get_content()


def test_alerts_go_to_the_alert_address(conn, pool, inbox):
    box, port = inbox
    queue(conn, "alert:test", recipient=None)
    worker_for(pool, port).drain()
    assert [m["To"] for m in box.messages] == ["ops@example.com"]


def test_alert_without_an_alert_address_is_dead_lettered_with_the_reason(conn, pool, inbox):
    _, port = inbox
    queue(conn, "alert:nowhere", recipient=None)
    worker_for(pool, port, alert_email=None).drain()
    _attempts, sent, failed, error, _ = row(conn, "alert:nowhere")
    assert sent is None and failed is not None
    assert error == "PAYHOOKS_ALERT_EMAIL is not set"
    assert [f["dedupe_key"] for f in outbox.failed(conn)] == ["alert:nowhere"]


def test_permanent_rejection_is_dead_lettered_at_once(conn, pool, inbox):
    _, port = inbox
    queue(conn, "mail:reject", recipient="reject@example.com")
    worker_for(pool, port).drain()
    attempts, sent, failed, error, _ = row(conn, "mail:reject")
    assert (attempts, sent) == (1, None) and failed is not None and "550" in error


def test_temporary_rejection_is_retried_later_with_backoff(conn, pool, inbox):
    _, port = inbox
    queue(conn, "mail:later", recipient="later@example.com")
    worker_for(pool, port).drain()
    attempts, sent, failed, error, later = row(conn, "mail:later")
    assert (attempts, sent, failed, later) == (1, None, None, True) and "451" in error


def test_temporary_rejections_are_dead_lettered_after_the_last_attempt(conn, pool, inbox):
    _, port = inbox
    queue(conn, "mail:later", recipient="later@example.com")
    conn.execute("UPDATE outbox SET attempts = %s", (outbox.RetryPolicy().max_attempts - 1,))
    worker_for(pool, port).drain()
    assert row(conn, "mail:later")[2] is not None


def test_smtp_down_leaves_messages_queued_untouched_then_sends_them(conn, pool):
    port = free_port()
    queue(conn, "mail:1")
    queue(conn, "mail:2")
    assert worker_for(pool, port).drain() == 0
    assert row(conn, "mail:1")[:3] == (0, None, None)
    box = Inbox()
    with smtp_server(box, port):
        assert worker_for(pool, port).drain() == 2
    assert sorted(m["Subject"] for m in box.messages) == ["subject mail:1", "subject mail:2"]


def test_dead_letters_can_be_queued_again(conn, pool, inbox):
    box, port = inbox
    queue(conn, "alert:nowhere", recipient=None)
    worker_for(pool, port, alert_email=None).drain()
    assert outbox.revive(conn) == 1
    worker_for(pool, port).drain()
    assert [m["To"] for m in box.messages] == ["ops@example.com"]
    assert outbox.counts(conn) == {"pending": 0, "sent": 1, "failed": 0}


def test_backoff_grows_exponentially_within_jitter_and_cap():
    policy = outbox.RetryPolicy(base_seconds=10, cap_seconds=100)
    assert [policy.delay(n, 0.999999) for n in (1, 2, 3)] == pytest.approx([10, 20, 40], rel=1e-5)
    assert policy.delay(3, 0.0) == 20
    assert policy.delay(30, 0.999999) == pytest.approx(100, rel=1e-5)


def test_a_worker_without_smtp_keeps_the_emails_queued_and_does_the_rest(conn, pool):
    """Alerts by chat alone (docs/configuration.md: PAYHOOKS_SMTP_URL unset by default): the
    worker starts, sends no email and dead-letters none (each waits for a server), and its
    other duties run."""
    queue(conn, "mail:1")
    runner = Worker(pool, replace(SETTINGS, smtp_url=None), NO_PURGE, jitter=lambda: 0.0)
    try:
        assert runner.drain() == 0
        assert runner.maybe_retry_parked() == 0
    finally:
        runner.close()
    assert outbox.counts(conn) == {"pending": 1, "sent": 0, "failed": 0}


def test_worker_runs_the_purge_when_it_is_due(conn, pool, inbox):
    _, port = inbox
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256,"
        " body, processed_at) VALUES ('payu', 'old', 't', 'processed', 'x', '\\x00',"
        " now() - interval '100 days')"
    )
    configured = replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}")
    Worker(pool, configured, WorkerOptions(purge_every_seconds=0.0)).maybe_purge()
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0] == 0


def test_worker_refuses_to_purge_a_window_shorter_than_replays(conn, pool, inbox):
    _, port = inbox
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256,"
        " body, processed_at) VALUES ('payu', 'old', 't', 'processed', 'x', '\\x00',"
        " now() - interval '10 days')"
    )
    configured = replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}", retention_days=3)
    Worker(pool, configured, WorkerOptions(purge_every_seconds=0.0)).maybe_purge()
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0] == 1


def raw_smtp_server(greeting: bytes) -> tuple[socket.socket, threading.Thread]:
    """A server that answers every connection with ``greeting`` and hangs up."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with client:
                client.sendall(greeting)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize("greeting", [b"554 no service for you\r\n", b"421 busy\r\n"])
def test_a_server_refusing_the_session_dead_letters_nothing(conn, pool, greeting):
    listener, _ = raw_smtp_server(greeting)
    queue(conn, "mail:1")
    queue(conn, "mail:2")
    try:
        assert worker_for(pool, listener.getsockname()[1]).drain() == 0
    finally:
        listener.close()
    assert outbox.counts(conn) == {"pending": 2, "sent": 0, "failed": 0}
    assert row(conn, "mail:1")[0] == 0


def test_one_oversized_message_is_dead_lettered_and_does_not_block_the_rest(conn, pool):
    """The server refuses the SIZE given with MAIL FROM (552): about this message only,
    unlike other refusals of MAIL FROM, which say the server is unavailable."""
    from aiosmtpd.controller import Controller

    box = Inbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port(), data_size_limit=2000)
    controller.start()
    try:
        outbox.enqueue(
            conn,
            outbox.Message(
                kind=outbox.MessageKind.EMAIL,
                dedupe_key="big",
                recipient="b@example.com",
                subject="big",
                body="x" * 5000,
            ),
        )
        queue(conn, "small")
        worker_for(pool, controller.port).drain()
    finally:
        controller.stop()
    assert [m["Subject"] for m in box.messages] == ["subject small"]
    _, _, failed, error, _ = row(conn, "big")
    assert failed is not None and "552" in error


def test_worker_waits_out_a_database_outage_instead_of_exiting(inbox):
    _, port = inbox
    dead = database.open_pool(
        "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1",
        replace(SETTINGS, pool_timeout_ms=200),
        max_size=1,
        deadline=False,
    )
    configured = replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}")
    runner = Worker(dead, configured, WorkerOptions(poll_seconds=0.05))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60  # a liveness bound, not the test's measure
    while runner._failures < 2 and thread.is_alive():  # failed, and went on to try again
        assert time.monotonic() < deadline, "the worker never tried the database twice"
        time.sleep(0.05)
    runner.stop()
    thread.join(timeout=30)
    dead.close()
    assert not thread.is_alive() and errors == []
    assert runner._failures > 0


def test_parked_delivery_is_applied_by_the_worker_once_its_checkout_exists(conn, pool, inbox):
    from payhooks.events import Provider
    from payhooks.service.shop import carts
    from tests.factories import GATEWAY

    _, port = inbox
    buy = purchase(conn)
    orphan = GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_wk0000000001",
        order_id="order_registered_late",
        amount_paise=buy.amount_paise,
    )
    still = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_wk0000000002", order_id="order_never", amount_paise=1
    )
    assert deliver(conn, orphan).outcome == "parked" and deliver(conn, still).outcome == "parked"
    runner = Worker(
        pool,
        replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}"),
        WorkerOptions(parked_every_seconds=0.0, purge_every_seconds=None),
    )
    assert runner.maybe_retry_parked() == 0
    cart = carts.create_cart(conn, "late@example.com", [carts.LineItem(sku=buy.sku, quantity=1)])
    carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, "order_registered_late")
    assert runner.maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart.cart_id).status == "paid"
    outcomes = dict(conn.execute("SELECT payment_id, outcome FROM processed_webhooks").fetchall())
    assert outcomes == {"pay_wk0000000001": "processed", "pay_wk0000000002": "parked"}
    parked_alerts = "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'alert:parked:%%'"
    assert conn.execute(parked_alerts).fetchone()[0] == 2


def test_one_message_whose_row_refuses_to_be_marked_sent_is_backed_off_and_the_rest_are_sent(
    conn, pool, inbox
):
    box, port = inbox
    for key in ("mail:first", "mail:second", "mail:third"):
        queue(conn, key)
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_one BEFORE UPDATE ON payhooks_outbox FOR EACH ROW"
        " WHEN (NEW.dedupe_key = 'mail:first' AND NEW.sent_at IS NOT NULL)"
        " EXECUTE FUNCTION refuse_one()"
    )
    worker = worker_for(pool, port)
    assert worker.drain() == 3
    assert sorted(m["Subject"] for m in box.messages) == [
        "subject mail:first",  # taken by the server; its row says otherwise: said again later
        "subject mail:second",
        "subject mail:third",
    ]
    attempts, sent, failed, error, later = row(conn, "mail:first")
    assert (attempts, sent, failed, later) == (1, None, None, True)
    assert "refused by a trigger" in error
    conn.execute("UPDATE outbox SET attempts = %s, available_at = now()",
                 (outbox.RetryPolicy().max_attempts - 1,))  # fmt: skip
    worker.drain()
    assert row(conn, "mail:first")[2] is not None  # dead-lettered: the dead-letter alert


def test_one_recipient_the_server_refuses_holds_back_no_other_message(conn, pool, inbox):
    box, port = inbox
    queue(conn, "mail:refused", recipient="reject@example.com")
    queue(conn, "mail:fine")
    assert worker_for(pool, port).drain() == 2
    assert [m["Subject"] for m in box.messages] == ["subject mail:fine"]
    assert row(conn, "mail:refused")[2] is not None


def test_one_parked_delivery_whose_apply_fails_holds_back_no_other(conn, pool, inbox):
    from payhooks.events import Provider
    from payhooks.service.shop import carts
    from tests.factories import GATEWAY

    _, port = inbox
    buy = purchase(conn)
    names = ("order_late_first", "order_late_second")
    for n, order in enumerate(names, start=1):
        parked = GATEWAY.razorpay(
            "payment.captured", payment_id=f"pay_wk00000000p{n}", order_id=order,
            amount_paise=buy.amount_paise,
        )  # fmt: skip
        assert deliver(conn, parked).outcome == "parked"
    cart_ids = []
    for order in names:
        cart = carts.create_cart(
            conn, "late@example.com", [carts.LineItem(sku=buy.sku, quantity=1)]
        )
        carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, order)
        cart_ids.append(cart.cart_id)
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON orders FOR EACH ROW"
        f" WHEN (NEW.cart_id = '{cart_ids[0]}') EXECUTE FUNCTION refuse_one()"
    )
    runner = Worker(
        pool,
        replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}"),
        WorkerOptions(parked_every_seconds=0.0, purge_every_seconds=None),
    )
    assert runner.maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_ids[1]).status == "paid"
    assert carts.get_cart(conn, cart_ids[0]).status != "paid"


def test_one_amount_mismatch_whose_alert_is_refused_holds_back_no_other_nor_the_parked_pass(
    conn, pool, inbox
):
    _, port = inbox
    short = [purchase(conn) for _ in range(2)]
    for buy in short:
        assert deliver(conn, buy.captured(amount_paise=1)).outcome == "parked"
    conn.execute("UPDATE payhooks_amount_mismatches SET alerted_at = NULL")
    conn.execute(
        "CREATE FUNCTION refuse_one() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by a trigger'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_one BEFORE INSERT ON payhooks_outbox FOR EACH ROW"
        f" WHEN (NEW.dedupe_key LIKE '%%{short[0].payment_id}') EXECUTE FUNCTION refuse_one()"
    )
    conn.execute("DELETE FROM outbox")
    runner = Worker(
        pool,
        replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}"),
        WorkerOptions(parked_every_seconds=0.0, purge_every_seconds=None),
    )
    runner.maybe_retry_parked()
    told = conn.execute("SELECT dedupe_key FROM outbox").fetchall()
    assert told == [(f"alert:amount_mismatch:razorpay:{short[1].payment_id}",)]
    left = "SELECT payment_id FROM payhooks_amount_mismatches WHERE alerted_at IS NULL"
    assert conn.execute(left).fetchall() == [(short[0].payment_id,)]  # told on a later pass
    assert conn.execute("SELECT count(*) FROM maintenance_runs").fetchone()[0] == 1


def _two_parked_then_paid(conn, *, start: int = 1) -> list[str]:
    """Two parked Razorpay captures whose checkouts now exist; their carts' ids."""
    from payhooks.events import Provider
    from payhooks.service.shop import carts
    from tests.factories import GATEWAY

    buy = purchase(conn)
    cart_ids = []
    orders = (f"order_late_{start}", f"order_late_{start + 1}")
    for n, order in enumerate(orders, start=start):
        parked = GATEWAY.razorpay(
            "payment.captured", payment_id=f"pay_wk00000000p{n}", order_id=order,
            amount_paise=buy.amount_paise,
        )  # fmt: skip
        assert deliver(conn, parked).outcome == "parked"
        cart = carts.create_cart(
            conn, "late@example.com", [carts.LineItem(sku=buy.sku, quantity=1)]
        )
        carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, order)
        cart_ids.append(cart.cart_id)
    return cart_ids


@pytest.mark.parametrize("unreferenced", [False, True], ids=["matched", "parked before refs"])
def test_one_stored_parked_row_the_reader_cannot_take_holds_back_no_other(
    conn, pool, inbox, unreferenced
):
    """Headers stored as a JSON array make the reader raise a TypeError (not a ValueError):
    that row is logged and left parked (the parked alert tells a person); the other applies,
    in the pass over matching rows and in the one filling references of older rows alike."""
    from payhooks.service.shop import carts

    _, port = inbox
    cart_ids = _two_parked_then_paid(conn)
    conn.execute(
        "UPDATE processed_webhooks SET headers = '[1, 2]'::jsonb WHERE payment_id = %s",
        ("pay_wk00000000p1",),
    )
    if unreferenced:
        conn.execute("UPDATE processed_webhooks SET merchant_ref = NULL")
    runner = Worker(
        pool,
        replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}"),
        WorkerOptions(parked_every_seconds=0.0, purge_every_seconds=None),
    )
    assert runner.maybe_retry_parked() == 1
    assert carts.get_cart(conn, cart_ids[1]).status == "paid"
    assert carts.get_cart(conn, cart_ids[0]).status != "paid"
    left = "SELECT outcome FROM processed_webhooks WHERE payment_id = 'pay_wk00000000p1'"
    assert conn.execute(left).fetchone()[0] == "parked"


@pytest.mark.parametrize("held", ["by a lock", "past the statement timeout"])
def test_one_parked_delivery_the_database_times_out_on_holds_back_no_other(
    conn, database_url, inbox, held
):
    """A lock or statement timeout on one parked delivery (its cart held by a checkout or a
    refund in flight; a slow handler) is that delivery's: the pass goes on to the others,
    and meets it again next."""
    import psycopg

    from payhooks.service.shop import carts

    _, port = inbox
    cart_ids = _two_parked_then_paid(conn)
    bounds = {"lock_timeout_ms": 200}
    if held == "past the statement timeout":
        bounds["statement_timeout_ms"] = 500
    quick = replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}", **bounds)
    pool = database.open_pool(database_url, quick, max_size=4, deadline=False)
    runner = Worker(pool, quick, WorkerOptions(parked_every_seconds=0.0, purge_every_seconds=None))
    try:
        with psycopg.connect(database_url, autocommit=True) as holder:
            if held == "by a lock":
                holder.execute("BEGIN")
                holder.execute("SELECT 1 FROM carts WHERE id = %s FOR UPDATE", (cart_ids[0],))
            else:
                holder.execute(
                    "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS"
                    " $$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$"
                )
                holder.execute(
                    "CREATE TRIGGER slow BEFORE INSERT ON orders FOR EACH ROW"
                    f" WHEN (NEW.cart_id = '{cart_ids[0]}') EXECUTE FUNCTION slow()"
                )
            assert runner.maybe_retry_parked() == 1
            assert carts.get_cart(conn, cart_ids[1]).status == "paid"
            assert carts.get_cart(conn, cart_ids[0]).status != "paid"
            holder.execute("ROLLBACK" if held == "by a lock" else "DROP TRIGGER slow ON orders")
        assert runner.maybe_retry_parked() == 1
        assert carts.get_cart(conn, cart_ids[0]).status == "paid"
    finally:
        pool.close()


def test_a_database_slow_for_every_parked_delivery_ends_the_pass_and_exhausts_none(
    conn, database_url, inbox
):
    """Every apply past the statement timeout is the database's slowness, not the
    deliveries': the pass ends after ``TIMEOUTS_PER_PASS`` of them (the worker backs off, as
    for the database away), no delivery's retries are spent, and once the database is quick
    again every one is applied, however many slow passes came before."""
    import psycopg

    from payhooks.plumbing.errors import TimedOut
    from payhooks.service.maintenance import PARKED_RETRIES, TIMEOUTS_PER_PASS
    from payhooks.service.shop import carts

    _, port = inbox
    cart_ids = _two_parked_then_paid(conn) + _two_parked_then_paid(conn, start=3)
    assert len(cart_ids) > TIMEOUTS_PER_PASS
    quick = replace(SETTINGS, smtp_url=f"smtp://127.0.0.1:{port}", lock_timeout_ms=100,
                    statement_timeout_ms=300)  # fmt: skip
    pool = database.open_pool(database_url, quick, max_size=4, deadline=False)
    runner = Worker(pool, quick, WorkerOptions(parked_every_seconds=0.0, purge_every_seconds=None))
    try:
        with psycopg.connect(database_url, autocommit=True) as holder:
            holder.execute(
                "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$"
            )
            holder.execute("CREATE TRIGGER slow BEFORE INSERT ON orders FOR EACH ROW"
                           " EXECUTE FUNCTION slow()")  # fmt: skip
            for _ in range(PARKED_RETRIES + 1):
                with pytest.raises(TimedOut):
                    runner.maybe_retry_parked()
            holder.execute("DROP TRIGGER slow ON orders")
        assert runner.maybe_retry_parked() == len(cart_ids)
        assert {carts.get_cart(conn, c).status for c in cart_ids} == {"paid"}
    finally:
        pool.close()

"""The library as a merchant's app uses it: its own orders table, handlers by event kind, and
a claim inside the merchant's own transaction, on real PostgreSQL with real concurrency."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg.rows import dict_row

import payhooks
from payhooks import EventKind, Hooks, NotCommitted, Outcome, ingest, ingest_in_transaction
from payhooks.aio.hooks import AsyncHooks
from payhooks.intake import idempotency
from payhooks.intake.idempotency import parked as parked_deliveries
from payhooks.service import database
from payhooks.sim.gateway import Delivery
from tests.conftest import released_together
from tests.factories import ADAPTERS, GATEWAY
from tests.integration.test_migrations import CORE_TABLES

ORDERS = "CREATE TABLE merchant_orders (ref text PRIMARY KEY, paid_by text, paid_count int)"


def capture(payment_id: str = "pay_lib000000001", ref: str = "order_lib1") -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured", payment_id=payment_id, order_id=ref, amount_paise=100
    )


def merchant_hooks() -> Hooks:
    """A merchant's handler: their own orders row, counted so a second effect would show."""
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        conn.execute(
            "INSERT INTO merchant_orders VALUES (%s, %s, 1) ON CONFLICT (ref) DO UPDATE"
            " SET paid_count = merchant_orders.paid_count + 1",
            (event.merchant_ref, event.payment_id),
        )

    return hooks


@pytest.fixture
def shop(conn):
    conn.execute(ORDERS)
    return conn


def rows(conn) -> list[tuple[object, ...]]:
    return conn.execute("SELECT ref, paid_by, paid_count FROM merchant_orders").fetchall()


def claimed(conn) -> int:
    return conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]


def in_transaction(url: str, delivery: Delivery, hooks: Hooks, *, commit: bool = True):
    """Claim inside a transaction of the caller's, then ask for the answer after it ends."""
    with psycopg.connect(url) as conn:
        with conn.transaction(force_rollback=not commit):
            pending = ingest_in_transaction(
                conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, hooks
            )
        return pending.receipt()


# --- the registry ---------------------------------------------------------------------------


def test_hooks_run_for_their_kind_inside_the_claims_transaction(shop):
    delivery = capture()
    receipt = ingest(
        shop, ADAPTERS[delivery.provider], delivery.body, delivery.headers, merchant_hooks()
    )
    assert receipt.outcome is Outcome.PROCESSED
    assert rows(shop) == [("order_lib1", "pay_lib000000001", 1)]


def test_an_event_no_hook_is_registered_for_is_ignored_and_recorded(shop):
    failed = GATEWAY.razorpay(
        "payment.failed", payment_id="pay_lib2", order_id="order_lib2", amount_paise=100
    )
    receipt = ingest(shop, ADAPTERS[failed.provider], failed.body, failed.headers, merchant_hooks())
    assert receipt.outcome is Outcome.IGNORED and claimed(shop) == 1


def test_an_event_no_hook_is_registered_for_leaves_the_connection_as_it_was():
    """Nothing registered for the kind: the answer is ``ignored`` and the connection (one a
    merchant's pool lent, or a stand-in of their tests) is not touched, not even its rows'
    factory, sync or async."""
    delivery = GATEWAY.razorpay(
        "payment.failed", payment_id="pay_lib9", order_id="order_lib9", amount_paise=100
    )
    failed = ADAPTERS[delivery.provider].parse(delivery.body, delivery.headers)
    untouchable = object()
    hooks, async_hooks = Hooks(row_factory=dict_row), AsyncHooks(row_factory=dict_row)

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def captured(conn, event): ...

    @async_hooks.on(EventKind.PAYMENT_CAPTURED)
    async def captured_async(conn, event): ...

    assert hooks(untouchable, failed).outcome is Outcome.IGNORED
    assert asyncio.run(async_hooks(untouchable, failed)).outcome is Outcome.IGNORED


def test_several_hooks_for_one_kind_run_in_order_and_the_last_answer_counts(shop):
    hooks, seen = Hooks(), []

    @hooks.on(EventKind.PAYMENT_CAPTURED, EventKind.PAYMENT_AUTHORIZED)
    def first(conn, event):
        seen.append("first")

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def second(conn, event):
        seen.append("second")
        return payhooks.Applied(outcome=Outcome.PROCESSED, order_id="merchant-order-7")

    delivery = capture()
    receipt = ingest(shop, ADAPTERS[delivery.provider], delivery.body, delivery.headers, hooks)
    assert seen == ["first", "second"] and receipt.order_id == "merchant-order-7"


def test_a_hook_that_parks_ends_the_chain_and_the_delivery_stays_parked(shop):
    """A later handler's answer must not replace a park (the delivery would leave the parked
    list, its copy answered duplicate, nothing left to replay), nor its writes run before the
    replay that runs every handler again."""
    hooks, seen = Hooks(), []

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def parks(conn, event):
        seen.append("parks")
        return payhooks.Applied(outcome=Outcome.PARKED)

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def later(conn, event):
        seen.append("later")
        return payhooks.Applied(outcome=Outcome.IGNORED)

    delivery = capture()
    receipt = ingest(shop, ADAPTERS[delivery.provider], delivery.body, delivery.headers, hooks)
    assert receipt.outcome is Outcome.PARKED and seen == ["parks"]
    assert [parked.event_id for parked in parked_deliveries(shop)] == [receipt.event.event_id]


def parking() -> Hooks:
    """A merchant's handler that parks every capture (no order for it yet)."""
    hooks = Hooks()
    hooks.on(EventKind.PAYMENT_CAPTURED)(lambda conn, event: payhooks.Applied(
        outcome=Outcome.PARKED))  # fmt: skip
    return hooks


async def parked_async(url: str) -> idempotency.Listed:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as aconn:
        return await idempotency.parked_async(aconn)


@pytest.mark.parametrize("headers", ["null", "[1, 2]", "42"])
def test_a_parked_delivery_whose_headers_do_not_read_is_listed_apart_never_the_lists_end(
    shop, database_url, headers
):
    """``parked`` raised ``UnreadableRecord`` for the whole list when one row's kept headers
    were no JSON object (never written by payhooks), where the console's list, the worker's
    pass and the CLI go on past such a row: the others are listed, and that one beside them,
    with why, on either connection."""
    keys = []
    for n in range(3):
        delivery = capture(f"pay_unread00000{n}", f"order_unread{n}")
        receipt = ingest(shop, ADAPTERS[delivery.provider], delivery.body, delivery.headers,
                         parking())  # fmt: skip
        keys.append(receipt.event.event_id)
    shop.execute("UPDATE processed_webhooks SET headers = %s::jsonb WHERE event_id = %s",
                 (headers, keys[1]))  # fmt: skip
    for listed in (parked_deliveries(shop), asyncio.run(parked_async(database_url))):
        assert [p.event_id for p in listed] == [keys[0], keys[2]]
        [odd] = listed.unreadable
        assert (odd.provider, odd.event_id, odd.event_type, odd.outcome) == (
            "razorpay", keys[1], "payment.captured", "parked")  # fmt: skip
        assert odd.reason == "its stored headers are not a JSON object"


def test_a_hook_that_raises_leaves_nothing_and_the_retry_succeeds(shop):
    hooks = Hooks()
    calls = []

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def flaky(conn, event):
        calls.append(1)
        conn.execute("INSERT INTO merchant_orders VALUES ('half-done', null, 1)")
        if len(calls) == 1:
            raise RuntimeError("the merchant's code failed")

    delivery = capture()
    adapter = ADAPTERS[delivery.provider]
    with pytest.raises(RuntimeError):
        ingest(shop, adapter, delivery.body, delivery.headers, hooks)
    assert rows(shop) == [] and claimed(shop) == 0
    assert (
        ingest(shop, adapter, delivery.body, delivery.headers, hooks).outcome is Outcome.PROCESSED
    )


def test_registering_for_no_kind_is_refused():
    with pytest.raises(ValueError, match="EventKind"):
        Hooks().on()


# --- inside the caller's transaction ------------------------------------------------------------


def test_claim_and_hook_commit_with_the_callers_transaction(shop, database_url):
    assert in_transaction(database_url, capture(), merchant_hooks()).outcome == "processed"
    assert rows(shop) == [("order_lib1", "pay_lib000000001", 1)] and claimed(shop) == 1


def test_a_rolled_back_caller_leaves_nothing_and_its_receipt_refuses_to_answer(shop, database_url):
    with pytest.raises(NotCommitted, match="aborted"):
        in_transaction(database_url, capture(), merchant_hooks(), commit=False)
    assert rows(shop) == [] and claimed(shop) == 0


def test_asking_for_the_answer_before_the_commit_is_refused(shop, database_url):
    delivery = capture()
    with psycopg.connect(database_url) as conn, conn.transaction():
        pending = ingest_in_transaction(
            conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, merchant_hooks()
        )
        with pytest.raises(NotCommitted, match="after your transaction has committed"):
            pending.receipt()


def test_without_an_open_transaction_the_in_transaction_form_is_refused(shop):
    delivery = capture()
    with pytest.raises(ValueError, match="needs a transaction open"):
        ingest_in_transaction(
            shop, ADAPTERS[delivery.provider], delivery.body, delivery.headers, merchant_hooks()
        )


def test_inside_a_transaction_the_autocommit_form_is_refused(database_url):
    delivery = capture()
    with (
        psycopg.connect(database_url) as conn,
        conn.transaction(),
        pytest.raises(ValueError, match="ingest_in_transaction"),
    ):
        ingest(conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, Hooks())


def test_a_duplicate_inside_the_callers_transaction_is_answered_duplicate(shop, database_url):
    first = in_transaction(database_url, capture(), merchant_hooks())
    again = in_transaction(database_url, capture(), merchant_hooks())
    assert (first.outcome, again.outcome) == (Outcome.PROCESSED, Outcome.DUPLICATE)
    assert rows(shop)[0][2] == 1


def test_a_hook_that_raises_inside_the_callers_transaction_aborts_it(shop, database_url):
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def failing(conn, event):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        in_transaction(database_url, capture(), hooks)
    assert claimed(shop) == 0


def test_fifty_concurrent_copies_in_callers_transactions_take_effect_once(shop, database_url):
    delivery = capture()
    adapter = ADAPTERS[delivery.provider]

    def act(conn, _):
        with conn.transaction():
            pending = ingest_in_transaction(
                conn, adapter, delivery.body, delivery.headers, merchant_hooks()
            )
        return pending.receipt().outcome

    answers = released_together(list(range(50)), lambda _: psycopg.connect(database_url), act)
    assert answers.count(Outcome.PROCESSED) == 1 and len(answers) == 50
    assert rows(shop) == [("order_lib1", "pay_lib000000001", 1)]


def test_the_library_migrates_only_its_tables_into_a_merchants_database(admin_url):
    import uuid

    from psycopg.conninfo import make_conninfo

    name = f"payhooks_lib_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        with psycopg.connect(make_conninfo(admin_url, dbname=name), autocommit=True) as conn:
            payhooks.migrate(conn)
            tables = {
                r[0]
                for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            }
            assert tables == CORE_TABLES
            assert database.migrate(conn)  # the service can still be added later
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def test_a_connection_out_of_autocommit_is_a_transaction_the_caller_commits(shop, database_url):
    """Django inside atomic() and SQLAlchemy sessions hand over such a connection, with no
    statement run yet: the claim opens the transaction and the caller's commit ends it."""
    delivery = capture()
    with psycopg.connect(database_url) as conn:  # autocommit off, nothing run yet
        pending = ingest_in_transaction(
            conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, merchant_hooks()
        )
        assert claimed(shop) == 0  # not visible before the commit
        conn.commit()
        assert pending.receipt().outcome is Outcome.PROCESSED
    assert claimed(shop) == 1


def test_the_answer_can_be_asked_on_another_connection_once_committed(shop, database_url):
    delivery = capture()
    with psycopg.connect(database_url) as conn:
        pending = ingest_in_transaction(
            conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, merchant_hooks()
        )
        with pytest.raises(NotCommitted, match="after your transaction has committed"):
            pending.receipt(shop)  # another session sees it in progress
        conn.commit()
    assert pending.receipt(shop).outcome is Outcome.PROCESSED


def test_an_async_hook_is_refused_when_registered():
    """Its coroutine would never be awaited: every delivery would fail, silently at first."""
    hooks = Hooks()
    with pytest.raises(TypeError, match="async"):

        @hooks.on(EventKind.PAYMENT_CAPTURED)
        async def paid(conn, event):
            return None


def test_a_claim_in_a_savepoint_the_caller_rolls_back_is_not_answered(shop, database_url):
    """Django's nested atomic(): the inner block fails and is rolled back, the outer one
    commits. The transaction committed, the claim did not: no 200 for it."""
    delivery = capture()
    with psycopg.connect(database_url) as conn:
        with conn.transaction():
            conn.execute("INSERT INTO merchant_orders VALUES ('other-work', null, 1)")
            with conn.transaction(force_rollback=True):
                pending = ingest_in_transaction(
                    conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, Hooks()
                )
        with pytest.raises(NotCommitted, match="rolled back inside your transaction"):
            pending.receipt()
    assert claimed(shop) == 0 and rows(shop) == [("other-work", None, 1)]


def test_asking_twice_on_a_connection_out_of_autocommit_leaves_no_transaction_open(
    shop, database_url
):
    delivery = capture()
    with psycopg.connect(database_url) as conn:
        pending = ingest_in_transaction(
            conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, Hooks()
        )
        conn.commit()
        first, second = pending.receipt(), pending.receipt()
        assert first == second and first.outcome is Outcome.IGNORED
        assert conn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE

"""payhooks behind PgBouncer in transaction mode (``PAYHOOKS_DATABASE_POOL_MODE=transaction``),
more payhooks connections than PgBouncer has server connections: no session state of
payhooks' reaches another client, every transaction carries its timeouts, prepared and
pipelined statements stay correct, and the purge lock is released."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from payhooks.intake.ingest import ingest_received, receive
from payhooks.operations import outbox
from payhooks.relay.nats import JetStream, NatsOptions
from payhooks.relay.relaying import Relay, RelayOptions, connecting
from payhooks.service import database, retention
from payhooks.service.config import PoolMode, Settings
from payhooks.service.shop.payments import apply_event
from tests.brokers import NatsServer
from tests.factories import ADAPTERS, SETTINGS, deliver, purchase
from tests.scaleout.conftest import Site

POOLED = dataclasses.replace(
    SETTINGS,
    database_pool_mode=PoolMode.TRANSACTION,
    lock_timeout_ms=1234,
    statement_timeout_ms=2345,
    transaction_timeout_ms=3456,
    # Eighty deliveries at once wait for twelve connections: on a loaded machine longer than
    # the default second, which is no part of what these tests check.
    pool_timeout_ms=120_000,
)
SHOW = "SELECT current_setting('lock_timeout'), current_setting('statement_timeout')"
SHOW_DEADLINE = "SELECT current_setting('transaction_timeout')"


@pytest.fixture
def urls(site: Site) -> tuple[str, str]:
    """A fresh, migrated database: (through PgBouncer, direct)."""
    name = site.new_database()
    direct = site.direct_url(name)
    with psycopg.connect(direct, autocommit=True) as conn:
        database.migrate(conn)
    return site.pooled_url(name), direct


@pytest.fixture
def pool(urls: tuple[str, str]) -> Iterator[ConnectionPool]:
    opened = database.open_pool(urls[0], POOLED, max_size=12)
    try:
        opened.wait(timeout=30)
        yield opened
    finally:
        opened.close()


def on_threads(count: int, work) -> list[object]:
    results: list[object] = []
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            results.append(work(n))
        except BaseException as exc:  # reported in the test's own thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    return results


def test_every_transaction_carries_the_timeouts_and_no_other_client_sees_them(pool, urls):
    def shown(_: int) -> tuple[str, ...]:
        seen: tuple[str, ...] = ()
        for _ in range(10):
            with database.connection(pool) as conn, conn.transaction():
                seen = (*conn.execute(SHOW).fetchone(), *conn.execute(SHOW_DEADLINE).fetchone())  # type: ignore[misc]
        return seen

    assert set(on_threads(12, shown)) == {("1234ms", "2345ms", "3456ms")}
    with psycopg.connect(urls[0], autocommit=True, prepare_threshold=None) as other:
        for _ in range(8):  # PgBouncer's four server sessions, each met at least once
            assert (*other.execute(SHOW).fetchone(), *other.execute(SHOW_DEADLINE).fetchone()) == (  # type: ignore[misc]
                "0",
                "0",
                "0",
            )


def test_pipelined_deliveries_racing_through_pgbouncer_apply_once(pool, urls):
    with psycopg.connect(urls[1], autocommit=True) as conn:
        buys = [purchase(conn, stock=3) for _ in range(10)]
    copies = [buy.captured() for buy in buys for _ in range(4)] * 2  # past prepare_threshold

    def deliver(n: int) -> str:
        delivery = copies[n]
        received = receive(ADAPTERS[delivery.provider], delivery.body, delivery.headers)
        with database.connection(pool) as conn:
            return ingest_received(conn, received, apply_event, pipeline=True).outcome.value

    outcomes = Counter(on_threads(len(copies), deliver))
    assert outcomes == {"processed": 10, "duplicate": 70}
    with psycopg.connect(urls[1]) as conn:
        ids = [buy.cart_id for buy in buys]
        orders = conn.execute("SELECT count(*) FROM orders WHERE cart_id = ANY(%s)", (ids,))
        assert orders.fetchone()[0] == 10  # type: ignore[index]
        skus = [buy.sku for buy in buys]
        stock = conn.execute("SELECT sum(stock) FROM products WHERE sku = ANY(%s)", (skus,))
        assert stock.fetchone()[0] == 20  # type: ignore[index]


def test_the_purge_lock_holds_during_a_purge_and_is_released_after_it(pool):
    refused: list[object] = []

    def meanwhile() -> bool:
        if not refused:
            with database.connection(pool) as holder, database.connection(pool) as conn:
                refused.append(retention.purge_exclusively(conn, 90, holder=holder))
        return False

    with database.connection(pool) as holder, database.connection(pool) as conn:
        first = retention.purge_exclusively(conn, 90, holder=holder, stop=meanwhile)
    with database.connection(pool) as holder, database.connection(pool) as conn:
        again = retention.purge_exclusively(conn, 90, holder=holder)
    assert first is not None and refused == [None] and again is not None


def test_the_relay_publishes_through_pgbouncer_whichever_server_session_a_pass_meets(
    urls, tmp_path
):
    """Each pass of the relay may run on another of PgBouncer's server sessions, where a
    statement it prepared on the one before does not exist (SQLSTATE 26000, which ended the
    relay): it prepares none. Its server sessions are ended under it once it has run each of
    its statements past psycopg's prepare threshold."""
    pooled, direct = urls
    with psycopg.connect(direct, autocommit=True) as conn:
        outbox.add_channel(conn, "nats")
        for _ in range(10):
            deliver(conn, purchase(conn).captured())
    server = NatsServer(tmp_path / "nats")
    server.start()
    broker = JetStream(NatsOptions(url=server.url))

    async def published() -> list[int]:
        relay = Relay(connecting(pooled), broker, RelayOptions(batch=1))
        counts: list[int] = []
        for n in range(14):  # ten events; a pass may meet a session that just ended
            if n == 8:
                with psycopg.connect(direct, autocommit=True) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
            tally = await relay.attempt()  # None on any failure of the database: counted
            counts.append(-1 if tally is None else tally.published)
            if sum(c for c in counts if c > 0) == 10:
                break
        await relay.close()
        return counts

    try:
        counts = asyncio.run(published())
        assert counts[:8] == [1] * 8  # eight passes on whichever session, none prepared
        assert sum(c for c in counts if c > 0) == 10 and counts.count(-1) <= 1
    finally:
        server.stop()


def test_a_merchant_commands_connection_prepares_nothing_a_pooler_could_lose(urls):
    """``payhooks reconcile``, ``confirm`` and ``refunds send --database-url`` (and the library's
    ``connecting``) used psycopg's default: a statement run five times on a connection was
    prepared on the server session PgBouncer lent, and failed on the next one it lent
    (SQLSTATE 26000), though docs/scaling.md says no connection payhooks opens prepares one."""
    from payhooks.reconcile.running import connecting as merchant_connecting

    pooled, direct = urls
    with merchant_connecting(pooled)() as conn:
        for n in range(8):
            conn.execute("SELECT %s::int + 1", (n,))
        with psycopg.connect(direct, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        for n in range(3):  # the first may meet the session that just ended
            try:
                row = conn.execute("SELECT %s::int + 1", (n,)).fetchone()
            except psycopg.OperationalError:
                continue
            assert row == (n + 1,)


def test_without_transaction_mode_payhooks_cannot_connect_through_pgbouncer(urls):
    """PgBouncer refuses the ``options`` startup parameter that carries the timeouts of a
    session: the setting is needed, and its absence is loud, not a silent loss."""
    session = dataclasses.replace(POOLED, database_pool_mode=PoolMode.SESSION)
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        database.connect(urls[0], session, database.timeouts(session))


def test_settings_read_the_pool_mode():
    assert Settings.from_env({}).database_pool_mode is PoolMode.SESSION
    mode = {"PAYHOOKS_DATABASE_POOL_MODE": "transaction"}
    assert Settings.from_env(mode).database_pool_mode is PoolMode.TRANSACTION

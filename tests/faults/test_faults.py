"""The fault matrix, each against a real `payhooks serve` process and real PostgreSQL.

Every storm here ends with the storm's own invariant checks through the API, plus one of our
own: every delivery that was answered with a 2xx is committed.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from collections.abc import Callable

import httpx
import psycopg
import pytest

from payhooks.sim.gateway import Gateway
from payhooks.sim.gateway_api import GatewayApi
from payhooks.sim.storm import StormOptions, StormResult, run_storm
from tests import loopback
from tests.factories import KEYS, purchase
from tests.faults.conftest import TOKEN, eventually

# 200 simulated seconds a real second: Cashfree's three retries span 12.6 s, far more than a
# restart takes, and the stories spread over 5 s, so the fault lands mid-storm.
OPTIONS = StormOptions(carts=120, concurrency=8, time_scale=200.0, spread_s=1000.0, seed=5)


class StormThread(threading.Thread):
    """A storm running while the test breaks things; ``sent`` counts its HTTP attempts.
    ``books`` and ``reconcile`` as ``run_storm`` takes them.

    ``hold`` stops the gateways' clock while the test brings the deployment back: each sender
    waits after its next attempt until ``release``, so no retry is spent, and no delivery
    runs out of them, while a loaded machine takes its time to restart a server (its
    schedule is real time, scaled: Cashfree's three retries span 12.6 s here)."""

    def __init__(
        self,
        base: str,
        options: StormOptions = OPTIONS,
        *,
        books: GatewayApi | None = None,
        reconcile: Callable[[], object] = lambda: None,
    ) -> None:
        super().__init__(daemon=True)  # a storm left held never keeps the run from ending
        self.base, self.options = base, options
        self.books, self.reconcile = books, reconcile
        self.sent = 0
        self.result: StormResult | None = None
        self._going = threading.Event()
        self._going.set()

    def hold(self) -> None:
        self._going.clear()

    def release(self) -> None:
        self._going.set()

    def run(self) -> None:
        def progress(phase: str, advance: int, total: int | None) -> None:
            if phase == "delivering":
                self.sent += advance
                if advance:  # an attempt made (a retry counted is said under the queue's lock)
                    self._going.wait()

        self.result = run_storm(
            self.base, TOKEN, Gateway(KEYS), self.options, progress,
            books=self.books, reconcile=self.reconcile,
        )  # fmt: skip

    def finish(self) -> StormResult:
        self.join(timeout=300)
        assert self.result is not None, "the storm did not finish"
        return self.result


def violations(result: StormResult) -> list[str]:
    return [v for check in result.checks for v in check.violations]


def uncommitted(url: str, result: StormResult) -> list[tuple[str, str]]:
    """Deliveries answered 2xx whose delivery key is not in the database."""
    keys = sorted(result.tally.acknowledged)
    with psycopg.connect(url) as conn:
        stored = set(
            conn.execute(
                "SELECT provider, event_id FROM processed_webhooks WHERE (provider, event_id) IN "
                "(SELECT * FROM unnest(%s::text[], %s::text[]))",
                ([p for p, _ in keys], [e for _, e in keys]),
            ).fetchall()
        )
    return [key for key in keys if key not in stored]


def felt(result: StormResult, *answers: str) -> int:
    counts: Counter[str] = result.tally.answers
    return sum(n for answer, n in counts.items() if answer.startswith(answers))


def test_server_killed_mid_storm_and_restarted_loses_and_doubles_nothing(database_url, server_on):
    server = server_on(database_url)
    storm = StormThread(server.base)
    storm.start()
    eventually(lambda: storm.sent >= 60)
    server.kill()
    storm.hold()
    try:
        time.sleep(0.5)
        server.start()
    finally:
        storm.release()
    result = storm.finish()
    assert violations(result) == []
    assert felt(result, "no connection", "http 5") > 0, "the kill was never felt"
    assert uncommitted(database_url, result) == []


def test_postgres_stopped_mid_storm_answers_503_then_recovers_fully(stoppable_pg, server_on):
    server = server_on(stoppable_pg.url)
    storm = StormThread(server.base)
    storm.start()
    eventually(lambda: storm.sent >= 60)
    stoppable_pg.stop()
    storm.hold()
    try:
        time.sleep(1.0)
        stoppable_pg.start()
    finally:
        storm.release()
    result = storm.finish()
    assert violations(result) == []
    assert felt(result, "http 503") > 0, "the outage was never felt"
    assert felt(result, "timeout", "http 500") == 0  # no hang, no crash: only 503s
    assert uncommitted(stoppable_pg.url, result) == []


def test_sigterm_finishes_the_delivery_in_flight_and_refuses_new_ones(
    database_url, conn, server_on
):
    server = server_on(database_url)
    buy = purchase(conn)
    answers: dict[str, httpx.Response] = {}
    delivery = buy.captured()

    def in_flight() -> None:
        try:
            answers["first"] = loopback.post(
                server.base + delivery.path, content=delivery.body, headers=delivery.headers,
                timeout=30,
            )  # fmt: skip
        except httpx.HTTPError as exc:  # said by the wait below, not lost in the thread
            answers["error"] = httpx.Response(599, text=repr(exc))

    def waiting() -> bool:
        """The delivery blocked on the row; one answered (or failed) before that is said."""
        said = f"the delivery ended unblocked: {answers}"
        assert sender.is_alive(), f"{said}; the server said: {server.log.read_text()[-2000:]}"
        return blocked_by(conn, blocker.info.backend_pid)

    with psycopg.connect(database_url, autocommit=True) as blocker:
        with blocker.transaction():
            blocker.execute("SELECT 1 FROM product_stock WHERE sku = %s FOR UPDATE", (buy.sku,))
            sender = threading.Thread(target=in_flight)
            sender.start()
            eventually(waiting)
            server.signal(signal.SIGTERM)
            eventually(lambda: refused(server.base))
        sender.join(timeout=30)
    assert answers["first"].status_code == 200
    assert answers["first"].json()["status"] == "processed"
    # uvicorn re-raises SIGTERM once its graceful shutdown is done: serve ends on it through
    # Python (what runs at exit runs), exit 0
    assert server.process is not None and server.process.wait(timeout=30) == 0
    order = conn.execute("SELECT count(*) FROM orders WHERE cart_id = %s", (buy.cart_id,))
    assert order.fetchone()[0] == 1
    assert conn.execute("SELECT stock FROM products WHERE sku = %s", (buy.sku,)).fetchone()[0] == 9


def blocked_by(conn, pid: int) -> bool:
    """The delivery in flight is waiting on the row ``pid`` locked: not merely some session
    waiting on some lock (a server's own background work could), so the signal never comes
    before the request it is to let finish."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
    ).fetchone()
    return bool(row[0])


def refused(base: str) -> bool:
    """The server has stopped taking connections. A slow answer on a loaded machine is not a
    refusal: only a connection refused or dropped unanswered is."""
    try:
        loopback.get(base + "/healthz", timeout=30)
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
        return True
    return False


@pytest.mark.parametrize("carts", [60])
def test_storm_against_a_healthy_server_holds_every_invariant(database_url, server_on, carts):
    server = server_on(database_url)
    options = StormOptions(
        carts=carts, concurrency=8, time_scale=36_000.0, seed=3, stock_per_sku=12
    )
    result = run_storm(server.base, TOKEN, Gateway(KEYS), options)
    assert violations(result) == []
    assert result.orders["backordered"] > 0  # scarce stock was exercised
    assert uncommitted(database_url, result) == []

"""A commit with no end: a strictly synchronous standby that never comes back leaves every
commit on the primary waiting for it, and PostgreSQL (15 has no ``transaction_timeout``, and
no server-side timeout covers a commit's wait for its standby) never ends that wait. payhooks
bounds it from the client: past ``PAYHOOKS_TRANSACTION_TIMEOUT_MS`` the delivery's statement
is cancelled and it is answered 503, so the gateway retries and the claim decides; the pool
never runs dry. A real primary and standby of PostgreSQL's own binaries, over real HTTP."""

from __future__ import annotations

from dataclasses import replace

import psycopg

from payhooks.service.web import create_app
from payhooks.sim.standby import Cluster
from tests import loopback
from tests.conftest import serving_app
from tests.factories import SETTINGS, purchase

POOL = 2
GUARD_S = 60.0
"""How long the client waits for any answer: a liveness guard, far past the bound."""


def stranded(cluster: Cluster) -> list:
    """Checkouts made while the standby streams, then the standby lost."""
    with psycopg.connect(cluster.url_of(cluster.ports[0]), autocommit=True) as conn:
        buys = [purchase(conn) for _ in range(2 * POOL + 1)]
    cluster.lose_standby()
    return buys


def test_deliveries_whose_commit_never_ends_are_answered_503_and_the_pool_lives(
    synchronous_cluster,
):
    cluster = synchronous_cluster
    buys = stranded(cluster)
    settings = replace(SETTINGS, pool_size=POOL, transaction_timeout_ms=1500)
    app = create_app(settings, api_token="t", url=cluster.url_of(cluster.ports[0]))
    with serving_app(app) as base, loopback.Client(base_url=base, timeout=GUARD_S) as client:
        # More deliveries than the pool holds, one after another: the first capture (one
        # statement on the async pool) and an authorisation (the general path, sync pool).
        answers = []
        for buy in buys:
            for delivery in (buy.captured(), buy.delivery("authorized")):
                sent = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
                answers.append(sent.status_code)
    assert answers == [503] * len(answers)


def test_a_delivery_answered_503_so_is_a_duplicate_once_the_standby_is_back_in_name(
    synchronous_cluster,
):
    """The commit cancelled while it waited for the standby kept the delivery on the primary
    (PostgreSQL's warning: committed locally, maybe not replicated): the gateway's retry,
    once commits finish again, is answered from the claim, never applied twice."""
    cluster = synchronous_cluster
    [buy, *_] = stranded(cluster)
    settings = replace(SETTINGS, pool_size=POOL, transaction_timeout_ms=1500)
    primary = cluster.url_of(cluster.ports[0])
    app = create_app(settings, api_token="t", url=primary)
    delivery = buy.captured()
    with serving_app(app) as base, loopback.Client(base_url=base, timeout=GUARD_S) as client:
        first = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        with psycopg.connect(primary, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = ''")
            conn.execute("SELECT pg_reload_conf()")
        again = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert first.status_code == 503
    assert again.status_code == 200
    with psycopg.connect(primary, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (1,)

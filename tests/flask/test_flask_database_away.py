"""A merchant's Flask app when its database goes away and comes back (a restart, a failover)
while the engine's pool sits idle: the first delivery handed a dead connection may be answered
503 (the gateway retries it), and the deliveries after it are applied, not answered 503 once
per dead connection. The operators' reads (health, timeline) answer 503 as the webhook does
meanwhile. Through the loopback proxy of ``payhooks.sim.proxy``, or ``pg_terminate_backend``."""

from __future__ import annotations

import pytest
import sqlalchemy
from flask import Flask

import payhooks.flask
from payhooks.sim.proxy import Proxy
from tests import loopback
from tests.factories import ADAPTERS
from tests.flask.conftest import serving, sqlalchemy_url
from tests.flask.test_flask_blueprint import ORDERS, capture, flask_app, order_rows, raw_hooks

REFS = [f"order_away{i:04d}" for i in range(6)]
PAYMENTS = [f"pay_away{i:010d}" for i in range(6)]


@pytest.mark.parametrize("pre_ping", [False, True], ids=["plain", "pool_pre_ping"])
def test_after_a_quiet_outage_a_merchants_engine_answers_one_delivery_503_and_applies_the_rest(
    conn,
    proxy: Proxy,
    pre_ping: bool,
):
    """With ``pool_pre_ping`` (docs/flask.md) not even the first one is answered 503."""
    conn.execute(ORDERS)
    engine = sqlalchemy.create_engine(
        sqlalchemy_url(proxy.url), pool_size=4, pool_pre_ping=pre_ping
    )
    deliveries = [capture(paid, ref) for ref, paid in zip(REFS, PAYMENTS, strict=True)]
    webhooks = payhooks.flask.blueprint(
        adapters=ADAPTERS.values(), hooks=raw_hooks(), engine=engine
    )
    try:
        held = [engine.connect() for _ in range(4)]  # the pool holds four idle connections
        for each in held:
            each.close()
        with serving(flask_app(webhooks)) as base:
            proxy.cut()
            proxy.restore()
            answers = [
                loopback.post(base + d.path, content=d.body, headers=d.headers).status_code
                for d in (*deliveries, *deliveries)  # the second round: the gateway's retries
            ]
    finally:
        engine.dispose()
    assert answers == ([200] if pre_ping else [503]) + [200] * 11, answers
    assert sorted(order_rows(conn)) == list(zip(REFS, PAYMENTS, strict=True))


READS = [("/payhooks/health", {}), ("/payhooks/timeline", {"q": REFS[0]})]
ENDED = """
SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
"""


def reading_app(engine: sqlalchemy.Engine) -> Flask:
    app = Flask(__name__)
    for made in (payhooks.flask.health_blueprint, payhooks.flask.timeline_blueprint):
        app.register_blueprint(made(engine=engine, allow=lambda: True))
    return app


def read(base: str) -> list[tuple[int, object]]:
    answers = [loopback.get(base + path, params=query) for path, query in READS]
    return [(a.status_code, a.json().get("error")) for a in answers]


@pytest.mark.parametrize("outage", ["terminated", "away"])
def test_the_operators_reads_answer_503_json_while_the_database_is_gone_and_read_after(
    conn, database_url, proxy: Proxy, outage: str
):
    """``pg_terminate_backend`` ends every connection (the reads' own, and those the engine's
    pool holds idle); a cut proxy refuses every new one. Either way the answer is the
    webhook's, 503 ``database_unavailable`` in JSON, and reads read again once it is back."""
    url = database_url if outage == "terminated" else proxy.url
    engine = sqlalchemy.create_engine(sqlalchemy_url(url), pool_size=4)
    try:
        held = [engine.connect() for _ in range(4)]  # the pool holds four idle connections
        for each in held:
            each.close()
        with serving(reading_app(engine)) as base:
            before = read(base)
            if outage == "terminated":
                conn.execute(ENDED)
            else:
                proxy.cut()
            during = read(base)
            if outage == "away":
                proxy.restore()
            after = [*read(base), *read(base)]
    finally:
        engine.dispose()
    assert before == [(200, None)] * 2
    assert during == [(503, "database_unavailable")] * 2, during
    assert after == [(200, None)] * 4, after

"""A merchant's Flask app when its database goes away and comes back (a restart, a failover)
while the engine's pool sits idle: the first delivery handed a dead connection may be answered
503 (the gateway retries it), and the deliveries after it are applied, not answered 503 once
per dead connection. Through the loopback proxy of ``payhooks.sim.proxy``."""

from __future__ import annotations

import pytest
import sqlalchemy

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

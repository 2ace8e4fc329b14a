"""A merchant's FastAPI app when its database goes away and comes back (a restart, a failover)
while its pool sits idle: every idle connection is dead, and the first delivery handed one is
answered 503 (the gateway retries); the pool then tries the others at once, so the next
deliveries are applied, not answered 503 once per idle connection. Through the loopback proxy
of ``payhooks.sim.proxy``, cut and restored by the test."""

from __future__ import annotations

import pytest

from payhooks.sim.proxy import Proxy
from tests.fastapi.conftest import served
from tests.fastapi.merchant import KINDS, Merchant, capture, prepare
from tests.fastapi.test_fastapi_router import orders

REFS = [f"order_away{i:04d}" for i in range(6)]
PAYMENTS = [f"pay_away{i:010d}" for i in range(6)]


@pytest.mark.parametrize("kind", KINDS)
def test_after_a_quiet_outage_a_merchants_pool_answers_one_delivery_503_and_applies_the_rest(
    conn,
    kind: str,
    proxy: Proxy,
):
    prepare(conn, *REFS)
    deliveries = [capture(ref, payment_id=paid) for ref, paid in zip(REFS, PAYMENTS, strict=True)]
    merchant = Merchant(proxy.url, kind, min_size=4, max_size=4)
    with served(merchant.app) as app, app.client() as client:
        with merchant.every_connection_taken():
            pass  # all four connections opened, and idle again
        proxy.cut()
        proxy.restore()
        answers = [
            client.post(d.path, content=d.body, headers=d.headers).status_code for d in deliveries
        ]
        answers += [  # the gateway's retry of whichever was answered 503
            client.post(d.path, content=d.body, headers=d.headers).status_code for d in deliveries
        ]
    assert answers == [503] + [200] * 11, answers
    assert sorted(orders(conn)) == [(r, p, 1) for r, p in zip(REFS, PAYMENTS, strict=True)]

"""A Django project when its database goes away and comes back (a restart, a failover) while
the connections Django keeps sit idle: the delivery handed a dead one is answered 503, never
500 (the gateway retries it), and the next request has a new connection and is applied; with
``CONN_HEALTH_CHECKS`` (docs/django.md) none is handed a dead one at all. Through the loopback
proxy of ``payhooks.sim.proxy``, cut and restored by the test; served by one thread over a real
socket, so its connection is kept between requests (Django's test client skips the request
signals that close or check it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.db import connections
from orders.models import Order

from payhooks.sim.proxy import Proxy
from tests.django.conftest import point_django_at, post, records, serving
from tests.factories import GATEWAY

KEPT = {"CONN_MAX_AGE": None}
"""A connection kept by its thread between requests."""
POOLED = {"CONN_MAX_AGE": 0, "OPTIONS": {"pool": {"min_size": 3, "max_size": 3, "timeout": 10}}}
"""Django's connection pool (Django 5.1+)."""
CHECKED = {"CONN_HEALTH_CHECKS": True}


@pytest.fixture
def away(django_db: str) -> Iterator[Proxy]:
    """Django's connections through the proxy; each test sets how they are kept."""
    proxy = Proxy(django_db)
    before = dict(settings.DATABASES["default"])
    point_django_at(proxy.url)
    yield proxy
    connections.close_all()
    if connections["default"].pool is not None:
        connections["default"].close_pool()
    settings.DATABASES["default"].clear()
    settings.DATABASES["default"].update(before)
    point_django_at(django_db)
    proxy.close()


def capture(n: int):
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id=f"pay_djaway{n:05d}",
        order_id=f"order_djaway{n}",
        amount_paise=49_900,
    )


@pytest.mark.parametrize(
    ("kept", "answered"),
    [
        (KEPT, [503, 200, 200]),  # the first retried, then applied: a duplicate of nothing
        ({**KEPT, **CHECKED}, [200, 200, 200]),
        ({**POOLED, **CHECKED}, [200, 200, 200]),
    ],
    ids=["kept", "kept_checked", "pooled_checked"],
)
def test_after_an_outage_no_delivery_is_answered_500_and_none_is_lost(
    away, django_db, kept, answered
):
    settings.DATABASES["default"].update(kept)
    connections.close_all()  # the settings are read when a connection is made
    for n in range(3):
        Order.objects.create(reference=f"order_djaway{n}", amount_paise=49_900)
    with serving(threaded=False) as site:
        assert post(site, capture(0)).status_code == 200
        away.cut()
        away.restore()
        answers = [post(site, d).status_code for d in (capture(1), capture(1), capture(2))]
    assert answers == answered, answers
    assert len(records(django_db)) == 3
    connections.close_all()  # the test's own connection was cut too
    assert set(Order.objects.values_list("status", flat=True)) == {"paid"}

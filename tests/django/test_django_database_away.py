"""A Django project when its database goes away and comes back (a restart, a failover) with a
persistent connection (``CONN_MAX_AGE``) left dead: the delivery that finds it is answered 503,
never 500 (the gateway retries it), and the next request has a new connection and is applied.
Through the loopback proxy of ``payhooks.sim.proxy``, cut and restored by the test; served by
one thread over a real socket, so the thread's connection is kept between requests as a
gunicorn sync worker keeps it (Django's test client skips the request signals that close
or check it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.db import connections
from orders.models import Order
from werkzeug.serving import make_server

from payhooks.sim.proxy import Proxy
from tests.django.conftest import point_django_at, post, records
from tests.factories import GATEWAY


@pytest.fixture
def persistent(django_db: str) -> Iterator[Proxy]:
    """Django's connections through the proxy, kept open between requests."""
    proxy = Proxy(django_db)
    settings.DATABASES["default"]["CONN_MAX_AGE"] = None
    point_django_at(proxy.url)
    yield proxy
    connections.close_all()
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0
    point_django_at(django_db)
    proxy.close()


def capture(n: int):
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id=f"pay_djaway{n:05d}",
        order_id=f"order_djaway{n}",
        amount_paise=49_900,
    )


def test_a_persistent_connection_lost_answers_503_and_the_retry_is_applied(persistent, django_db):
    for n in range(3):
        Order.objects.create(reference=f"order_djaway{n}", amount_paise=49_900)
    with one_thread() as site:
        assert post(site, capture(0)).status_code == 200
        persistent.cut()
        persistent.restore()
        answers = [post(site, d).status_code for d in (capture(1), capture(1), capture(2))]
    assert answers == [503, 200, 200], answers
    assert len(records(django_db)) == 3


def test_with_health_checks_a_persistent_connection_lost_is_replaced_before_the_delivery(
    persistent, django_db
):
    """``CONN_HEALTH_CHECKS`` (docs/django.md): Django tries a kept connection before a
    request uses it, so the delivery after the outage is applied at once."""
    settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    connections.close_all()  # the setting is read when a connection is made
    try:
        for n in range(2):
            Order.objects.create(reference=f"order_djaway{n}", amount_paise=49_900)
        with one_thread() as site:
            assert post(site, capture(0)).status_code == 200
            persistent.cut()
            persistent.restore()
            assert post(site, capture(1)).status_code == 200
    finally:
        settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
    assert len(records(django_db)) == 2


def test_with_djangos_pool_and_health_checks_no_delivery_after_an_outage_fails(
    persistent, django_db
):
    """Django's connection pool (``"OPTIONS": {"pool": ...}``, docs/django.md) with
    ``CONN_HEALTH_CHECKS``: Django gives the pool psycopg_pool's check, so each connection is
    tried before a request gets it, and the dead ones the outage left are replaced."""
    options = settings.DATABASES["default"].setdefault("OPTIONS", {})
    options["pool"] = {"min_size": 3, "max_size": 3, "timeout": 10}
    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0  # a pool's connections are not kept
    settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    connections.close_all()
    try:
        for n in range(4):
            Order.objects.create(reference=f"order_djaway{n}", amount_paise=49_900)
        with one_thread() as site:
            assert post(site, capture(0)).status_code == 200
            persistent.cut()
            persistent.restore()
            answers = [post(site, capture(n)).status_code for n in (1, 2, 3)]
    finally:
        connections["default"].close_pool()
        del options["pool"]
        settings.DATABASES["default"]["CONN_HEALTH_CHECKS"] = False
    assert answers == [200, 200, 200], answers
    assert len(records(django_db)) == 4


@contextmanager
def one_thread() -> Iterator[str]:
    """The project served by one thread, every request on its one kept connection."""
    server = make_server("127.0.0.1", 0, WSGIHandler(), threaded=False)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()

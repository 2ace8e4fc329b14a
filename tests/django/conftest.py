"""Django, configured once per test session from the example shop's own settings, on real
PostgreSQL.

The session runs Django's ``migrate`` once, on a clone of the suite's template database (which
already holds the core's table, so the payhooks migration adopts it), and every test gets a
clone of that. Servers are real: Django's WSGI handler behind werkzeug's threaded server on a
loopback port, driven over HTTP.
"""

from __future__ import annotations

import logging
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import django
import httpx
import psycopg
import pytest
from django.conf import settings
from django.test import override_settings
from django.test.utils import setup_test_environment
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from werkzeug.serving import make_server

from payhooks.sim.gateway import Delivery
from tests import loopback
from tests.conftest import Databases
from tests.factories import KEYS

EXAMPLE = Path(__file__).parents[2] / "examples" / "django_shop"
PAYHOOKS = {
    "RAZORPAY_WEBHOOK_SECRETS": [KEYS.razorpay],
    "CASHFREE_CLIENT_SECRETS": [KEYS.cashfree],
    "PAYU_MERCHANT_KEY": KEYS.payu_key,
    "PAYU_SALTS": [KEYS.payu_salt],
    # A twin waits for the first copy however slow the machine; tests of the timeout set less.
    "LOCK_TIMEOUT_MS": 60_000,
}


def _configure() -> None:
    sys.path.insert(0, str(EXAMPLE))
    from django_shop import settings as shop

    values = {name: getattr(shop, name) for name in dir(shop) if name.isupper()}
    unset = {**shop.database("postgresql:///unset"), "ATOMIC_REQUESTS": False}
    # "payments": a second alias, for docs/django.md's "Several databases" (``payments_db``).
    values["DATABASES"] = {"default": unset, "payments": dict(unset)}
    values["PAYHOOKS"] = PAYHOOKS
    values["PASSWORD_HASHERS"] = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    values["ALLOWED_HOSTS"] = ["127.0.0.1", "localhost", "testserver"]
    settings.configure(**values)
    django.setup()
    setup_test_environment()  # the test client then sees templates' context and messages
    logging.getLogger("werkzeug").setLevel(logging.ERROR)


if not settings.configured:
    _configure()


def point_django_at(url: str, alias: str = "default") -> None:
    """Every thread's next connection to ``alias`` goes to ``url``: Django's connections read
    this one dict, and each request closes its own connection when it ends."""
    from django.db import connections

    connections.close_all()
    parts = conninfo_to_dict(url)
    settings.DATABASES[alias].update(
        NAME=parts.get("dbname", ""),
        USER=parts.get("user", ""),
        PASSWORD=parts.get("password", ""),
        HOST=parts.get("host", ""),
        PORT=parts.get("port", ""),
    )


def _admin(url: str, sql: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.encode())


@pytest.fixture(scope="session")
def django_template(admin_url: str, template_db: str) -> Iterator[str]:
    from django.core.management import call_command
    from django.db import connections

    name = f"payhooks_dj_tpl_{uuid.uuid4().hex[:10]}"
    _admin(admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    point_django_at(make_conninfo(admin_url, dbname=name))
    call_command("migrate", verbosity=0)
    connections.close_all()
    yield name
    _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def django_databases(admin_url: str, django_template: str) -> Iterator[Databases]:
    made = Databases(admin_url, django_template)
    yield made
    made.close()


@pytest.fixture
def django_db(admin_url: str, django_databases: Databases) -> Iterator[str]:
    """A migrated database for this test, as fresh as a clone of the Django template (emptied
    after the test before it, as ``database_url``'s), where Django's connections now point."""
    from django.db import connections

    name = django_databases.take()
    url = make_conninfo(admin_url, dbname=name)
    point_django_at(url)
    yield url
    written_behind()
    connections.close_all()
    django_databases.give_back(name)


def written_behind() -> None:
    """The view's delivery logs of every alias, each on the database its alias names now,
    written and stopped: a writer left running would reconnect to the database given back and
    say so in the log at any moment of a later test (into a command's captured stderr)."""
    from django.db import connections

    from payhooks.django.views import delivery_log

    for alias in connections:
        delivery_log(alias).stop()


@pytest.fixture
def payments_db(admin_url: str, django_template: str, django_db: str) -> Iterator[str]:
    """docs/django.md's "Several databases": a second database, a clone of the Django template,
    behind the alias ``payments``, where a router (``tests.django.routers.PaymentsRouter``)
    sends payhooks' models and the shop's orders, and ``PAYHOOKS["DATABASE"]`` may name it;
    ``default`` keeps the rest. Yields its URL."""
    from django.db import connections

    name = f"payhooks_djp_{uuid.uuid4().hex[:10]}"
    _admin(admin_url, f'CREATE DATABASE "{name}" TEMPLATE "{django_template}"')
    url = make_conninfo(admin_url, dbname=name)
    point_django_at(url, "payments")
    try:
        with override_settings(DATABASE_ROUTERS=["tests.django.routers.PaymentsRouter"]):
            yield url
    finally:
        written_behind()
        connections.close_all()
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=[False, True], ids=["autocommit", "atomic_requests"])
def atomic_requests(request: pytest.FixtureRequest, django_db: str) -> Iterator[bool]:
    """Both ways a Django project runs its views: each statement committed, or each request
    in one transaction (``ATOMIC_REQUESTS``)."""
    settings.DATABASES["default"]["ATOMIC_REQUESTS"] = request.param
    yield request.param
    settings.DATABASES["default"]["ATOMIC_REQUESTS"] = False


@contextmanager
def serving(*, threaded: bool = True) -> Iterator[str]:
    """The configured project served over a real socket; yields its base URL. Not
    ``threaded``: one thread answers every request, on the one connection it keeps (as a
    gunicorn sync worker does)."""
    from django.core.handlers.wsgi import WSGIHandler

    server = make_server("127.0.0.1", 0, WSGIHandler(), threaded=threaded)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=10)


@pytest.fixture
def site(django_db: str) -> Iterator[str]:
    with serving() as base_url:
        yield base_url


def post(base_url: str, delivery: Delivery, **headers: str) -> httpx.Response:
    return loopback.post(
        base_url + delivery.path,
        content=delivery.body,
        headers={**delivery.headers, **headers},
        timeout=30,
    )


def records(url: str) -> list[tuple[str, str, str]]:
    """(provider, delivery key, outcome) of every delivery record, read beside Django."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT provider, event_id, outcome FROM processed_webhooks ORDER BY processed_at"
        ).fetchall()

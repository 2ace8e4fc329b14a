"""A Flask app's ``DATABASE_URL`` is SQLAlchemy's (``postgresql+psycopg://``), and the docs let
a merchant hand it to payhooks as it is: every place payhooks opens a connection of its own
from an address (metrics, the delivery log, the console's pool, reconciliation, every command's
``--database-url``) takes that form as libpq's ``postgresql://``."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from payhooks import Outcome
from payhooks.aio.reconcile import applying
from payhooks.console.pages import OwnPool
from payhooks.fastapi import AsyncHooks
from payhooks.intake.ingest import restored
from payhooks.operations.deliverylog import own_connection
from payhooks.operations.metrics import wsgi_app
from payhooks.reconcile.running import connecting
from tests import loopback
from tests.acceptance.conftest import invoke
from tests.factories import ADAPTERS, GATEWAY
from tests.flask.conftest import sqlalchemy_url
from tests.integration.test_core_metrics import _value, wsgi_serving


@pytest.fixture
def alchemy_url(database_url: str) -> str:
    url = sqlalchemy_url(database_url).render_as_string(hide_password=False)
    assert url.startswith("postgresql+psycopg://")
    return url


def _own_connection(url: str) -> int:
    side = own_connection(url)
    try:
        return side.run(lambda conn: conn.execute("SELECT 1").fetchone()[0])
    finally:
        side.close()


def _own_pool(url: str) -> int:
    own = OwnPool(url)
    try:
        with own().connection() as conn:
            return conn.execute("SELECT 1").fetchone()[0]
    finally:
        own.close()


def _reconciliation(url: str) -> int:
    with connecting(url)() as conn:
        return conn.execute("SELECT 1").fetchone()[0]


OPENERS: dict[str, Callable[[str], int]] = {
    "delivery log and operator routes": _own_connection,
    "console": _own_pool,
    "reconciliation": _reconciliation,
}


@pytest.mark.parametrize("open_with", OPENERS.values(), ids=OPENERS.keys())
def test_a_connection_of_its_own_opens_on_sqlalchemys_url(alchemy_url, open_with):
    assert open_with(alchemy_url) == 1


def test_async_hooks_applied_outside_the_app_open_on_sqlalchemys_url(alchemy_url):
    """``payhooks replay --hooks`` and ``payhooks reconcile --hooks`` with async hooks."""
    d = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_url00000001", order_id="order_url1", amount_paise=100
    )
    key = d.headers["x-razorpay-event-id"]
    received = restored(ADAPTERS[d.provider], event_id=key, body=d.body, headers=d.headers)
    assert applying(alchemy_url, AsyncHooks())(received).outcome is Outcome.IGNORED


def test_the_metrics_read_on_sqlalchemys_url(alchemy_url):
    with wsgi_serving(wsgi_app(alchemy_url)) as base:
        text = loopback.get(f"{base}/", timeout=10).text
    assert _value(text, "payhooks_parked_deliveries") == "0.0", text


@pytest.mark.parametrize(
    "command",
    [["purge", "--dry-run"], ["parked"], ["operator", "list"]],
    ids=lambda c: " ".join(c),
)
def test_every_commands_database_url_takes_sqlalchemys_url(alchemy_url, command):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    environ.pop("DATABASE_URL", None)
    done = invoke(environ, *command, "--database-url", alchemy_url, timeout=120)
    assert "connection info string" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr

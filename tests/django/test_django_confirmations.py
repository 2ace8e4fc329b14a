"""PhonePe and Juspay in the example shop (examples/django_shop), served over a real socket:
their callbacks prove only who sent them, so each is answered ``confirming`` and pays nothing
by itself. The shop's own ``manage.py payhooks_reconcile``, run as docs/django.md has a merchant
run it every few seconds and configured from the environment by the shop's settings, asks the
gateway's status API (an HTTP double on a loopback socket), and the order is paid once, by what
the API reports, through the shop's ORM handler. A forged callback under the right credential
pays nothing, and is refuted."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from django.test import override_settings
from orders.models import Order

from payhooks.events import Provider
from payhooks.sim.gateway import Delivery, Purchase
from payhooks.sim.gateway_api import Fault
from payhooks.sim.proxy import Proxy
from tests.acceptance.conftest import wait_until
from tests.django.conftest import EXAMPLE, PAYHOOKS, post, serving
from tests.factories import GATEWAY, KEYS
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

REF = "order_shop1"
PAYMENT = {Provider.PHONEPE: "OM2601010000001", Provider.JUSPAY: "payhooks_demo-shop-1"}
FAILED = {Provider.PHONEPE: "FAILED", Provider.JUSPAY: "AUTHORIZATION_FAILED"}
gateway_api = reconciling.gateway_api  # its fixture


@pytest.fixture
def site(django_db: str) -> Iterator[str]:
    """The shop, its PAYHOOKS naming PhonePe's and Juspay's dashboard credentials too."""
    served = {
        **PAYHOOKS,
        "PHONEPE_WEBHOOK_CREDENTIALS": [KEYS.phonepe],
        "JUSPAY_WEBHOOK_CREDENTIALS": [KEYS.juspay],
    }
    with override_settings(PAYHOOKS=served), serving() as base_url:
        yield base_url


def callback(provider: Provider) -> Delivery:
    """What the gateway posts for a successful payment, under the dashboard's credential."""
    if provider is Provider.PHONEPE:
        return GATEWAY.phonepe(
            "checkout.order.completed", merchant_order_id=REF, amount_paise=129_900,
            transaction_id=PAYMENT[provider],
        )  # fmt: skip
    return GATEWAY.juspay(
        "ORDER_SUCCEEDED", order_id=REF, txn=PAYMENT[provider], amount_paise=129_900
    )


def answer(site: str, delivery: Delivery) -> tuple[int, str | None]:
    response = post(site, delivery)
    return response.status_code, response.json().get("status")


def checked_out_and_paid(api, provider: Provider, status: str | None = None) -> None:
    """The shop's checkout (orders/checkout.py), then the customer's payment as the gateway's
    status API will report it."""
    from orders.checkout import create_order

    create_order(provider.value, REF, 129_900)
    purchase = Purchase(
        provider=provider, cart_id=REF, reference=REF, amount_paise=129_900, items={"TEA": 1}
    )
    api.pay(purchase, PAYMENT[provider], status)


def reconcile(
    database_url: str,
    api_url: str,
    *command: str,
    keys: bool = True,
    but: str = "\0",
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``manage.py payhooks_reconcile`` (or ``command``), its settings read from the
    environment as in production: the webhook credentials and the status APIs' keys and URL
    (``keys``; those of gateway ``but`` left out). Run in this process (``in_process``) unless
    ``process``: ``manage.py`` itself, from the shop's folder."""
    env = {**os.environ, **KEYS.env(), "DATABASE_URL": database_url}
    if keys:
        env.update({k: v for k, v in API_KEYS.env(api_url).items() if but not in k})
    env.pop("DJANGO_SETTINGS_MODULE", None)
    command = command or ("payhooks_reconcile",)
    if not process:
        return in_process(env, command)
    return subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def in_process(env: dict[str, str], command: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    """``command`` through Django's ``call_command`` under the ``PAYHOOKS`` the shop's
    settings.py makes of ``env`` (this process's Django already points at the test's
    database), answered as ``manage.py`` answers: a ``CommandError`` on stderr and exit 1. The
    signal handlers a command sets are put back."""
    import runpy
    from unittest import mock

    from django.core.management import CommandError, call_command

    with mock.patch.dict(os.environ, env, clear=True):
        made = runpy.run_path(str(EXAMPLE / "django_shop" / "settings.py"))
    out, err = io.StringIO(), io.StringIO()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with override_settings(PAYHOOKS=made["PAYHOOKS"]):
            call_command(*command, stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        err.write(f"CommandError: {exc}\n")
        code = 1
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())


def orders() -> list[tuple[str, str, str]]:
    return list(Order.objects.values_list("reference", "status", "payment_id"))


def outcomes(database_url: str, provider: Provider) -> list[str]:
    """What became of the gateway's callbacks (not reconciliation's own claims)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT outcome FROM processed_webhooks WHERE provider = %s"
            " AND event_id NOT LIKE 'reconcile:%%' ORDER BY processed_at",
            (provider.value,),
        )
        return [outcome for (outcome,) in rows]


def test_payhooks_confirm_once_exits_1_while_the_status_api_fails(site, django_db, gateway_api):
    """``manage.py payhooks_confirm --once`` from cron learns the API failed, as
    ``payhooks confirm --once`` does: exit 1, the trouble on stderr; the next pass confirms."""
    api, api_url = gateway_api
    checked_out_and_paid(api, Provider.JUSPAY)
    assert answer(site, callback(Provider.JUSPAY)) == (200, "confirming")
    api.fail_next(Provider.JUSPAY, Fault(status=503))
    down = reconcile(django_db, api_url, "payhooks_confirm", "--once")
    assert down.returncode == 1
    assert "0 callback(s) confirmed by the API, 0 refuted" in down.stdout
    said = "1 gateway API error(s) (juspay 1); those callbacks are asked again later"
    assert said in down.stderr
    assert orders() == [(REF, "pending", "")]
    # A pass inside its backoff (2 s, which starting manage.py can outlast on a busy machine:
    # held out of reach here) asks nothing, and still says the callback waits after an error.
    with psycopg.connect(django_db, autocommit=True) as conn:
        conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now() + '1 hour'")
    held = reconcile(django_db, api_url, "payhooks_confirm", "--once")
    assert held.returncode == 1, held.stderr
    assert "1 callback(s) waiting to be asked again after an error (juspay 1)" in held.stderr
    with psycopg.connect(django_db, autocommit=True) as conn:
        conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    up = reconcile(django_db, api_url, "payhooks_confirm", "--once")
    assert up.returncode == 0, up.stderr
    assert orders() == [(REF, "paid", PAYMENT[Provider.JUSPAY])]


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_a_callback_pays_the_order_once_payhooks_reconcile_has_the_apis_word(
    site, django_db, gateway_api, provider
):
    api, api_url = gateway_api
    checked_out_and_paid(api, provider)
    sent = callback(provider)
    assert answer(site, sent) == (200, "confirming")  # at once: no API is asked in the request
    assert answer(site, sent) == (200, "duplicate")  # the gateway's retry of it
    assert orders() == [(REF, "pending", "")]  # a claim pays nothing by itself
    done = reconcile(django_db, api_url, process=True)  # manage.py, as cron runs it
    assert done.returncode == 0, done.stderr
    assert "1 callback(s) confirmed by the API, 0 refuted" in done.stdout
    assert orders() == [(REF, "paid", PAYMENT[provider])]  # what the API reported
    assert outcomes(django_db, provider) == ["confirmed"]
    paid_at = Order.objects.get().paid_at
    assert answer(site, sent) == (200, "duplicate")  # a late retry changes nothing
    again = reconcile(django_db, api_url)  # nor does the next pass
    assert again.returncode == 0, again.stderr
    assert "callback(s) confirmed" not in again.stdout
    assert Order.objects.get().paid_at == paid_at


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_a_forged_callback_under_the_right_credential_pays_nothing_and_is_refuted(
    site, django_db, gateway_api, provider, caplog
):
    caplog.set_level(logging.WARNING, logger="payhooks")
    api, api_url = gateway_api
    checked_out_and_paid(api, provider, FAILED[provider])  # the API knows the payment failed
    assert answer(site, callback(provider)) == (200, "confirming")
    done = reconcile(django_db, api_url)
    assert done.returncode == 0, done.stderr
    assert "0 callback(s) confirmed by the API, 1 refuted" in done.stdout
    assert "callback_refuted" in [record.getMessage() for record in caplog.records]
    assert orders() == [(REF, "pending", "")]
    assert outcomes(django_db, provider) == ["refuted"]


@pytest.mark.parametrize("provider", [Provider.PHONEPE, Provider.JUSPAY])
def test_payhooks_confirm_asks_only_about_the_waiting_callbacks_and_pays_the_order(
    site, django_db, gateway_api, provider
):
    """``manage.py payhooks_confirm``, the loop a merchant runs beside the web processes
    (here ``--once``): the waiting callback confirmed, and no checkout asked about."""
    api, api_url = gateway_api
    checked_out_and_paid(api, provider)
    assert answer(site, callback(provider)) == (200, "confirming")
    done = reconcile(django_db, api_url, "payhooks_confirm", "--once")
    assert done.returncode == 0, done.stderr
    assert "1 callback(s) confirmed by the API, 0 refuted, 1 payment event(s) applied" in (
        done.stdout
    )
    assert orders() == [(REF, "paid", PAYMENT[provider])]
    assert api.asked[(provider, REF)] == 1  # the callback's order, once: no reconciliation


def test_payhooks_confirm_once_names_a_gateway_whose_callbacks_wait_for_its_credentials(
    site, django_db, gateway_api
):
    """Juspay's callbacks waited, never asked about, while another gateway's API credentials
    were set, and ``--once`` exited 0 with an empty pass: named now, with the settings to give,
    and ``--once`` exits 1, as ``payhooks confirm --once``."""
    api, api_url = gateway_api
    checked_out_and_paid(api, Provider.JUSPAY)
    assert answer(site, callback(Provider.JUSPAY)) == (200, "confirming")
    waiting = reconcile(django_db, api_url, "payhooks_confirm", "--once", but="JUSPAY")
    assert waiting.returncode == 1
    assert (
        "Juspay: 1 callback(s) waiting, never confirmed: its API credentials are not set "
        '(PAYHOOKS["JUSPAY_MERCHANT_ID"] and PAYHOOKS["JUSPAY_API_KEY"])'
    ) in waiting.stderr
    assert orders() == [(REF, "pending", "")]
    # a reconcile pass confirms the waiting callbacks too (docs/django.md): it says so as well
    passed = reconcile(django_db, api_url, "payhooks_reconcile", but="JUSPAY")
    assert passed.returncode == 1
    assert "Juspay: 1 callback(s) waiting, never confirmed" in passed.stderr
    done = reconcile(django_db, api_url, "payhooks_confirm", "--once")
    assert done.returncode == 0, done.stderr
    assert orders() == [(REF, "paid", PAYMENT[Provider.JUSPAY])]


def test_payhooks_confirm_without_api_credentials_says_why(django_db, gateway_api):
    _, api_url = gateway_api
    done = reconcile(django_db, api_url, "payhooks_confirm", "--once", keys=False)
    assert done.returncode == 1
    assert "names no gateway's API credentials" in done.stderr
    assert "nothing can be confirmed" in done.stderr


def test_manage_py_check_warns_of_a_gateway_its_api_cannot_confirm(django_db, gateway_api):
    _, api_url = gateway_api
    done = reconcile(django_db, api_url, "check", keys=False, process=True)
    assert done.returncode == 0, done.stderr
    for title, names in (("PhonePe", "PHONEPE_CLIENT_ID and PHONEPE_CLIENT_SECRET"),
                         ("Juspay", "JUSPAY_MERCHANT_ID and JUSPAY_API_KEY")):  # fmt: skip
        assert f"(payhooks.W002) {title}'s callbacks take effect only as its status API" in (
            done.stderr
        )
        assert f"no {title} API credentials ({names})" in done.stderr
    # PayU's refund callbacks and second posts wait for its API too: they waited unwarned.
    assert "(payhooks.W002) PayU: its refund callbacks" in done.stderr
    assert "no PayU API credentials (PAYU_API_KEY and PAYU_API_SALT)" in done.stderr


@dataclass
class Daemon:
    """``manage.py payhooks_confirm --every 0.2`` on a database behind a proxy the test cuts."""

    popen: subprocess.Popen[str]
    proxy: Proxy
    lines: list[str]

    def said(self) -> str:
        return "".join(self.lines)

    def alive(self) -> bool:
        return self.popen.poll() is None


@contextmanager
def confirm_daemon(django_db: str, api_url: str) -> Iterator[Daemon]:
    proxy = Proxy(django_db)
    env = {**os.environ, **KEYS.env(), **API_KEYS.env(api_url), "DATABASE_URL": proxy.url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    popen = subprocess.Popen(
        [sys.executable, "manage.py", "payhooks_confirm", "--every", "0.2"], cwd=EXAMPLE,
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    daemon = Daemon(popen=popen, proxy=proxy, lines=[])
    assert popen.stdout is not None
    stdout = popen.stdout
    threading.Thread(target=lambda: daemon.lines.extend(stdout), daemon=True).start()
    try:
        yield daemon
    finally:
        if daemon.alive():
            popen.kill()
            popen.wait(timeout=30)
        proxy.close()


def test_payhooks_confirm_outlives_its_database_going_away_and_goes_on(django_db, gateway_api):
    """``manage.py payhooks_confirm`` exited 1 on the first database error; it
    logs the outage, waits and goes on, as the reference worker does."""
    _, api_url = gateway_api
    with confirm_daemon(django_db, api_url) as daemon:
        daemon.proxy.cut()
        wait_until(lambda: "_failed" in daemon.said() or not daemon.alive(),
                   timeout=60, what="a pass meeting the outage")  # fmt: skip
        assert daemon.alive(), daemon.said()
        daemon.proxy.restore()
        seen = daemon.said().count("_failed")
        daemon.proxy.cut()  # back, then away again: it went on passing in between
        wait_until(lambda: daemon.said().count("_failed") > seen or not daemon.alive(),
                   timeout=60, what="a later pass meeting the second outage")  # fmt: skip
        assert daemon.alive(), daemon.said()
        daemon.proxy.restore()
        daemon.popen.terminate()
        assert daemon.popen.wait(timeout=30) == 0, daemon.said()


def test_payhooks_confirm_confirms_again_once_its_database_is_back(site, django_db, gateway_api):
    """A pass that meets the outage only in its steps (each gateway's lease logged and
    skipped) raises nothing; the next passes must still reconnect, not reuse Django's dropped
    connection for ever: once the database is back, a callback is confirmed."""
    api, api_url = gateway_api
    with confirm_daemon(django_db, api_url) as daemon:
        wait_until(lambda: _leased_once(django_db) or not daemon.alive(), timeout=60,
                   what="a first pass on its connection")  # fmt: skip
        daemon.proxy.cut()
        wait_until(lambda: "_failed" in daemon.said() or not daemon.alive(),
                   timeout=60, what="a pass meeting the outage")  # fmt: skip
        daemon.proxy.restore()
        checked_out_and_paid(api, Provider.PHONEPE)
        assert answer(site, callback(Provider.PHONEPE)) == (200, "confirming")
        wait_until(lambda: orders() == [(REF, "paid", PAYMENT[Provider.PHONEPE])]
                   or not daemon.alive(), timeout=60,
                   what="the callback confirmed once the database is back")  # fmt: skip
        assert daemon.alive(), daemon.said()


def _leased_once(database_url: str) -> bool:
    """The daemon's connection has run a pass: its session last asked for due callbacks."""
    with psycopg.connect(database_url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
            " AND query LIKE '%%payhooks_confirmations%%'"
        ).fetchone()
        return bool(found and found[0])

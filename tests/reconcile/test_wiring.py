"""Reconciliation's settings, its place in the worker, the CLI, /readyz and /metrics."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from payhooks.events import Provider
from payhooks.service.config import Settings
from payhooks.service.errors import SettingError
from payhooks.service.worker import Worker, WorkerOptions
from tests import loopback
from tests.acceptance.conftest import invoke
from tests.conftest import serving
from tests.factories import KEYS, purchase
from tests.reconcile.conftest import API_KEYS, count, orders_of, paid_at_gateway, settings_for


def test_api_credentials_are_read_per_gateway_apart_from_webhook_secrets():
    settings = settings_for("http://127.0.0.1:9")
    assert set(settings.reconciled()) == set(Provider)
    assert settings.reconciled()[Provider.CASHFREE].secret == API_KEYS.cashfree_api_secret
    assert settings.webhook_secrets["PAYHOOKS_CASHFREE_CLIENT_SECRETS"] == (KEYS.cashfree,)
    assert Settings.from_env(KEYS.env()).reconciliation_off() == list(Provider)


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"PAYHOOKS_RAZORPAY_KEY_ID": "rzp_x"}, "PAYHOOKS_RAZORPAY_KEY_SECRET"),
        ({"PAYHOOKS_CASHFREE_API_SECRET": "s3cr3t-value"}, "PAYHOOKS_CASHFREE_CLIENT_ID"),
        ({"PAYHOOKS_PAYU_API_URL": "ftp://payu.example"}, "PAYHOOKS_PAYU_API_URL"),
        ({"PAYHOOKS_RECONCILE_AFTER_S": "soon"}, "PAYHOOKS_RECONCILE_AFTER_S"),
        ({"PAYHOOKS_PAYU_API_SALT": " salt ", "PAYHOOKS_PAYU_API_KEY": "k"},
         "PAYHOOKS_PAYU_API_SALT"),
    ],
)  # fmt: skip
def test_a_bad_reconciliation_setting_names_its_variable_and_never_echoes_a_secret(given, named):
    with pytest.raises(SettingError) as refused:
        Settings.from_env(given)
    assert refused.value.variable == named
    assert "s3cr3t-value" not in str(refused.value) and " salt " not in str(refused.value)


def test_the_credentials_never_appear_in_the_settings_repr():
    assert API_KEYS.razorpay_key_secret not in repr(settings_for("http://127.0.0.1:9"))


def test_readyz_says_which_gateways_have_reconciliation_off(database_url):
    partial = {k: v for k, v in API_KEYS.env("http://127.0.0.1:9").items() if "PAYU" not in k}
    settings = Settings.from_env({**KEYS.env(), **partial})
    with serving(settings, database_url) as service:
        answer = loopback.get(f"{service.base_url}/readyz")
    assert answer.status_code == 200
    assert answer.json() == {"status": "ready", "reconciliation_off": ["payu"]}


def test_metrics_count_what_reconciliation_did_by_gateway(conn, rig, database_url):
    paid_at_gateway(rig.api, purchase(conn, Provider.RAZORPAY))
    rig.run()
    with serving(rig.settings, database_url) as service:
        text = loopback.get(f"{service.base_url}/metrics").text
    assert 'payhooks_reconcile_payments_recovered_total{gateway="razorpay"} 1.0' in text
    assert 'payhooks_reconcile_checkouts_examined_total{gateway="razorpay"} 1.0' in text
    assert 'payhooks_reconcile_api_errors_total{gateway="payu"} 0.0' in text


def test_the_worker_reconciles_and_a_failing_pass_never_stops_it(conn, rig):
    buy = purchase(conn, Provider.PAYU)
    paid_at_gateway(rig.api, buy)
    configured = replace(rig.settings, smtp_url="smtp://127.0.0.1:9")
    worker = Worker(rig.pool, configured, WorkerOptions(reconcile_every_seconds=0.0))
    worker.reconciler = rig.reconciler()
    broken = rig.reconciler()
    broken.connect = None  # type: ignore[assignment]
    try:
        assert worker._guarded(_swap(worker, broken)) == 0  # logged, counted, not raised
        assert worker.maybe_reconcile() == 1
    finally:
        worker.close()
    assert len(orders_of(conn, buy.cart_id)) == 1


def _swap(worker, broken):
    good = worker.reconciler

    def step():
        worker.reconciler = broken
        try:
            return worker.maybe_reconcile()
        finally:
            worker.reconciler = good
            worker._last_reconcile = None

    return step


def test_payhooks_reconcile_prints_one_line_and_recovers_the_payment(conn, rig, database_url):
    buy = purchase(conn, Provider.CASHFREE)
    paid_at_gateway(rig.api, buy)
    env = {**os.environ, **KEYS.env(), **API_KEYS.env(rig.url), "DATABASE_URL": database_url}
    done = _cli(env, "reconcile", "--older-than-s", "0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("examined 1 checkout(s)")
    assert "recovered 1 payment(s)" in done.stdout
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert count(conn, "SELECT count(*) FROM payhooks_reconcile") == 1


def test_the_commands_wait_for_a_slow_database_as_a_command_may_not_as_a_webhook(conn, rig, proxy):
    """A command's pool waited for a connection as long as a webhook may (``pool_timeout_ms``,
    1 s): on a database slow to connect, a loaded one, ``payhooks reconcile`` from cron failed
    "database unavailable: no connection to it in time". A command run once waits as long as
    a command may (``database.PATIENT_WAIT_S``)."""
    buy = purchase(conn, Provider.CASHFREE)
    paid_at_gateway(rig.api, buy)
    proxy.connect_delay_s = 1.5
    env = {**os.environ, **KEYS.env(), **API_KEYS.env(rig.url), "DATABASE_URL": proxy.url}
    done = _cli(env, "reconcile", "--older-than-s", "0")
    assert done.returncode == 0, done.stderr
    assert "recovered 1 payment(s)" in done.stdout


def test_payhooks_reconcile_without_credentials_says_so(database_url):
    env = {**os.environ, **KEYS.env(), "DATABASE_URL": database_url}
    done = _cli(env, "reconcile")
    assert done.returncode == 1
    assert done.stderr.strip().startswith("payhooks: no gateway API credentials")


def test_payhooks_reconcile_exits_1_on_api_errors_with_a_one_line_cause(conn, rig, database_url):
    from payhooks.sim.gateway_api import Fault

    paid_at_gateway(rig.api, purchase(conn, Provider.RAZORPAY))
    rig.api.fail_next(Provider.RAZORPAY, Fault(status=503))
    env = {**os.environ, **KEYS.env(), **API_KEYS.env(rig.url), "DATABASE_URL": database_url}
    done = _cli(env, "reconcile", "--older-than-s", "0")
    assert done.returncode == 1
    assert "1 API error(s)" in done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith("payhooks: 1 gateway API error")


def _cli(env, *args):
    """The command, in this process (test_merchant.py runs the installed one)."""
    return invoke(env, *args, timeout=120)


REFUSED_ALERTS = "SELECT count(*) FROM outbox WHERE dedupe_key LIKE 'alert:reconcile_refused:%%'"
"""The outbox email an earlier release queued beside the alerts' own condition: two emails
for one refusal."""


def _wrong_salt(rig):
    wrong = tuple(
        replace(c, secret="wrong") if c.provider is Provider.PAYU else c
        for c in rig.settings.api_credentials
    )
    rig.settings = replace(rig.settings, api_credentials=wrong)


def test_a_wrong_payu_salt_is_counted_and_kept_as_the_checkouts_last_error(conn, rig):
    buy = purchase(conn, Provider.PAYU)
    paid_at_gateway(rig.api, buy)
    _wrong_salt(rig)
    tally = rig.run(providers=(Provider.PAYU,))
    assert tally.api_errors[Provider.PAYU] == 1
    errors = conn.execute("SELECT last_error, next_attempt_at - now() FROM payhooks_reconcile")
    [(last_error, wait)] = errors.fetchall()
    assert last_error == "refused: Invalid Hash."
    assert wait.total_seconds() <= 61  # asked again soon, not backed off as if abandoned
    assert orders_of(conn, buy.cart_id) == []


def test_refused_credentials_reach_an_operator_once_and_clear_when_fixed(conn, rig, database_url):
    for _ in range(3):
        paid_at_gateway(rig.api, purchase(conn, Provider.PAYU))
    good = rig.settings
    _wrong_salt(rig)
    for _ in range(3):
        conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
        tally = rig.run(providers=(Provider.PAYU,))
        assert tally.api_errors[Provider.PAYU] == 1  # the gateway is paused at the first
    assert count(conn, REFUSED_ALERTS) == 0  # one alert, the alerts' own: not an email beside
    from payhooks.operations import alerts

    raised = [a for a in alerts.reconciliation(conn, datetime.now(UTC))
              if a.condition is alerts.Condition.RECONCILE_REFUSED]  # fmt: skip
    assert [a.subject for a in raised] == ["payu"]
    assert "check PAYHOOKS_PAYU_" in raised[0].body  # which settings to fix
    with serving(good, database_url) as service:
        ready = loopback.get(f"{service.base_url}/readyz")
        text = loopback.get(f"{service.base_url}/metrics").text
    assert ready.status_code == 200  # webhooks are still served
    assert ready.json()["reconciliation_refused"] == {"payu": "refused: Invalid Hash."}
    assert 'payhooks_reconcile_credentials_refused{gateway="payu"} 1.0' in text
    assert 'payhooks_reconcile_credentials_refused{gateway="razorpay"} 0.0' in text
    rig.settings = good
    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
    rig.run(providers=(Provider.PAYU,))
    with serving(good, database_url) as service:
        ready = loopback.get(f"{service.base_url}/readyz")
    assert "reconciliation_refused" not in ready.json()
    assert count(conn, "SELECT count(*) FROM orders") == 3


def test_the_worker_confirms_a_callback_on_its_next_tick_not_its_next_pass(conn, rig):
    """The reference worker asks about a PhonePe callback every tick (a second), not once a
    minute with the checkouts: the order is placed by what the API reports, once."""
    from payhooks.intake.ingest import Outcome
    from tests.factories import deliver

    buy = purchase(conn, Provider.PHONEPE)
    paid_at_gateway(rig.api, buy)
    assert deliver(conn, buy.captured()).outcome is Outcome.CONFIRMING
    assert orders_of(conn, buy.cart_id) == []
    configured = replace(rig.settings, smtp_url="smtp://127.0.0.1:9")
    worker = Worker(rig.pool, configured, WorkerOptions(reconcile_every_seconds=None))
    worker.reconciler = rig.reconciler()
    try:
        assert worker.maybe_reconcile() == 0  # the checkout pass is off here
        assert worker.confirm_callbacks() == 1
        assert worker.confirm_callbacks() == 0  # nothing waits any more
    finally:
        worker.close()
    assert len(orders_of(conn, buy.cart_id)) == 1
    said = conn.execute("SELECT verdict FROM payhooks_confirmations").fetchall()
    assert said == [("confirmed",)]


def test_the_worker_fetches_the_settlement_reports_of_the_last_days_when_due(conn, rig):
    from datetime import UTC, datetime

    from tests.factories import deliver
    from tests.reconcile.conftest import sim

    buy = purchase(conn, Provider.RAZORPAY)
    rig.api.pay(sim(buy), buy.payment_id)
    deliver(conn, buy.captured())
    rig.api.pay_out(Provider.RAZORPAY, at=int(datetime.now(UTC).timestamp()))
    configured = replace(rig.settings, smtp_url="smtp://127.0.0.1:9")
    worker = Worker(rig.pool, configured, WorkerOptions(settlements_every_seconds=3600.0))
    worker.reconciler = rig.reconciler()
    try:
        assert worker.maybe_fetch_settlements() == 1  # the payout's one line, matched
        assert worker.maybe_fetch_settlements() == 0  # not due again for an hour
    finally:
        worker.close()
    matched = conn.execute("SELECT matched FROM payhooks_settlement_lines").fetchall()
    assert matched == [(True,)]


def settling_worker(conn, rig, **options):
    """A worker fetching settlements hourly, retrying a failed fetch as ``options`` say, and a
    Razorpay capture paid out today."""
    from datetime import UTC, datetime

    from tests.factories import deliver
    from tests.reconcile.conftest import sim

    buy = purchase(conn, Provider.RAZORPAY)
    rig.api.pay(sim(buy), buy.payment_id)
    deliver(conn, buy.captured())
    rig.api.pay_out(Provider.RAZORPAY, at=int(datetime.now(UTC).timestamp()))
    configured = replace(rig.settings, smtp_url="smtp://127.0.0.1:9")
    every = WorkerOptions(settlements_every_seconds=3600.0, **options)
    worker = Worker(rig.pool, configured, every)
    worker.reconciler = rig.reconciler()
    return worker


def test_a_settlement_fetch_that_raised_is_tried_again_before_its_next_turn(conn, rig):
    """The review refused by the database: the fetch raises. The worker does not count it as
    fetched, so the next review is not six hours away: it flags the capture a month old that
    no payout settled."""
    from tests.factories import deliver

    worker = settling_worker(conn, rig, settlements_retry_seconds=0.0)
    old = purchase(conn, Provider.RAZORPAY)
    deliver(conn, old.captured())
    conn.execute(
        "UPDATE payhooks_payments SET applied_at = now() - interval '30 days'"
        " WHERE payment_id = %s",
        (old.payment_id,),
    )
    conn.execute(
        "CREATE FUNCTION refuse_review() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'the review is refused'; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_review BEFORE INSERT ON payhooks_unsettled"
        " FOR EACH STATEMENT EXECUTE FUNCTION refuse_review()"
    )
    try:
        with pytest.raises(Exception, match="the review is refused"):
            worker.maybe_fetch_settlements()
        conn.execute("DROP TRIGGER refuse_review ON payhooks_unsettled")
        worker.maybe_fetch_settlements()
    finally:
        worker.close()
    flagged = conn.execute("SELECT payment_id FROM payhooks_unsettled").fetchall()
    assert flagged == [(old.payment_id,)]


def test_a_settlement_fetch_a_gateway_failed_in_is_tried_again_before_its_next_turn(conn, rig):
    from payhooks.sim.gateway_api import Fault

    worker = settling_worker(conn, rig, settlements_retry_seconds=0.0)
    rig.api.fail_next(Provider.RAZORPAY, Fault(status=503))
    try:
        assert worker.maybe_fetch_settlements() == 0  # Razorpay answered 503
        assert worker.maybe_fetch_settlements() == 1  # asked again: the payout's one line
        assert worker.maybe_fetch_settlements() == 0  # read whole: not due for an hour
    finally:
        worker.close()

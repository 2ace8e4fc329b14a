"""Reconciliation in a merchant's own app: its database (the core's tables and its own), its
handlers, its scheduler; against the status-API double over a loopback socket. A checkout paid
at the gateway whose webhook never came is recovered through the merchant's handler once; the
late webhook changes nothing; an underpaid payment never reaches the handler."""

from __future__ import annotations

import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

import payhooks
from payhooks import EventKind, Hooks, Outcome, ingest
from payhooks.aio.reconcile import run as fastapi_run
from payhooks.events import Provider
from payhooks.reconcile import run
from payhooks.sim.gateway import Purchase
from tests.factories import ADAPTERS, GATEWAY
from tests.invoking import in_process
from tests.reconcile.conftest import API_KEYS
from tests.reconcile.merchant_hooks import ORDERS, async_hooks, hooks, mark_paid

ROOT = Path(__file__).parents[2]
REF = "order_mer0000000001"
PAYMENT = "pay_mer00000000001"


@pytest.fixture
def shop(database_url, gateway_api):
    """The merchant's database with an order checked out at Razorpay for 499.00."""
    api, url = gateway_api
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(ORDERS)
        with conn.transaction():
            conn.execute("INSERT INTO merchant_orders (ref, amount) VALUES (%s, 49900)", (REF,))
            payhooks.expect(conn, "razorpay", REF, 49_900, "INR", "A-1")
        yield conn, api, API_KEYS.env(url)


def paid_at_gateway(api, amount: int = 49_900) -> None:
    order = Purchase(provider=Provider.RAZORPAY, cart_id="A-1", reference=REF,
                     amount_paise=amount, items={"TEA": 1})  # fmt: skip
    api.pay(order, PAYMENT)


def paid(conn) -> tuple[str | None, int]:
    return conn.execute(
        "SELECT paid_by, paid_count FROM merchant_orders WHERE ref = %s", (REF,)
    ).fetchone()


def webhook():
    return GATEWAY.razorpay(
        "payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=49_900
    )


def test_a_payment_whose_webhook_never_came_reaches_the_handler_once(shop, database_url):
    conn, api, env = shop
    paid_at_gateway(api)
    tally = run(database_url, hooks, environ=env, after_s=0)
    assert sum(tally.recovered.values()) == 1
    assert paid(conn) == (PAYMENT, 1)
    # Later passes and the late webhook change nothing.
    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
    run(database_url, hooks, environ=env, after_s=0)
    delivery = webhook()
    late = ingest(conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, hooks)
    assert late.outcome is Outcome.DUPLICATE
    assert paid(conn) == (PAYMENT, 1)


def test_a_payment_its_webhook_brought_is_not_applied_again(shop, database_url):
    conn, api, env = shop
    paid_at_gateway(api)
    delivery = webhook()
    ingest(conn, ADAPTERS[delivery.provider], delivery.body, delivery.headers, hooks)
    tally = run(database_url, hooks, environ=env, after_s=0)
    assert sum(tally.examined.values()) == 1 and sum(tally.recovered.values()) == 0
    assert paid(conn) == (PAYMENT, 1)


def test_an_underpaid_payment_found_by_reconciliation_never_reaches_the_handler(shop, database_url):
    conn, api, env = shop
    with conn.transaction():
        payhooks.expect(conn, "razorpay", REF, 59_900, "INR", "A-1")  # the price went up
    paid_at_gateway(api, amount=49_900)
    run(database_url, hooks, environ=env, after_s=0)
    assert paid(conn) == (None, 0)
    held = conn.execute(
        "SELECT expected_paise, paid_paise FROM payhooks_amount_mismatches"
    ).fetchall()
    assert held == [(59_900, 49_900)]


def test_checkouts_younger_than_the_age_are_left_to_their_webhook(shop, database_url):
    conn, api, env = shop
    paid_at_gateway(api)
    tally = run(database_url, hooks, environ=env)  # after_s: 15 minutes by default
    assert sum(tally.examined.values()) == 0 and paid(conn) == (None, 0)


def test_one_credential_without_the_other_is_refused_naming_the_missing_one(database_url):
    with pytest.raises(ValueError, match="PAYHOOKS_RAZORPAY_KEY_SECRET is not set"):
        run(database_url, hooks, environ={"PAYHOOKS_RAZORPAY_KEY_ID": "rzp_test_1"})


@pytest.mark.parametrize("target", ["hooks", "async_hooks"])
def test_the_command_runs_a_pass_through_the_apps_own_hooks(shop, database_url, target):
    conn, api, env = shop
    paid_at_gateway(api)
    done = subprocess.run(
        [Path(sys.executable).parent / "payhooks", "reconcile", "--older-than-s", "0",
         "--hooks", f"tests.reconcile.merchant_hooks:{target}", "--database-url", database_url],
        env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "recovered 1 payment(s) no webhook brought" in done.stdout
    assert paid(conn) == (PAYMENT, 1)


def test_a_failed_checkout_fails_the_pass_that_asked_not_every_pass_of_its_backoff(
    shop, database_url
):
    """``payhooks reconcile`` from cron: the pass whose call failed exits 1; a pass inside
    that checkout's backoff asked nothing and exits 0. A callback waiting after an error keeps
    every pass failing until a person settles it; a checkout cannot be settled by hand (an
    order never created at the gateway fails until it leaves the window, a week), so it fails
    the passes that ask about it, and the ``reconcile_failing`` alert says it lasts."""
    from payhooks.sim.gateway_api import Fault

    conn, api, env = shop
    paid_at_gateway(api)
    api.fail_next(Provider.RAZORPAY, Fault(status=500))
    args = ("reconcile", "--older-than-s", "0", "--hooks", "tests.reconcile.merchant_hooks:hooks",
            "--database-url", database_url)  # fmt: skip
    failed = _payhooks(*args, env=env)
    assert failed.returncode == 1 and "1 gateway API error(s) (razorpay 1)" in failed.stderr
    held = _payhooks(*args, env=env)
    assert "examined 0 checkout(s)" in held.stdout
    assert (held.returncode, held.stderr) == (0, ""), held.stdout
    conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
    done = _payhooks(*args, env=env)
    assert done.returncode == 0, done.stderr
    assert paid(conn) == (PAYMENT, 1)


def test_the_command_says_what_is_wrong_with_the_hooks_it_is_given(shop, database_url):
    _, _, env = shop
    done = subprocess.run(
        [Path(sys.executable).parent / "payhooks", "reconcile",
         "--hooks", "tests.reconcile.merchant_hooks", "--database-url", database_url],
        env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "--hooks takes module:attribute" in done.stderr and "Traceback" not in done.stderr


def _payhooks(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``payhooks *args`` in this process (typer's runner), answered as the command's own
    process would be: the two tests above run the real command."""
    done = in_process(list(args), env)
    return subprocess.CompletedProcess(args, done.exit_code, done.stdout, done.stderr)


@pytest.mark.parametrize("target", ["hooks", "async_hooks"])
def test_a_parked_delivery_is_listed_and_replayed_through_the_apps_hooks(
    shop, database_url, target
):
    import json

    from tests.factories import KEYS

    conn, _, _ = shop
    short = GATEWAY.razorpay(
        "payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=44_900
    )
    parked = ingest(conn, ADAPTERS[short.provider], short.body, short.headers, hooks)
    assert parked.outcome is Outcome.PARKED and paid(conn) == (None, 0)
    listed = _payhooks("parked", "--json", "--database-url", database_url, env={})
    assert [row["event_id"] for row in json.loads(listed.stdout)] == [parked.event.event_id]
    with conn.transaction():  # an offer the shop had not told payhooks about
        payhooks.expect(conn, "razorpay", REF, 44_900, "INR", "A-1")
    done = _payhooks(
        "replay", parked.event.event_id, "--hooks", f"tests.reconcile.merchant_hooks:{target}",
        "--database-url", database_url, env=KEYS.env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "processed"
    assert paid(conn) == (PAYMENT, 1)


def test_a_replay_whose_handler_raises_or_whose_secret_is_unset_says_so_in_one_line(
    shop, database_url
):
    """The merchant's handler raising, or the app's own secret not in the environment: one
    line naming what to do, exit 1, and the delivery still parked (nothing kept)."""
    import json

    from tests.factories import KEYS

    conn, _, _ = shop
    bad = "order_replaybad"
    with conn.transaction():
        payhooks.expect(conn, "razorpay", bad, 44_900, "INR", "A-9")
    short = GATEWAY.razorpay("payment.captured", payment_id="pay_RB1", order_id=bad,
                             amount_paise=40_000)  # fmt: skip
    parked = ingest(conn, ADAPTERS[short.provider], short.body, short.headers, hooks)
    assert parked.outcome is Outcome.PARKED
    with conn.transaction():  # the price corrected: the replay now reaches the handler
        payhooks.expect(conn, "razorpay", bad, 40_000, "INR", "A-9")
    args = ("replay", parked.event.event_id, "--hooks", "tests.reconcile.merchant_hooks:fussy",
            "--database-url", database_url)  # fmt: skip
    raised = _payhooks(*args, env=KEYS.env())
    assert raised.returncode == 1
    assert raised.stderr.strip().splitlines() == [
        "payhooks: your handler raised RuntimeError: the handler's bug (nothing kept)"
    ]
    unset = {name: "" for name in KEYS.env() if name.startswith("PAYHOOKS_RAZORPAY_WEBHOOK")}
    unsecret = _payhooks(*args, env={**KEYS.env(), **unset})
    assert unsecret.returncode == 1 and "Traceback" not in unsecret.stderr
    assert "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS" in unsecret.stderr
    listed = _payhooks("parked", "--json", "--database-url", database_url, env={})
    assert [row["event_id"] for row in json.loads(listed.stdout)] == [parked.event.event_id]


def test_payhooks_fastapi_replay_applies_a_parked_delivery_through_async_hooks(shop):
    import asyncio

    from payhooks.fastapi import replay
    from payhooks.intake.idempotency import parked
    from tests.reconcile.merchant_hooks import async_hooks

    conn, _, _ = shop
    short = GATEWAY.razorpay(
        "payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=44_900
    )
    ingest(conn, ADAPTERS[short.provider], short.body, short.headers, hooks)
    with conn.transaction():
        payhooks.expect(conn, "razorpay", REF, 44_900, "INR", "A-1")
    [stored] = parked(conn)

    async def go():
        async with await psycopg.AsyncConnection.connect(conn.info.dsn, autocommit=True) as on:
            return await replay(on, ADAPTERS[Provider.RAZORPAY], stored, async_hooks)

    assert asyncio.run(go()).outcome is Outcome.PROCESSED
    assert paid(conn) == (PAYMENT, 1)


def test_a_handler_failing_on_one_payment_never_holds_back_the_others(shop, database_url):
    """The one checkout backs off with the handler's error; every other is applied, and the
    command says a payment was not applied (exit 1)."""
    conn, api, env = shop
    refs = ["order_mer_bad", "order_mer_ok1", "order_mer_ok2"]
    with conn.transaction():
        for ref in refs:
            conn.execute("INSERT INTO merchant_orders (ref, amount) VALUES (%s, 100)", (ref,))
            payhooks.expect(conn, "razorpay", ref, 100)
    for n, ref in enumerate(refs):
        order = Purchase(provider=Provider.RAZORPAY, cart_id=ref, reference=ref,
                         amount_paise=100, items={"TEA": 1})  # fmt: skip
        api.pay(order, f"pay_mer_fussy{n}")
    done = _payhooks(
        "reconcile", "--older-than-s", "0", "--hooks", "tests.reconcile.merchant_hooks:fussy",
        "--database-url", database_url, env=env,
    )  # fmt: skip
    assert done.returncode == 1
    assert "1 payment(s) a handler or the database failed on" in done.stderr
    paid_refs = conn.execute(
        "SELECT ref FROM merchant_orders WHERE paid_count = 1 ORDER BY ref"
    ).fetchall()
    assert paid_refs == [("order_mer_ok1",), ("order_mer_ok2",)]
    row = conn.execute(
        "SELECT attempts, last_error FROM payhooks_reconcile WHERE gateway_order_id = %s",
        ("order_mer_bad",),
    ).fetchone()
    assert row[0] == 1 and "the handler's bug" in row[1]


def test_a_handler_failing_on_one_payment_of_an_order_never_holds_back_the_next(shop, database_url):
    """A Razorpay order with a failed attempt and then the capture; the handler fails on the
    failed attempt, every pass. The capture is applied all the same, and the checkout says
    which payment failed, once."""
    conn, api, env = shop
    order = Purchase(provider=Provider.RAZORPAY, cart_id="A-1", reference=REF,
                     amount_paise=49_900, items={"TEA": 1})  # fmt: skip
    api.pay(order, "pay_mer_failed0001", "failed")
    api.pay(order, PAYMENT)
    picky = Hooks()

    @picky.on(EventKind.PAYMENT_FAILED)
    def refuse(conn, event):
        raise RuntimeError("the handler's bug")

    picky.on(EventKind.PAYMENT_CAPTURED)(mark_paid)
    tally = run(database_url, picky, environ=env, after_s=0)
    assert paid(conn) == (PAYMENT, 1)
    assert tally.applied[Provider.RAZORPAY] == 1 and tally.unapplied[Provider.RAZORPAY] == 1
    attempts, error = conn.execute(
        "SELECT attempts, last_error FROM payhooks_reconcile WHERE gateway_order_id = %s", (REF,)
    ).fetchone()
    assert attempts == 1
    assert "pay_mer_failed0001" in error and "the handler's bug" in error
    assert PAYMENT not in error


def test_a_payment_reconciliation_parked_is_replayed_through_the_library(shop, database_url):
    """Its stored body is the status API's payment, not a webhook: replay reads it with the
    gateway's status reader."""
    from payhooks.intake.idempotency import parked
    from payhooks.intake.ingest import replay

    conn, api, env = shop
    paid_at_gateway(api, amount=44_900)
    run(database_url, hooks, environ=env, after_s=0)
    [stored] = parked(conn)
    assert stored.event_id.startswith("reconcile:") and paid(conn) == (None, 0)
    with conn.transaction():
        payhooks.expect(conn, "razorpay", REF, 44_900, "INR", "A-1")
    again = replay(conn, ADAPTERS[Provider.RAZORPAY], stored, hooks)
    assert again.outcome is Outcome.PROCESSED and paid(conn) == (PAYMENT, 1)


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("tests.reconcile.no_such_module:hooks", "cannot import tests.reconcile.no_such_module"),
        ("tests.reconcile.merchant_hooks:nothing", "has no handler named 'nothing'"),
        # a name it has, of no handler (it was said to have no such name)
        ("tests.reconcile.merchant_hooks:ORDERS", "names a str, not a payhooks.Hooks"),
        ("tests.reconcile.merchant_hooks:mark_paid_async", "is an async function"),
    ],
)
def test_the_command_refuses_hooks_it_cannot_use_saying_why(shop, database_url, target, words):
    _, _, env = shop
    done = _payhooks("reconcile", "--hooks", target, "--database-url", database_url, env=env)
    assert done.returncode == 1
    assert words in done.stderr and "Traceback" not in done.stderr


def test_the_command_resolves_a_mismatch_and_refuses_anything_else(shop, database_url):
    conn, _, _ = shop
    short = GATEWAY.razorpay("payment.captured", payment_id=PAYMENT, order_id=REF, amount_paise=1)
    key = ingest(conn, ADAPTERS[short.provider], short.body, short.headers, hooks).event.event_id
    args = ("--provider", "razorpay", "--note", "refunded", "--database-url", database_url)
    done = _payhooks("resolve", key, *args, env={})
    assert done.returncode == 0, done.stderr
    assert "resolved razorpay" in done.stdout
    again = _payhooks("resolve", key, *args, env={})
    assert again.returncode == 1 and "is not parked" in again.stderr


# Every door reads PAYHOOKS_RECONCILE_* as the CLI and Django do (docs/operations.md).
DOORS = {
    "library": lambda url, environ, **reach: run(url, hooks, environ=environ, **reach),
    "fastapi": lambda url, environ, **reach: fastapi_run(
        url, async_hooks, environ=environ, **reach
    ),
}


def aged(conn, seconds: int) -> None:
    conn.execute(
        "UPDATE payhooks_expectations SET created_at = now() - make_interval(secs => %s)",
        (seconds,),
    )


@pytest.mark.parametrize("door", list(DOORS))
def test_a_pass_takes_its_reach_from_the_environment(shop, database_url, door):
    """A checkout two minutes old is asked about with PAYHOOKS_RECONCILE_AFTER_S=60; left
    alone with the default (15 minutes)."""
    conn, api, env = shop
    paid_at_gateway(api)
    aged(conn, 120)
    assert sum(DOORS[door](database_url, env).recovered.values()) == 0
    tally = DOORS[door](database_url, {**env, "PAYHOOKS_RECONCILE_AFTER_S": "60"})
    assert sum(tally.recovered.values()) == 1
    assert paid(conn) == (PAYMENT, 1)


@pytest.mark.parametrize("door", list(DOORS))
def test_the_environments_window_leaves_an_older_checkout_alone(shop, database_url, door):
    conn, api, env = shop
    paid_at_gateway(api)
    aged(conn, 7200)
    window = {**env, "PAYHOOKS_RECONCILE_WINDOW_S": "3600"}
    assert sum(DOORS[door](database_url, window, after_s=0).recovered.values()) == 0
    assert paid(conn) == (None, 0)


@pytest.mark.parametrize("door", list(DOORS))
def test_an_argument_outranks_the_environment(shop, database_url, door):
    _, api, env = shop
    paid_at_gateway(api)
    slow = {**env, "PAYHOOKS_RECONCILE_AFTER_S": "86400"}
    assert sum(DOORS[door](database_url, slow, after_s=0).recovered.values()) == 1


@pytest.mark.parametrize(
    "name",
    ["PAYHOOKS_RECONCILE_AFTER_S", "PAYHOOKS_RECONCILE_WINDOW_S", "PAYHOOKS_RECONCILE_TIMEOUT_MS"],
)
@pytest.mark.parametrize("door", list(DOORS))
def test_a_reach_that_is_not_a_number_is_refused_by_name(shop, database_url, door, name):
    _, _, env = shop
    with pytest.raises(ValueError, match=f"{name} must be a whole number"):
        DOORS[door](database_url, {**env, name: "soon"})


@pytest.mark.parametrize(
    "command",
    [("reconcile",), ("confirm",), ("confirm", "--once"), ("replay", "evt_never_stored")],
    ids=["reconcile", "confirm daemon", "confirm once", "replay"],
)
@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("tests.reconcile.no_such_module:hooks", "cannot import tests.reconcile.no_such_module"),
        ("tests.reconcile.broken_hooks:hooks", "MYSHOP_SETTINGS is not set"),
    ],
    ids=["missing", "raising"],
)
def test_every_command_taking_hooks_refuses_one_it_cannot_import_in_one_line(
    shop, database_url, command, target, words
):
    """Bad configuration: one line and exit 1, never a traceback, the ``confirm`` daemon too
    (it imported the handler inside its pass, where only a database outage was caught)."""
    _, _, env = shop
    done = _payhooks(*command, "--hooks", target, "--database-url", database_url, env=env)
    assert done.returncode == 1
    assert words in done.stderr and "Traceback" not in done.stderr


def _failing_alerts(conn) -> dict[str, str]:
    from datetime import UTC, datetime

    from payhooks.operations.alerts import core_sources, observe

    found = observe(conn, datetime.now(UTC), core_sources())
    return {a.key: a.body for a in found if a.key.startswith("reconcile_failing")}


def _three_passes_failing(conn, database_url, env, handler) -> list[int]:
    """Three passes over the shop's one checkout, each made due again at once."""
    seen = []
    for _ in range(3):
        run(database_url, handler, environ=env, after_s=0)
        seen.append(len(_failing_alerts(conn)))
        conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
    return seen


def test_a_checkout_whose_payment_the_handler_keeps_failing_on_reaches_a_person(shop, database_url):
    """The checkout backs off with the handler's error, and after
    RECONCILE_FAILURES failures in a row the reconcile_failing alert says so, with the error."""
    from tests.reconcile.merchant_hooks import fussy

    conn, api, env = shop
    conn.execute("UPDATE merchant_orders SET ref = 'order_mer_bad'")
    conn.execute("DELETE FROM payhooks_expectations")
    with conn.transaction():
        payhooks.expect(conn, "razorpay", "order_mer_bad", 49_900)
    api.pay(Purchase(provider=Provider.RAZORPAY, cart_id="A-1", reference="order_mer_bad",
                     amount_paise=49_900, items={"TEA": 1}), PAYMENT)  # fmt: skip
    assert _three_passes_failing(conn, database_url, env, fussy) == [0, 0, 1]
    body = _failing_alerts(conn)["reconcile_failing:razorpay"]
    assert "1 razorpay checkout" in body and "the handler's bug" in body


def test_a_checkout_its_gateway_api_keeps_failing_on_reaches_a_person_until_it_answers(
    shop, database_url
):
    from payhooks.sim.gateway_api import Fault

    conn, api, env = shop
    api.fail_next(Provider.RAZORPAY, *[Fault(status=502)] * 3)  # one a pass
    assert _three_passes_failing(conn, database_url, env, hooks) == [0, 0, 1]
    assert "answered 502" in _failing_alerts(conn)["reconcile_failing:razorpay"]
    paid_at_gateway(api)
    run(database_url, hooks, environ=env, after_s=0)
    assert _failing_alerts(conn) == {} and paid(conn) == (PAYMENT, 1)


# --- the database failing a whole pass -------------------------------------------------------

HOOKS = ("--hooks", "tests.reconcile.merchant_hooks:hooks")
PASSES = {
    "reconcile": ("reconcile", "--older-than-s", "0", *HOOKS),
    "confirm": ("confirm", "--once", *HOOKS),
    "refunds send": ("refunds", "send", "--once"),
}


@pytest.mark.parametrize("command", PASSES)
def test_a_pass_the_database_is_out_of_reach_for_exits_1_saying_so(shop, command):
    """No connection to be had (refused): the pass ends there, said once, and a cron running
    the command sees it fail; it printed "examined 0 checkout(s)" and exited 0."""
    _, _, env = shop
    gone = "postgresql://nobody@127.0.0.1:1/gone"
    done = _payhooks(*PASSES[command], "--database-url", gone, env={**os.environ, **env})
    assert done.returncode == 1, done.stdout
    assert done.stderr.strip().startswith("payhooks: database unavailable"), done.stderr


@pytest.mark.parametrize("command", PASSES)
def test_a_pass_whose_every_turn_the_database_refuses_exits_1_naming_why(
    shop, database_url, command
):
    """The database answering but refusing the pass's own bookkeeping (a standby left read
    only by a failover; a missing table, a statement timing out alike): each gateway's turn
    fails whole. It was logged and the command exited 0 having done nothing."""
    _, api, env = shop
    paid_at_gateway(api)
    with psycopg.connect(database_url, autocommit=True) as admin:
        name = admin.info.dbname
        admin.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    done = _payhooks(*PASSES[command], "--database-url", database_url, env={**os.environ, **env})
    assert done.returncode == 1, done.stdout
    assert "ReadOnlySqlTransaction" in done.stderr.splitlines()[-1], done.stderr


noted: list[str] = []
failures = Hooks()


@failures.on(EventKind.PAYMENT_FAILED)
def note_failure(conn, event):
    """A merchant's failure handler as the guides write it: a note beside the order."""
    noted.append(event.attempt_id or event.payment_id)


FAILED_ATTEMPT = {
    Provider.RAZORPAY: ("pay_mer00000000009", "failed"),
    Provider.CASHFREE: ("5114910000009", "FAILED"),
}


def failed_webhook(provider: Provider, order: str, payment_id: str):
    if provider is Provider.RAZORPAY:
        return GATEWAY.razorpay("payment.failed", payment_id=payment_id, order_id=order,
                                amount_paise=49_900)  # fmt: skip
    return GATEWAY.cashfree("PAYMENT_FAILED_WEBHOOK", order_id=order, cf_payment_id=payment_id,
                            order_amount=Decimal("499.00"), payment_status="FAILED")  # fmt: skip


@pytest.mark.parametrize("webhook_first", [True, False], ids=["webhook first", "pass first"])
@pytest.mark.parametrize("provider", list(FAILED_ATTEMPT))
def test_a_failed_attempt_reaches_the_failure_handler_once_whoever_reports_it_first(
    database_url, gateway_api, provider, webhook_first
):
    """docs/operations.md: a payment event reaches the app's handlers once, whichever of the
    webhook and the pass brings it first. A failed attempt was claimed only by its delivery's
    key: its webhook and the pass's report of it (``reconcile:<id>:FAILED``) each reached the
    failure handler, and a failure was noted twice. The later is answered ``duplicate``."""
    api, url = gateway_api
    order = f"order_fail_{provider.value}"
    payment_id, status = FAILED_ATTEMPT[provider]
    noted.clear()
    with psycopg.connect(database_url, autocommit=True) as conn:
        with conn.transaction():
            payhooks.expect(conn, provider.value, order, 49_900, "INR", "A-9")
        api.pay(Purchase(provider=provider, cart_id="A-9", reference=order, amount_paise=49_900,
                         items={"TEA": 1}), payment_id, status)  # fmt: skip
        delivery = failed_webhook(provider, order, payment_id)
        adapter = ADAPTERS[provider]
        if webhook_first:
            assert ingest(conn, adapter, delivery.body, delivery.headers, failures).outcome is (
                Outcome.PROCESSED
            )
        run(database_url, failures, environ=API_KEYS.env(url), after_s=0)
        if not webhook_first:
            late = ingest(conn, adapter, delivery.body, delivery.headers, failures)
            assert late.outcome is Outcome.DUPLICATE
    assert noted == [payment_id]


@pytest.mark.parametrize("webhook_first", [True, False], ids=["post first", "pass first"])
def test_a_second_failed_attempt_of_one_payu_txnid_reaches_the_handler_as_its_own(
    database_url, gateway_api, webhook_first
):
    """PayU keys a payment by its txnid and names each attempt under it (``mihpayid``): the
    failure of a second attempt is its own, not a copy of the first's. Claimed by the txnid
    alone, the later of the two was answered ``duplicate`` and never reached the handler."""
    api, url = gateway_api
    txnid, first, second = "txnfail0000001", "403993715500000001", "403993715500000002"
    noted.clear()
    buy = Purchase(provider=Provider.PAYU, cart_id="A-8", reference=txnid, amount_paise=49_900,
                   items={"TEA": 1})  # fmt: skip
    with psycopg.connect(database_url, autocommit=True) as conn:
        with conn.transaction():
            payhooks.expect(conn, "payu", txnid, 49_900, "INR", "A-8")
        posted, reported = (second, first) if webhook_first else (first, second)
        post = GATEWAY.payu(txnid=txnid, mihpayid=posted, amount="499.00", status="failure")
        api.pay(buy, reported, "failure")
        if webhook_first:
            ingest(conn, ADAPTERS[Provider.PAYU], post.body, post.headers, failures)
        run(database_url, failures, environ=API_KEYS.env(url), after_s=0)
        if not webhook_first:
            late = ingest(conn, ADAPTERS[Provider.PAYU], post.body, post.headers, failures)
            assert late.outcome is Outcome.PROCESSED
    assert sorted(noted) == [first, second]

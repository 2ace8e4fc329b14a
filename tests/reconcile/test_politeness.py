"""Rate limits, 5xx, slow answers and a stuck gateway: nothing is lost, the next pass
finishes the job, the other gateways go on, and two passes never ask about one checkout."""

from __future__ import annotations

import pytest

from payhooks.events import Provider
from payhooks.plumbing.errors import DatabaseUnavailable
from payhooks.service import application, database
from payhooks.service.reconcile import Options
from payhooks.service.reconcile.clients import clients, http_client
from payhooks.sim.gateway_api import Fault
from tests.conftest import released_together
from tests.factories import purchase
from tests.reconcile.conftest import count, orders_of, paid_at_gateway, sim

DUE_AGAIN = "UPDATE payhooks_reconcile SET next_attempt_at = now()"


def _paid(conn, rig, provider, n):
    buys = [purchase(conn, provider) for _ in range(n)]
    for buy in buys:
        paid_at_gateway(rig.api, buy)
    return buys


def test_a_429_storm_loses_nothing_and_the_next_pass_finishes(conn, rig):
    buys = _paid(conn, rig, Provider.RAZORPAY, 4)
    rig.api.fail_next(Provider.RAZORPAY, Fault(status=429, retry_after_s=30))
    first = rig.run()
    assert first.api_errors[Provider.RAZORPAY] == 1
    assert first.deferred[Provider.RAZORPAY] == 3  # stopped asking after the 429
    waits = conn.execute("SELECT min(next_attempt_at - now()) FROM payhooks_reconcile").fetchone()[
        0
    ]
    assert waits.total_seconds() >= 29  # the wait the gateway asked for
    conn.execute(DUE_AGAIN)
    rig.run()
    assert all(len(orders_of(conn, b.cart_id)) == 1 for b in buys)


def test_a_5xx_storm_loses_nothing(conn, rig):
    buys = _paid(conn, rig, Provider.CASHFREE, 3)
    rig.api.fail_next(Provider.CASHFREE, *[Fault(status=503)] * 5)
    tally = rig.run()
    assert tally.api_errors[Provider.CASHFREE] == 3  # a few failures in a row pause it
    assert sum(len(orders_of(conn, b.cart_id)) for b in buys) == 0
    errors = count(conn, "SELECT count(*) FROM payhooks_reconcile WHERE last_error LIKE '%%503%%'")
    assert errors == 3
    while sum(len(orders_of(conn, b.cart_id)) for b in buys) < 3:
        conn.execute(DUE_AGAIN)
        rig.run()
    assert all(len(orders_of(conn, b.cart_id)) == 1 for b in buys)


def test_a_slow_answer_is_a_timeout_asked_again_later(conn, rig):
    (buy,) = _paid(conn, rig, Provider.PAYU, 1)
    rig.api.fail_next(Provider.PAYU, Fault(delay_s=1.0))
    patient = rig.http
    with http_client(0.2) as impatient:
        rig.http = impatient
        tally = rig.run()
    rig.http = patient
    assert tally.api_errors[Provider.PAYU] == 1
    timed_out = "SELECT count(*) FROM payhooks_reconcile WHERE last_error = 'timed out'"
    assert count(conn, timed_out) == 1
    conn.execute(DUE_AGAIN)
    rig.run()
    assert len(orders_of(conn, buy.cart_id)) == 1


def test_one_stuck_gateway_does_not_stop_the_others(conn, rig):
    stuck = _paid(conn, rig, Provider.RAZORPAY, 3)
    fine = _paid(conn, rig, Provider.CASHFREE, 2) + _paid(conn, rig, Provider.PAYU, 1)
    rig.api.fail_next(Provider.RAZORPAY, *[Fault(status=500)] * 10)
    tally = rig.run()
    assert all(len(orders_of(conn, b.cart_id)) == 1 for b in fine)
    assert all(orders_of(conn, b.cart_id) == [] for b in stuck)
    assert tally.api_errors[Provider.RAZORPAY] == 3


def test_two_concurrent_passes_never_ask_about_one_checkout_twice(conn, rig):
    buys = _paid(conn, rig, Provider.RAZORPAY, 6) + _paid(conn, rig, Provider.CASHFREE, 6)
    tallies = released_together([1, 2], lambda _: _nothing(), lambda _, __: rig.run())
    asked = [rig.api.asked[(b.provider, b.reference)] for b in buys]
    assert asked == [1] * len(buys)
    assert sum(sum(t.examined.values()) for t in tallies) == len(buys)
    assert all(len(orders_of(conn, b.cart_id)) == 1 for b in buys)


def test_silence_never_expires_a_checkout(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    rig.api.open_order(sim(buy))
    for _ in range(3):
        conn.execute(DUE_AGAIN)
        rig.run()
    reported = "SELECT count(*) FROM payhooks_reconcile WHERE expired_reported_at IS NOT NULL"
    assert count(conn, reported) == 0
    assert count(conn, "SELECT count(*) FROM carts WHERE status = 'open'") == 1


def test_an_expiry_the_gateway_reports_is_reported_once_and_not_acted_on(conn, rig):
    buy = purchase(conn, Provider.CASHFREE)
    rig.api.expire(sim(buy))
    first = rig.run()
    conn.execute(DUE_AGAIN)
    second = rig.run()
    assert (first.expired[Provider.CASHFREE], second.expired[Provider.CASHFREE]) == (1, 0)
    assert count(conn, "SELECT count(*) FROM carts WHERE status = 'open'") == 1
    assert (
        count(conn, "SELECT expired FROM payhooks_reconcile_totals WHERE provider = 'cashfree'")
        == 1
    )


def test_checkouts_younger_than_the_age_are_left_to_their_webhook(conn, rig):
    (buy,) = _paid(conn, rig, Provider.RAZORPAY, 1)
    from payhooks.service import application
    from payhooks.service.reconcile import Options

    patient = rig.reconciler()
    options = Options(after_s=900, window_s=3600)
    tally = application.shop_reconciler(rig.pool, patient.clients, options).run()
    assert sum(tally.examined.values()) == 0
    assert orders_of(conn, buy.cart_id) == []


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def test_checkouts_a_gateway_always_refuses_never_hold_back_the_others(conn, rig):
    """A 4xx about one order (the gateway does not know it) backs off that checkout alone;
    however often those were asked before, the paid checkouts are asked in the same pass."""
    refused = [purchase(conn, Provider.RAZORPAY) for _ in range(3)]  # unknown to the gateway
    for n, buy in enumerate(refused):  # and first in any order by reference
        for table, column in (("checkouts", "cart_id"), ("payhooks_expectations", "reference")):
            conn.execute(
                f"UPDATE {table} SET gateway_order_id = %s WHERE {column} = %s",
                (f"order_000000000000{n}", buy.cart_id),
            )
    conn.execute(
        "INSERT INTO payhooks_reconcile (provider, gateway_order_id, attempts, next_attempt_at)"
        " SELECT provider, gateway_order_id, 9, now() FROM payhooks_expectations"
    )
    paid = _paid(conn, rig, Provider.RAZORPAY, 3)
    tally = rig.run()
    assert tally.api_errors[Provider.RAZORPAY] == 3
    assert tally.deferred[Provider.RAZORPAY] == 0
    assert all(len(orders_of(conn, b.cart_id)) == 1 for b in paid)
    assert all(orders_of(conn, b.cart_id) == [] for b in refused)


def test_a_paused_gateway_asks_again_in_a_minute_not_after_one_checkouts_backoff(conn, rig):
    buys = _paid(conn, rig, Provider.CASHFREE, 5)
    conn.execute(
        "INSERT INTO payhooks_reconcile (provider, gateway_order_id, attempts, next_attempt_at)"
        " SELECT provider, gateway_order_id, 9, now() FROM payhooks_expectations"
    )
    rig.api.fail_next(Provider.CASHFREE, *[Fault(status=503)] * 3)
    tally = rig.run()
    assert tally.deferred[Provider.CASHFREE] == 2
    waits = conn.execute(
        "SELECT max(next_attempt_at - now()) FROM payhooks_reconcile WHERE attempts = 9"
    ).fetchone()[0]
    assert waits.total_seconds() <= 61  # the deferred ones: a minute, not the 6 h of attempt 9
    assert all(orders_of(conn, b.cart_id) == [] for b in buys)


def test_a_gateway_failing_in_an_unexpected_way_leaves_the_others_their_turn(conn, rig):
    _paid(conn, rig, Provider.RAZORPAY, 1)
    fine = _paid(conn, rig, Provider.PAYU, 1)
    conn.execute("ALTER TABLE payhooks_reconcile RENAME TO reconcile_checkouts_away")
    conn.execute(
        "CREATE TABLE payhooks_reconcile (LIKE reconcile_checkouts_away INCLUDING ALL,"
        " CHECK (provider <> 'razorpay'))"
    )
    rig.run()  # razorpay's claim fails (a check constraint): logged, and payu goes on
    assert len(orders_of(conn, fine[0].cart_id)) == 1


def test_a_gateway_error_whose_backoff_cannot_be_written_holds_back_no_other_checkout(conn, rig):
    """The database refusing one checkout's bookkeeping after the gateway's error (a lock
    timeout, a dropped connection) is that checkout's failure alone: the rest of the gateway's
    checkouts are still asked in the same pass, not left on their lease for ten minutes."""
    buys = _paid(conn, rig, Provider.RAZORPAY, 3)
    conn.execute(
        "CREATE FUNCTION refuse_backoff() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF NEW.last_error LIKE '%500%' THEN RAISE EXCEPTION 'bookkeeping refused'; END IF;"
        " RETURN NEW; END $$"
    )
    conn.execute(
        "CREATE TRIGGER refuse_backoff BEFORE UPDATE ON payhooks_reconcile"
        " FOR EACH ROW EXECUTE FUNCTION refuse_backoff()"
    )
    rig.api.fail_next(Provider.RAZORPAY, Fault(status=500))
    tally = rig.run()
    assert (tally.examined[Provider.RAZORPAY], tally.api_errors[Provider.RAZORPAY]) == (3, 1)
    assert sum(len(orders_of(conn, b.cart_id)) for b in buys) == 2
    unrecorded = "SELECT count(*) FROM payhooks_reconcile WHERE attempts = 0"
    assert count(conn, unrecorded) == 1  # its lease brings it back


def test_a_database_out_of_reach_ends_the_pass_at_its_first_gateway(rig, caplog):
    """No connection to be had is the whole pass's: each gateway's turn, and each gateway's
    callbacks after them, would wait out the pool's timeout in turn and log it as that
    gateway's failure (a worker told to stop waited out all ten). The pass ends at once,
    raising why, for its caller to say once."""
    away = database.open_pool(
        "postgresql://payhooks@127.0.0.1:9/none?connect_timeout=1", rig.settings,
        max_size=1, deadline=False,
    )  # fmt: skip
    try:
        reconciler = application.shop_reconciler(
            away, clients(rig.settings.reconciled(), rig.http), Options(after_s=0, window_s=3600)
        )
        with pytest.raises(DatabaseUnavailable):
            reconciler.run()
    finally:
        away.close()
    failed = [r.message for r in caplog.records if r.message.endswith("_gateway_failed")]
    assert failed == []


def test_payus_rate_limit_in_its_own_words_pauses_it_as_a_429_does(conn, rig):
    """PayU answers a rate limit with HTTP 200 and ``{"status":0,"msg":"Requests limit
    reached"}`` (its error codes): read as a 429, it stops asking PayU for the rest of the
    pass, and the next pass finishes. It was read as one checkout's error, and every
    checkout was asked while PayU was limiting."""
    buys = _paid(conn, rig, Provider.PAYU, 4)
    rig.api.fail_next(Provider.PAYU, Fault(body=b'{"status":0,"msg":"Requests limit reached"}'))
    first = rig.run()
    assert first.api_errors[Provider.PAYU] == 1
    assert first.deferred[Provider.PAYU] == 3  # stopped asking after the rate limit
    assert sum(rig.api.asked[(b.provider, b.reference)] for b in buys) == 0
    limited = "SELECT count(*) FROM payhooks_reconcile WHERE last_error LIKE 'rate limited%%'"
    assert count(conn, limited) == 1
    conn.execute(DUE_AGAIN)
    rig.run()
    assert all(len(orders_of(conn, b.cart_id)) == 1 for b in buys)

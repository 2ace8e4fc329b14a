"""``payhooks storm`` with the double-payment policy on: the deployment refunds every double
payment itself, through the gateways' refund APIs (the doubles over a loopback socket), with
answers lost after the gateway acted; every double payment is refunded once, no single
payment at all, and every other invariant of the storm holds."""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.service import application
from payhooks.sim.gateway import Gateway
from payhooks.sim.gateway_api import Fault
from payhooks.sim.storm import StormOptions, run_storm
from tests.conftest import serving
from tests.factories import KEYS

REFUNDING = (Provider.RAZORPAY, Provider.CASHFREE, Provider.PAYU)
OPTIONS = StormOptions(
    carts=36,
    concurrency=4,
    time_scale=100_000,
    seed=11,
    double_payment_rate=0.5,
    refund_rate=0.3,  # the story's own refunds, some of them of a payment that is a double
    silent_rate=0.1,
    reconcile_wait_s=60,
    providers=REFUNDING,
    refunds_doubles=True,
)


def test_storm_refunds_every_double_payment_once_and_no_single_payment(rig, database_url):
    for provider in (Provider.RAZORPAY, Provider.CASHFREE):
        rig.api.fail_after_acting(provider, Fault(status=503), Fault(status=503))
    with serving(rig.settings, database_url) as service:

        def reconcile_and_refund() -> None:
            with rig.pool.connection() as conn:
                conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
                conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now()")
            reconciler = rig.reconciler()
            reconciler.run()
            application.send_refunds(reconciler, double_payments=True)

        result = run_storm(
            service.base_url, service.token, Gateway(KEYS), OPTIONS,
            books=rig.api, reconcile=reconcile_and_refund,
        )  # fmt: skip
    assert result.ok, [v for check in result.checks for v in check.violations]
    held = {check.name: check for check in result.checks}
    assert "every double payment refunded once, no other" in held
    made = sum(rig.api.money.made.values())
    assert made > 0  # the seed plays doubles on both refunding gateways
    with rig.pool.connection() as conn:
        states = dict(conn.execute(  # the story's dashboard refunds, reported, are not intents
            "SELECT state, count(*) FROM payhooks_refunds WHERE requested_by <> 'gateway' "
            "GROUP BY state").fetchall())  # fmt: skip
        flagged = conn.execute(
            "SELECT count(*) FROM payments WHERE 'duplicate_payment' = ANY(flags)"
        ).fetchone()[0]
    assert states.get("processed", 0) == made
    assert flagged >= made
    assert set(states) <= {"processed", "refused"}, states

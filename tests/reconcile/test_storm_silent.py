"""``payhooks storm`` with carts whose webhooks are never sent: reconciliation recovers
every one of them, through 429s and 5xx from the status APIs, and every invariant holds."""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.sim.gateway import Gateway
from payhooks.sim.gateway_api import Fault
from payhooks.sim.storm import StormOptions, run_storm
from tests.conftest import serving
from tests.factories import KEYS

OPTIONS = StormOptions(
    carts=24,
    concurrency=4,
    time_scale=100_000,
    seed=7,
    silent_rate=0.4,
    reconcile_wait_s=60,
    providers=tuple(Provider),  # PhonePe and Juspay too: their callbacks confirmed by the passes
)


def test_storm_with_silent_carts_recovers_them_all_and_every_invariant_holds(rig, database_url):
    for provider in Provider:
        rig.api.fail_next(provider, Fault(status=429, retry_after_s=0), Fault(status=503))
    with serving(rig.settings, database_url) as service:

        def reconcile() -> None:
            with rig.pool.connection() as conn:
                conn.execute("UPDATE payhooks_reconcile SET next_attempt_at = now()")
            rig.run()

        result = run_storm(
            service.base_url, service.token, Gateway(KEYS), OPTIONS,
            books=rig.api, reconcile=reconcile,
        )  # fmt: skip
    assert result.silent > 0
    assert result.ok, [v for check in result.checks for v in check.violations]
    with rig.pool.connection() as conn:
        recovered = conn.execute("SELECT sum(recovered) FROM payhooks_reconcile_totals").fetchone()[
            0
        ]
        errors = conn.execute("SELECT sum(api_errors) FROM payhooks_reconcile_totals").fetchone()[0]
    assert recovered == result.silent
    assert errors >= 2 * len(Provider)

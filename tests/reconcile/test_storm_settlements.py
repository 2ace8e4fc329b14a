"""``payhooks storm`` with settlements: once every story is delivered, the gateways' doubles
pay out what they captured but for a share they keep back, their settlement webhooks go to
the deployment twice each, and the deployment fetches the reports over a loopback socket and
reviews; every captured payment ends settled or flagged (a kept-back one flagged, never
settled), each payout's recorded total equals what it paid out and the sum of its lines, and
every other invariant of the storm holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from payhooks.events import Provider
from payhooks.gateways._settlements import INDIA
from payhooks.reconcile.running import connecting
from payhooks.reconcile.settling import fetch_once
from payhooks.settlements import listing
from payhooks.sim.gateway import Gateway
from payhooks.sim.settling import Recorded
from payhooks.sim.storm import StormOptions, run_storm
from tests.conftest import serving
from tests.factories import KEYS

OPTIONS = StormOptions(
    carts=30,
    concurrency=4,
    time_scale=100_000,
    seed=7,
    double_payment_rate=0.2,
    refund_rate=0.2,
    held_rate=0.15,
    providers=(Provider.RAZORPAY, Provider.CASHFREE),
)
LATER = timedelta(days=8)
"""The review looks this far ahead: past every gateway's cycle and the default margin. The
days up to it are fetched too (none has a payout): the review flags only a capture whose
cycle and margin end on a day read whole."""


def test_every_capture_ends_settled_or_flagged_and_every_payout_adds_up(rig, database_url):
    def settle() -> Recorded:
        now = datetime.now(UTC)
        today = now.astimezone(INDIA).date()  # the gateways' days are India's
        found = rig.settings.reconciled()
        until = (now + LATER).astimezone(INDIA).date()
        tally = fetch_once(connecting(database_url), found, today, until, now=lambda: now + LATER)
        assert tally.failures == {}
        with rig.pool.connection() as conn:
            payouts = listing.payouts(conn, now - timedelta(days=2), now + LATER, limit=10_000)
            lines = listing.lines_in(conn, now - timedelta(days=2), now + LATER, limit=100_000)
            flagged = listing.unsettled(conn, limit=100_000)
        return Recorded(
            settled=frozenset(e.payment_id for e in lines if e.kind == "payment" and e.payment_id),
            flagged=frozenset(u.payment_id for u in flagged),
            payouts={p.settlement_id: (p.amount_paise, p.lines_net_paise) for p in payouts},
        )

    with serving(rig.settings, database_url) as service:
        result = run_storm(service.base_url, service.token, Gateway(KEYS), OPTIONS,
                           books=rig.api, settle=settle)  # fmt: skip
    assert result.ok, [v for check in result.checks for v in check.violations]
    held = {check.name: check for check in result.checks}
    assert held["every captured payment settled or flagged"].checked >= OPTIONS.carts
    assert held["settlement totals equal the sum of their lines"].checked == 2
    with rig.pool.connection() as conn:
        flagged = conn.execute("SELECT count(*) FROM payhooks_unsettled").fetchone()[0]
        unmatched = conn.execute(
            "SELECT count(*) FROM payhooks_settlement_lines WHERE matched = false"
        ).fetchone()[0]
    assert flagged > 0  # the seed keeps some back
    assert unmatched == 0

"""The database fails over mid-storm: the primary SIGKILLed, the standby promoted, payhooks
given both hosts (``target_session_attrs=read-write``) and never restarted. Every delivery
answered 2xx is committed on the new primary with a synchronous standby; with an
asynchronous one, what was acknowledged and lost is counted. The service answers 503 (so the
gateways retry) while there is no primary, and recovers by itself."""

from __future__ import annotations

import threading
import time

import httpx

from payhooks.sim.storm import StormOptions
from tests.faults.conftest import eventually
from tests.faults.test_faults import StormThread, felt, uncommitted, violations

OPTIONS = StormOptions(carts=80, concurrency=8, time_scale=200.0, spread_s=1000.0, seed=9)
RECOVERY_BOUND_S = 60.0
"""A liveness bound, not a performance one: the figure is printed by bench/failover.py."""


class Readiness(threading.Thread):
    """``/readyz`` asked every 50 ms from the kill on: when it first answered anything but 200
    (it reads the database at most once a second, so an outage shorter than that may pass
    unseen), and when it answered 200 once the standby was promoted."""

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.base = base
        self.promoted = threading.Event()
        self.down_at: float | None = None
        self.up_at: float | None = None

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=2) as client:
            while self.up_at is None:
                try:
                    status = client.get("/readyz").status_code
                except httpx.TransportError:
                    status = 0
                if status != 200 and self.down_at is None:
                    self.down_at = time.monotonic()
                elif status == 200 and self.promoted.is_set():
                    self.up_at = time.monotonic()
                time.sleep(0.05)


def test_failover_mid_storm_loses_no_acknowledged_delivery_when_synchronous(cluster, server_on):
    server = server_on(cluster.url)
    storm = StormThread(server.base, OPTIONS)
    storm.start()
    eventually(lambda: storm.sent >= 60)
    watch = Readiness(server.base)
    watch.start()
    cluster.kill_primary()
    cluster.promote()
    watch.promoted.set()
    eventually(lambda: watch.up_at is not None, timeout=RECOVERY_BOUND_S)  # by itself
    result = storm.finish()
    assert felt(result, "http 503", "no connection") > 0, "the failover was never felt"
    assert felt(result, "timeout", "http 500") == 0  # only 503s: the gateways retry
    lost = uncommitted(cluster.url_of(cluster.ports[1]), result)
    if cluster.synchronous:
        assert lost == []
        assert violations(result) == []
    print(f"lost acknowledged: {len(lost)} (synchronous={cluster.synchronous})")

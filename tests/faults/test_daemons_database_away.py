"""The merchant-side daemons (``payhooks confirm``, ``payhooks refunds send``, ``payhooks
alerts``) while their database is away and after it is back, as subprocesses through a
loopback proxy the test cuts (``payhooks.sim.proxy``): each logs the outage, waits, and goes
on, as the reference worker does. Each used to exit 1 on the first database error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from payhooks.sim.keys import ApiKeys
from tests.acceptance.conftest import running, wait_until

LIVENESS_S = 30.0
"""A bound on waiting for a pass to meet the outage, not a figure the daemons are held to."""

DAEMONS = {
    "confirm": ["confirm", "--hooks", "tests.reconcile.merchant_hooks:hooks", "--every", "0.2"],
    "refunds send": ["refunds", "send", "--every", "0.2"],
    "alerts": ["alerts", "--every", "0.2"],
}


def daemon_env(url: str, home: Path) -> dict[str, str]:
    return {
        **os.environ,
        **ApiKeys().env("http://127.0.0.1:9"),  # configured; nothing is due, nothing is asked
        "DATABASE_URL": url,
        "PAYHOOKS_HOME": str(home),
        "PAYHOOKS_ALERT_WEBHOOK_URL": "http://127.0.0.1:9/alerts",
        "PYTHONPATH": str(Path(__file__).parents[2]),
    }


@pytest.mark.parametrize("daemon", list(DAEMONS))
def test_a_daemon_outlives_its_database_going_away_and_goes_on(proxy, tmp_path, daemon):
    log = tmp_path / "daemon.log"
    with running(DAEMONS[daemon], daemon_env(proxy.url, tmp_path), log) as process:
        proxy.cut()
        wait_until(lambda: "_failed" in process.output() or not process.alive(),
                   timeout=LIVENESS_S, what="a pass meeting the outage")  # fmt: skip
        assert process.alive(), process.output()
        proxy.restore()
        seen = process.output().count("_failed")
        proxy.cut()  # back, then away again: it went on passing in between
        wait_until(lambda: process.output().count("_failed") > seen or not process.alive(),
                   timeout=LIVENESS_S, what="a later pass meeting the second outage")  # fmt: skip
        assert process.alive(), process.output()
        proxy.restore()
        process.popen.terminate()
        assert process.popen.wait(timeout=30) == 0, process.output()

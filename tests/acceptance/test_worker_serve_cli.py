"""`payhooks worker` and `serve` as an operator runs them: a poisoned outbox row does not stop
the worker; a bad setting stops either at once, with one line naming it."""

from __future__ import annotations

import json
import subprocess

import psycopg
import pytest

from payhooks.events import Provider
from payhooks.service.shop import carts
from tests import loopback
from tests.acceptance.conftest import PAYHOOKS, running, wait_until
from tests.factories import GATEWAY, deliver, product


def insert_row(url: str, key: str, recipient: str) -> None:
    """Written straight into the table, as rows from before addresses were checked."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO outbox (kind, dedupe_key, recipient, subject, body) "
            "VALUES ('email', %s, %s, %s, 'body')",
            (key, recipient, key),
        )


def subjects(box) -> list[str]:
    return [str(m["Subject"]) for m in list(box.messages)]


def failed_keys(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT dedupe_key FROM outbox WHERE failed_at IS NOT NULL")
        return [key for (key,) in rows]


def test_the_worker_process_dead_letters_a_poisoned_row_and_delivers_the_next(
    env, database_url, inbox, tmp_path
):
    box, port = inbox
    insert_row(database_url, "poisoned", "x@[y")
    insert_row(database_url, "good", "buyer@example.com")
    worker_env = {**env, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}"}
    with running(["worker"], worker_env, tmp_path / "worker.log") as worker:
        # The dead letter raises an alert, mailed to ops through the same server: the good
        # message is waited for by its subject, not by the inbox's count (which the alert
        # could take past one between two looks).
        wait_until(
            lambda: "good" in subjects(box) or not worker.alive(),
            timeout=60,  # a liveness bound: a worker starting on a busy machine
            what="the good message",
        )
        assert worker.alive(), worker.output()
        assert [m["Subject"] for m in box.messages if m["To"] != "ops@example.com"] == ["good"]
    assert failed_keys(database_url) == ["poisoned"]


def run_briefly(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A command expected to refuse at once; one that starts instead times out the test."""
    return subprocess.run([PAYHOOKS, *args], env=env, capture_output=True, text=True, timeout=30)


# The installed script, once for each command that keeps running (the same refusals of every
# setting run in this process: tests/acceptance/test_command_settings.py).
@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        (["serve", "--port", "9"], "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS", '["whsec_a", ""]'),
        (["worker"], "PAYHOOKS_ALERT_EMAIL", "x@[y"),
    ],
)
def test_a_bad_setting_stops_the_command_with_one_line_naming_it(env, command, variable, value):
    result = run_briefly({**env, variable: value}, *command)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"payhooks: {variable} ")


def test_storm_signs_with_a_json_listed_secret_as_the_server_reads_it(env, tmp_path):
    import httpx

    from tests.conftest import free_port

    secrets_env = {
        **env,
        "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": json.dumps(["whsec,with a comma", "whsec_old"]),
        "PAYHOOKS_PAYU_SALTS": json.dumps([" salt with spaces "]),
    }
    base = f"http://127.0.0.1:{free_port()}"

    def ready() -> bool:
        try:
            return loopback.get(f"{base}/readyz").status_code == 200
        except httpx.TransportError:
            return False

    port = base.rsplit(":", 1)[1]
    with running(["serve", "--port", port], secrets_env, tmp_path / "serve.log"):
        wait_until(ready, timeout=30, what="payhooks serve")
        storm = ["storm", base, "--carts", "12", "--time-scale", "100000", "--seed", "3"]
        result = subprocess.run(
            [PAYHOOKS, *storm], env=secrets_env, capture_output=True, text=True, timeout=300
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "http 401" not in result.stdout


def park(conn, count: int, reference: str) -> str:
    """``count`` payments that will never match, then one whose checkout comes later;
    returns that one's SKU."""
    for n in range(count):
        other = GATEWAY.razorpay(
            "payment.captured", payment_id=f"pay_oth{n:08d}", order_id=f"ord_oth{n}", amount_paise=1
        )
        assert deliver(conn, other).outcome == "parked"
    sku = product(conn, price_paise=49_900).sku
    late = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_late00000001", order_id=reference, amount_paise=49_900
    )
    assert deliver(conn, late).outcome == "parked"
    return sku


def check_out(conn, sku: str, reference: str) -> str:
    cart = carts.create_cart(conn, "late@example.com", [carts.LineItem(sku=sku, quantity=1)])
    carts.checkout(conn, cart.cart_id, Provider.RAZORPAY, reference)
    return cart.cart_id


def test_worker_once_applies_a_parked_payment_behind_150_unmatched_ones(env, conn, inbox):
    _, port = inbox
    cart_id = check_out(conn, park(conn, 150, "order_late_once"), "order_late_once")
    done = run_briefly({**env, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}"}, "worker", "--once")
    assert done.returncode == 0, done.stderr
    assert carts.get_cart(conn, cart_id).status == "paid"


def test_replay_applies_a_parked_delivery_stored_under_an_earlier_key(env, conn):
    cart_id = check_out(conn, park(conn, 0, "order_late_replay"), "order_late_replay")
    conn.execute("UPDATE processed_webhooks SET event_id = 'key-of-an-earlier-version'")
    replayed = run_briefly(env, "replay", "key-of-an-earlier-version")
    assert json.loads(replayed.stdout)["status"] == "processed", replayed.stderr
    assert carts.get_cart(conn, cart_id).status == "paid"


def test_serve_asks_for_the_metrics_token_when_one_is_set(env, tmp_path):
    import httpx

    from tests.conftest import free_port

    port = free_port()
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return loopback.get(f"{base}/readyz").status_code == 200
        except httpx.TransportError:
            return False

    served = {**env, "PAYHOOKS_METRICS_TOKEN": "scrape-me"}
    with running(["serve", "--port", str(port)], served, tmp_path / "serve.log"):
        wait_until(ready, timeout=30, what="payhooks serve")
        anonymous = loopback.get(f"{base}/metrics")
        scraper = loopback.get(f"{base}/metrics", headers={"authorization": "Bearer scrape-me"})
    assert (anonymous.status_code, scraper.status_code) == (401, 200)


def test_the_worker_started_while_its_database_is_away_waits_for_it(env, tmp_path):
    """A worker started before PostgreSQL (containers in any order, a failover) waits the
    outage out, as docs/operations.md says; the check that refuses a merchant app's database
    must not make it exit for a database it cannot reach yet."""
    away = {**env, "DATABASE_URL": "postgresql://payhooks@127.0.0.1:9/none?connect_timeout=1"}
    with running(["worker"], away, tmp_path / "worker.log") as worker:
        wait_until(
            lambda: "worker_database_unavailable" in worker.output() or not worker.alive(),
            timeout=60,  # a liveness bound: a worker starting on a busy machine
            what="the worker's word that the database is away",
        )
        assert worker.alive(), worker.output()

"""Operating payhooks: real worker processes against a real SMTP server, and the CLI's
purge, parked, replay and outbox commands."""

from __future__ import annotations

import json
import subprocess

import psycopg

from payhooks.events import Provider
from payhooks.service import outbox
from payhooks.service.mail import message_id
from payhooks.service.shop import carts
from tests import loopback
from tests.acceptance.conftest import invoke, running, wait_until
from tests.conftest import Inbox, free_port, serving, smtp_server
from tests.factories import GATEWAY, SETTINGS, purchase


def queue_emails(url: str, count: int) -> list[str]:
    keys = [f"mail:{n}" for n in range(count)]
    with psycopg.connect(url, autocommit=True) as conn:
        for key in keys:
            outbox.enqueue(
                conn,
                outbox.Message(
                    kind=outbox.MessageKind.EMAIL,
                    dedupe_key=key,
                    recipient="b@example.com",
                    subject=key,
                    body="hi",
                ),
            )
    return keys


def pending(url: str) -> int:
    with psycopg.connect(url) as conn:
        return outbox.counts(conn)["pending"]


def smtp_env(env: dict[str, str], port: int) -> dict[str, str]:
    return {**env, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{port}"}


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A command that runs to its end, in this process; the workers run as subprocesses."""
    return invoke(env, *args, timeout=120)


def test_two_workers_racing_send_every_email_exactly_once(env, database_url, inbox, tmp_path):
    box, port = inbox
    keys = queue_emails(database_url, 200)
    with (
        running(["worker"], smtp_env(env, port), tmp_path / "w1.log"),
        running(["worker"], smtp_env(env, port), tmp_path / "w2.log"),
    ):
        wait_until(lambda: pending(database_url) == 0, timeout=60, what="the outbox to drain")
    assert sorted(box.ids()) == sorted(message_id(k) for k in keys)


def test_worker_killed_mid_batch_is_restarted_and_nothing_is_lost(env, database_url, tmp_path):
    box = Inbox(delay=0.05)
    keys = queue_emails(database_url, 60)
    with smtp_server(box) as port:
        with running(["worker"], smtp_env(env, port), tmp_path / "w1.log") as first:
            wait_until(lambda: len(box.messages) >= 10, timeout=30, what="some sends")
            first.kill()
        assert pending(database_url) > 0
        with running(["worker"], smtp_env(env, port), tmp_path / "w2.log"):
            wait_until(lambda: pending(database_url) == 0, timeout=60, what="the outbox to drain")
    ids = box.ids()
    assert set(ids) == {message_id(k) for k in keys}
    assert len(ids) - len(set(ids)) <= 1  # the one window: SMTP accepted, commit never came


def test_smtp_down_webhooks_still_answer_and_emails_go_out_once_it_returns(
    env, database_url, conn, tmp_path
):
    port = free_port()
    box = Inbox()
    with (
        serving(SETTINGS, database_url) as service,
        running(["worker"], smtp_env(env, port), tmp_path / "w.log"),
    ):
        answers = []
        with service.client() as client:
            for _ in range(20):
                delivery = purchase(conn).captured()
                answers.append(
                    client.post(delivery.path, content=delivery.body, headers=delivery.headers)
                )
        assert [a.json()["status"] for a in answers] == ["processed"] * 20
        assert pending(database_url) == 20 and box.messages == []
        with smtp_server(box, port):
            wait_until(lambda: pending(database_url) == 0, timeout=60, what="emails after SMTP")
    ids = box.ids()
    assert len(ids) == 20 and len(set(ids)) == 20


def test_worker_without_smtp_url_says_so_and_does_the_rest(env, database_url):
    """Alerts by chat alone need no SMTP server: the worker warns that emails stay queued and
    does its other duties (docs/configuration.md)."""
    queue_emails(database_url, 1)
    result = cli(env, "worker", "--once")
    assert result.returncode == 0, result.stderr
    assert "PAYHOOKS_SMTP_URL is not set" in result.stderr
    assert pending(database_url) == 1


def test_worker_once_exits_1_when_an_alert_cannot_be_sent(env, conn):
    """A dead letter raises its alert; with the SMTP server away its notice is not sent, and
    a cron-run worker says so (it exited 0)."""
    outbox.enqueue(conn, outbox.alert("alert:gone", "subject", "body"))
    conn.execute("UPDATE outbox SET failed_at = now(), attempts = 8, last_error = 'x'")
    away = {**env, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{free_port()}",
            "PAYHOOKS_ALERT_EMAIL": "ops@example.com"}  # fmt: skip
    result = cli(away, "worker", "--once")
    assert result.returncode == 1, result.stderr
    assert "the worker's pass failed" in result.stderr


def test_worker_once_exits_1_while_the_smtp_server_is_away(env, database_url):
    queue_emails(database_url, 1)
    away = {**env, "PAYHOOKS_SMTP_URL": f"smtp://127.0.0.1:{free_port()}"}
    result = cli(away, "worker", "--once")
    assert result.returncode == 1 and "the SMTP server is unavailable" in result.stderr
    assert pending(database_url) == 1


def test_worker_once_sends_what_is_due_and_exits(env, database_url, inbox):
    box, port = inbox
    queue_emails(database_url, 3)
    result = cli(smtp_env(env, port), "worker", "--once")
    assert result.returncode == 0 and len(box.messages) == 3


def test_purge_dry_run_counts_and_deletes_nothing(env, conn):
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, "
        "payload_sha256, body, processed_at) VALUES ('payu', 'old', 't', 'processed', "
        "'x', '\\x00', now() - interval '100 days')"
    )
    result = cli(env, "purge", "--dry-run")
    assert result.returncode == 0 and "would delete 1 record" in result.stdout
    assert cli(env, "purge").stdout.startswith("deleted 1 record")
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0] == 0


OLD_LOG_LINES = """
INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified, body_bytes,
                                 duration_ms)
SELECT now() - interval '100 days', 'payu', 200, 'processed', true, 10, 1
FROM generate_series(1, 1000)
"""


def test_purge_counts_and_deletes_the_delivery_log_lines_past_the_window(env, conn):
    conn.execute(OLD_LOG_LINES)
    said = [cli(env, "purge", *dry).stdout for dry in (["--dry-run"], [])]
    assert [line.split(" older than")[0] for line in said] == [
        "would delete 0 record(s) and 1000 delivery-log line(s)",
        "deleted 0 record(s) and 1000 delivery-log line(s)",
    ], said
    assert conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()[0] == 0


def test_purge_refuses_a_window_shorter_than_gateway_replays(env):
    result = cli(env, "purge", "--older-than-days", "3")
    assert result.returncode == 1
    assert "shorter than the gateways' replay window" in result.stderr
    assert cli(env, "purge", "--older-than-days", "3", "--force").returncode == 0


def test_parked_event_is_listed_then_replayed_once_its_checkout_exists(env, conn, database_url):
    buy = purchase(conn)
    orphan = GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_replay000001",
        order_id="order_replay",
        amount_paise=buy.amount_paise,
    )
    with serving(SETTINGS, database_url) as service:
        loopback.post(service.base_url + orphan.path, content=orphan.body, headers=orphan.headers)
    listed = json.loads(cli(env, "parked", "--json").stdout)
    assert [p["event_type"] for p in listed] == ["payment.captured"]
    event_id = listed[0]["event_id"]
    assert json.loads(cli(env, "replay", event_id).stdout)["status"] == "parked"
    other = carts.create_cart(conn, "c@example.com", [carts.LineItem(sku=buy.sku, quantity=1)])
    carts.checkout(conn, other.cart_id, Provider.RAZORPAY, "order_replay")
    replayed = json.loads(cli(env, "replay", event_id).stdout)
    assert replayed["status"] == "processed" and replayed["order_id"]
    assert json.loads(cli(env, "replay", event_id).stdout)["status"] == "duplicate"
    assert json.loads(cli(env, "parked", "--json").stdout) == []


def test_replay_of_unknown_delivery_fails_with_one_line(env):
    cli(env, "migrate")
    result = cli(env, "replay", "no-such-key")
    assert result.returncode == 1 and result.stderr.count("\n") == 1


def test_outbox_lists_dead_letters_and_queues_them_again(env, conn, inbox):
    _, port = inbox
    outbox.enqueue(conn, outbox.alert("alert:x", "subject", "body"))
    no_alerts = {**smtp_env(env, port), "PAYHOOKS_ALERT_EMAIL": ""}
    assert cli(no_alerts, "worker", "--once").returncode == 0
    failed = json.loads(cli(env, "outbox", "--failed").stdout)
    assert [(f["dedupe_key"], f["last_error"]) for f in failed] == [
        ("alert:x", "PAYHOOKS_ALERT_EMAIL is not set")
    ]
    assert "queued 1 message" in cli(env, "outbox", "--retry", str(failed[0]["id"])).stdout
    assert json.loads(cli(env, "outbox").stdout) == {"pending": 1, "sent": 0, "failed": 0}


def test_outbox_retry_of_no_dead_letter_or_of_both_kinds_at_once_says_why_in_one_line(env):
    """README: errors print one line and exit 1. ``--retry`` of an id no dead letter has
    printed only "queued 0 message(s) again" and exited 1 saying nothing of why, and
    ``--retry 1 --retry-all`` queued the one and ignored the other, exit 0."""
    cli(env, "migrate")
    unknown = cli(env, "outbox", "--retry", "999999")
    assert unknown.returncode == 1
    assert (
        unknown.stderr
        == "payhooks: no dead letter has id 999999 (payhooks outbox --failed lists them)\n"
    )
    both = cli(env, "outbox", "--retry", "1", "--retry-all")
    assert both.returncode == 1
    assert both.stderr == "payhooks: --retry ID or --retry-all, not both\n"


def test_metrics_show_outbox_backlog_dead_letters_and_purge_progress(database_url, conn):
    outbox.enqueue(conn, outbox.alert("alert:y", "subject", "body"))
    with serving(SETTINGS, database_url) as service, service.client() as client:
        text = client.get("/metrics").text
    assert "payhooks_outbox_backlog 1.0" in text
    assert "payhooks_outbox_dead_letters 0.0" in text
    assert "payhooks_purge_rows_done" in text
    assert "payhooks_duplicate_ratio" in text


def test_commands_on_an_unmigrated_database_say_so_in_one_line(env, admin_url):
    import uuid

    from psycopg.conninfo import make_conninfo

    name = f"payhooks_bare_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        bare = {**env, "DATABASE_URL": make_conninfo(admin_url, dbname=name)}
        result = cli(bare, "outbox")
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)'.encode())
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "payhooks migrate" in result.stderr


def test_worker_once_with_the_database_away_says_so_in_one_line(env):
    """It printed the pool's own six lines, "handled 0 outbox message(s)", then "the worker's
    pass failed: maybe_retry_parked", a function's name, never the database."""
    away = f"postgresql://root@127.0.0.1:{free_port()}/nowhere?connect_timeout=2"
    result = cli({**env, "DATABASE_URL": away}, "worker", "--once")
    said = [line for line in result.stderr.splitlines() if not line.startswith("payhooks: warn")]
    assert result.returncode == 1, result.stderr
    assert len(said) == 1, result.stderr
    assert said[0].startswith("payhooks: database unavailable") and "Connection refused" in said[0]


def test_bad_setting_is_one_line_not_a_traceback(env):
    result = cli({**env, "PAYHOOKS_RETENTION_DAYS": "ninety"}, "purge", "--dry-run")
    assert result.returncode == 1 and result.stderr.count("\n") == 1


def test_storm_against_nothing_is_one_line(env):
    result = cli(env, "storm", "http://127.0.0.1:9", "--carts", "1")
    assert result.returncode == 1 and result.stderr.count("\n") == 1


def test_a_database_that_cannot_be_reached_is_named_with_the_servers_reason(env, database_url):
    """One line, as every refusal, saying why: a database name that does not exist (it said
    "database unavailable: OperationalError" alone; the reason only with -v)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    missing = make_conninfo(database_url, dbname="payhooks_no_such_database")
    result = cli({**env, "DATABASE_URL": missing}, "parked")
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("payhooks: database unavailable")
    assert 'database "payhooks_no_such_database" does not exist' in result.stderr
    password = conninfo_to_dict(database_url).get("password")
    assert not password or str(password) not in result.stderr
    # A password holding "@" is read as part of the host, and libpq names that host back.
    leaky = "postgresql://app:Sup3r@Secret@127.0.0.1:5432/db"
    result = cli({**env, "DATABASE_URL": leaky}, "parked")
    assert result.returncode == 1 and "Secret" not in result.stderr, result.stderr

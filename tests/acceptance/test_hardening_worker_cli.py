"""`payhooks worker` and `serve` as an operator runs them: a poisoned outbox row does not stop
the worker; a bad setting stops either at once, with one line naming it."""

from __future__ import annotations

import json
import subprocess

import psycopg
import pytest

from tests.acceptance.conftest import PAYHOOKS, running, wait_until


def insert_row(url: str, key: str, recipient: str) -> None:
    """Written straight into the table, as rows from before addresses were checked."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO outbox (kind, dedupe_key, recipient, subject, body) "
            "VALUES ('email', %s, %s, %s, 'body')",
            (key, recipient, key),
        )


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
        wait_until(
            lambda: len(box.messages) == 1 or not worker.alive(),
            timeout=30,
            what="the good message",
        )
        assert worker.alive(), worker.output()
        assert [m["Subject"] for m in box.messages] == ["good"]
    assert failed_keys(database_url) == ["poisoned"]


def run_briefly(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """A command expected to refuse at once; one that starts instead times out the test."""
    return subprocess.run([PAYHOOKS, *args], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        (["serve", "--port", "9"], "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS", "whsec_a,,whsec_b"),
        (["serve", "--port", "9"], "PAYHOOKS_PAYU_SALTS", '["salt", '),
        (["serve", "--port", "9"], "PAYHOOKS_POOL_SIZE", "abc"),
        (["worker"], "PAYHOOKS_CASHFREE_CLIENT_SECRETS", "cfsk_a, cfsk_b"),
        (["worker"], "PAYHOOKS_ALERT_EMAIL", "x@[y"),
        (["worker"], "PAYHOOKS_LOCK_TIMEOUT_MS", "2s"),
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
            return httpx.get(f"{base}/readyz").status_code == 200
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

"""``payhooks alerts`` as a merchant runs it beside their own app, on their database, posting
to a real HTTP receiver on loopback: the installed script in a subprocess once, the same entry
point in this process otherwise (``invoke``)."""

from __future__ import annotations

import subprocess

import psycopg

from payhooks.operations.alarms import FAILURES_TO_WARN
from tests.acceptance.conftest import PAYHOOKS, invoke
from tests.integration.test_alerts import Receiver, receiving


def alerts(
    env: dict[str, str], *args: str, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``payhooks alerts --once *args``: run to its end in this process (``invoke``), or, with
    ``process``, as the installed script a merchant's cron starts."""
    if not process:
        return invoke(env, "alerts", "--once", *args)
    return subprocess.run(
        [PAYHOOKS, "alerts", "--once", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _failing_gateway(database_url: str, gateway: str = "payu") -> None:
    """``gateway``'s deliveries answered 5xx, enough times to be alerted."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(FAILURES_TO_WARN):
            conn.execute(
                "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome,"
                " verified, body_bytes, duration_ms)"
                " VALUES (now(), %s, 503, 'database_unavailable', true, 300, 1)",
                (gateway,),
            )


def test_alerts_posts_a_failing_gateway_to_chat_once(env, database_url):
    _failing_gateway(database_url, "phonepe")
    with receiving(Receiver()) as chat:
        told = {**env, "PAYHOOKS_ALERT_WEBHOOK_URL": chat.url, "PAYHOOKS_ALERT_EMAIL": ""}
        first = alerts(told, "--database-url", database_url, process=True)
        again = alerts(told, "--database-url", database_url)
        assert first.returncode == 0, first.stderr
        assert "1 raised" in first.stdout and "1 notice(s) sent" in first.stdout
        assert again.returncode == 0 and "0 raised" in again.stdout
        [text] = chat.texts()
        assert text.startswith("[payhooks] ALERT: phonepe: webhook deliveries answered 5xx")


def test_alerts_without_a_channel_says_which_settings_to_set(env, database_url):
    done = alerts({**env, "PAYHOOKS_SMTP_URL": ""}, "--database-url", database_url)
    assert done.returncode == 1
    assert "no alert channel is set: PAYHOOKS_ALERT_WEBHOOK_URL" in done.stderr


def test_alerts_refuses_a_webhook_url_it_cannot_post_to_without_quoting_it(env, database_url):
    bad = {**env, "PAYHOOKS_ALERT_WEBHOOK_URL": "hooks.slack.com/services/T0/B0/s3cr3t"}
    done = alerts(bad, "--database-url", database_url)
    assert done.returncode == 1
    assert "PAYHOOKS_ALERT_WEBHOOK_URL must be an http:// or https:// URL" in done.stderr
    assert "s3cr3t" not in done.stderr


def test_a_notifier_killed_mid_post_leaves_the_message_to_be_sent_again(
    env, database_url, tmp_path
):
    import signal
    from datetime import UTC, datetime

    from payhooks.operations.alerts import core_sources
    from payhooks.operations.notifier import Notifier, Policy, Webhook
    from tests.acceptance.conftest import running, wait_until

    _failing_gateway(database_url, "razorpay")
    with (
        psycopg.connect(database_url, autocommit=True) as conn,
        receiving(Receiver(hang=1, hang_s=30)) as chat,
    ):
        told = {**env, "PAYHOOKS_ALERT_WEBHOOK_URL": chat.url, "PAYHOOKS_ALERT_EMAIL": ""}
        args = ["alerts", "--once", "--database-url", database_url]
        with running(args, told, tmp_path / "alerts.log") as process:
            wait_until(lambda: chat.requests == 1, timeout=30, what="the post")
            process.popen.send_signal(signal.SIGKILL)
            process.popen.wait(timeout=15)
        assert chat.texts() == []  # held, then the notifier died: nothing was taken
        policy = Policy()
        notifier = Notifier([Webhook(url=chat.url, timeout_s=5)], core_sources(), policy)
        now = datetime.now(UTC)
        assert notifier.send_due(conn, now).sent == 0  # its lease still holds it
        assert notifier.send_due(conn, now + policy.lease).sent == 1
        [text] = chat.texts()
        assert text.startswith("[payhooks] ALERT: razorpay: webhook deliveries answered 5xx")


def test_alerts_once_exits_1_when_a_notice_could_not_be_sent(env, database_url):
    """A cron running ``alerts --once`` must learn that nobody was told: it printed "1 to
    retry" and exited 0."""
    _failing_gateway(database_url)
    nowhere = {
        **env,
        "PAYHOOKS_ALERT_WEBHOOK_URL": "http://127.0.0.1:1/",
        "PAYHOOKS_ALERT_EMAIL": "",
    }
    done = invoke(nowhere, "alerts", "--once", "--database-url", database_url)
    assert done.returncode == 1, done.stdout
    assert "1 to retry" in done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith("payhooks: 1 notice(s) not sent")


def test_alerts_once_exits_1_naming_a_condition_it_could_not_read(env, database_url):
    """One source failing (its table gone) is logged and the others are read; the pass
    said nothing of it and exited 0."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE payhooks_refunds RENAME TO payhooks_refunds_gone")
    with receiving(Receiver()) as chat:
        told = {**env, "PAYHOOKS_ALERT_WEBHOOK_URL": chat.url, "PAYHOOKS_ALERT_EMAIL": ""}
        done = invoke(told, "alerts", "--once", "--database-url", database_url)
    assert done.returncode == 1, done.stdout
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("payhooks: ") and "could not be read" in said and "refund" in said

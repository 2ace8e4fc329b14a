"""`payhooks worker` as an operator runs it: a poisoned outbox row does not stop it."""

from __future__ import annotations

import psycopg

from tests.acceptance.conftest import running, wait_until


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

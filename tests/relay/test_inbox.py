"""The consumer's inbox on real PostgreSQL: a message id claimed once per consumer, in the
consumer's own transaction, with real concurrency for twins."""

from __future__ import annotations

import threading

import psycopg
import pytest

from payhooks.relay import inbox


@pytest.fixture
def consumer_db(conn):
    inbox.install(conn)
    conn.execute("CREATE TABLE shipments (message_id text)")
    return conn


def ship(message_id: str):
    return lambda c: c.execute("INSERT INTO shipments VALUES (%s)", (message_id,))


def shipped(conn) -> int:
    return conn.execute("SELECT count(*) FROM shipments").fetchone()[0]


def test_a_message_is_applied_once_however_often_it_comes(consumer_db):
    answers = [inbox.once(consumer_db, "fulfilment", "razorpay:pay_1:payment_captured",
                          ship("m")) for _ in range(3)]  # fmt: skip
    assert answers == [True, False, False] and shipped(consumer_db) == 1


def test_each_consumer_has_its_own_inbox(consumer_db):
    assert inbox.once(consumer_db, "fulfilment", "m1", ship("m1"))
    assert inbox.once(consumer_db, "analytics", "m1", ship("m1"))
    assert shipped(consumer_db) == 2


def test_an_effect_that_fails_leaves_the_message_unclaimed_for_its_redelivery(consumer_db):
    def broken(conn):
        ship("m1")(conn)
        raise RuntimeError("the warehouse is down")

    with pytest.raises(RuntimeError):
        inbox.once(consumer_db, "fulfilment", "m1", broken)
    assert shipped(consumer_db) == 0
    assert inbox.once(consumer_db, "fulfilment", "m1", ship("m1")) and shipped(consumer_db) == 1


def test_twins_delivered_at_once_apply_once(consumer_db, database_url):
    """Two consumers given the same message at the same moment: the second's insert waits on
    the first's uncommitted row and answers False once it commits."""
    start = threading.Barrier(8)
    answers: list[bool] = []

    def consume() -> None:
        with psycopg.connect(database_url, autocommit=True) as own:
            start.wait()
            answers.append(inbox.once(own, "fulfilment", "twin", ship("twin")))

    threads = [threading.Thread(target=consume) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [False] * 7 + [True] and shipped(consumer_db) == 1


def test_prune_deletes_only_entries_older_than_asked(consumer_db):
    inbox.once(consumer_db, "fulfilment", "old", ship("old"))
    consumer_db.execute("UPDATE payhooks_inbox SET received_at = now() - interval '40 days'")
    inbox.once(consumer_db, "fulfilment", "new", ship("new"))
    cutoff = consumer_db.execute("SELECT now() - interval '30 days'").fetchone()[0]
    assert inbox.prune(consumer_db, cutoff) == 1
    assert [r[0] for r in consumer_db.execute("SELECT message_id FROM payhooks_inbox")] == ["new"]

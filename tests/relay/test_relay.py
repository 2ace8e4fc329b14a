"""The relay against real brokers of the tests' own: every payment event applied reaches
JetStream and RabbitMQ after commit, once in effect, in each payment's order, through a relay
killed between publish and mark and a broker that goes away and comes back."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import aio_pika
import nats
import psycopg
import pytest
from nats.js.api import DiscardPolicy, StreamConfig

from payhooks.operations import alerts, outbox, retention
from payhooks.relay import inbox
from payhooks.relay.brokers import Broker
from payhooks.relay.rabbitmq import amqp_message_id
from payhooks.relay.relaying import Relay, RelayOptions, Tally, connecting
from payhooks.sim.deliveries import Disputed, Purchase
from payhooks.sim.gateway import Delivery
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.acceptance.conftest import PAYHOOKS, invoke, wait_until
from tests.brokers import NatsServer, RabbitServer
from tests.factories import GATEWAY, deliver, purchase
from tests.relay.conftest import jetstream, queued, rabbitmq, stored

FAST = RelayOptions(every_s=0.05, reconnect_s=0.05, reconnect_cap_s=0.5)


def drain(url: str, broker: Broker, options: RelayOptions = FAST) -> Relay:
    """A relay run in the test's process until nothing is left due."""
    relay = Relay(connecting(url), broker, options)
    asyncio.run(relay.run(asyncio.Event(), drain=True))
    return relay


def paid(conn: psycopg.Connection, n: int = 1) -> list[str]:
    """``n`` carts paid, through the shop's general path: their payments' ids."""
    payments = []
    for _ in range(n):
        buy = purchase(conn)
        deliver(conn, buy.captured())
        payments.append(buy.payment_id)
    return payments


def unpublished(conn: psycopg.Connection, channel: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM payhooks_outbox WHERE channel = %s AND sent_at IS NULL", (channel,)
    ).fetchone()
    return int(row[0]) if row else 0


def test_captures_reach_jetstream_once_each_under_their_message_ids(
    database_url, conn, nats_server: NatsServer
):
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    payments = paid(conn, 3)
    relay = drain(database_url, broker)
    found = stored(broker)
    assert sorted(m.message_id for m in found) == sorted(
        f"razorpay:{p}:payment_captured" for p in payments
    )
    assert {m.subject for m in found} == {f"{broker.options.prefix}.razorpay.payment_captured"}
    body = json.loads(found[0].body)
    assert body["kind"] == "payment_captured" and body["order_id"].startswith("ord_")
    assert relay.totals.published == 3 and unpublished(conn, "nats") == 0


def test_captures_reach_rabbitmq_persistent_and_confirmed_under_their_message_ids(
    database_url, conn, rabbit_server: RabbitServer
):
    broker = rabbitmq(rabbit_server)
    outbox.add_channel(conn, "rabbitmq")
    payments = paid(conn, 2)
    drain(database_url, broker)
    found = queued(broker)
    assert sorted(m.message_id for m in found) == sorted(
        f"razorpay:{p}:payment_captured" for p in payments
    )
    assert unpublished(conn, "rabbitmq") == 0


def test_with_no_relay_channel_nothing_is_queued(conn):
    paid(conn, 2)
    assert (
        conn.execute("SELECT count(*) FROM payhooks_outbox WHERE kind = 'event'").fetchone()[0] == 0
    )


def refund_of(buy_payment: str, reference: str, amount: int) -> Delivery:
    return GATEWAY.razorpay(
        "refund.processed",
        payment_id=buy_payment,
        order_id=reference,
        amount_paise=amount,
        refund_id=f"rfnd_{buy_payment[-10:]}",
    )


def test_a_payments_events_are_published_in_the_order_they_committed(
    database_url, conn, nats_server: NatsServer
):
    """Its refund waits for its capture's acknowledgement: one pass publishes each payment's
    first event, the next its second."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    buy = purchase(conn)
    deliver(conn, buy.captured())
    deliver(conn, refund_of(buy.payment_id, buy.reference, buy.amount_paise))
    other = paid(conn, 1)[0]
    relay = drain(database_url, broker)
    order = [m.message_id for m in stored(broker)]
    capture = f"razorpay:{buy.payment_id}:payment_captured"
    refund = f"razorpay:refund:rfnd_{buy.payment_id[-10:]}"
    assert sorted(order) == sorted([capture, refund, f"razorpay:{other}:payment_captured"])
    assert order.index(capture) < order.index(refund)
    assert relay.totals.passes >= 2


def test_a_refused_event_backs_off_and_holds_back_its_payments_later_ones(
    database_url, conn, nats_server: NatsServer
):
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    buy = purchase(conn)
    deliver(conn, buy.captured())
    deliver(conn, refund_of(buy.payment_id, buy.reference, buy.amount_paise))

    async def refused_pass() -> Tally:
        client = await nats.connect(broker.options.url)  # a stream of the merchant's own
        refunds = f"{broker.options.prefix}.*.refund_processed"
        await client.jetstream().add_stream(name=broker.options.stream, subjects=[refunds])
        await client.close()
        relay = Relay(connecting(database_url), broker, FAST)
        tally = await relay.attempt()
        await relay.close()
        assert tally is not None
        return tally

    tally = asyncio.run(refused_pass())
    assert (tally.published, tally.refused) == (0, 1)
    rows = conn.execute(
        "SELECT attempts, last_error, next_attempt_at > now() FROM payhooks_outbox"
        " WHERE kind = 'event' ORDER BY id"
    ).fetchall()
    assert rows[0][0] == 1 and "no stream" in rows[0][1] and rows[0][2]
    assert rows[1] == (0, None, False)  # the refund was never tried: its capture comes first


REFUSE_MARKING = """
CREATE FUNCTION refuse_marking() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = {ident:d} THEN RAISE EXCEPTION 'this row is not to be marked'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER refuse_marking BEFORE UPDATE ON payhooks_outbox
FOR EACH ROW EXECUTE FUNCTION refuse_marking();
"""


def test_an_event_the_database_will_not_mark_is_set_aside_alone_and_the_relay_goes_on(
    database_url, conn, nats_server: NatsServer
):
    """Three captures, the middle one's row refusing its mark (a trigger): the one statement
    marking the batch failed whole, the relay process exited (``InternalError``), and every
    pass after published all three again, marking none. The others are marked, the one the
    database refuses is published once, logged and set aside for the relay's life, and the pass
    says the database failed (``--once`` exits 1)."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    payments = paid(conn, 3)
    rows = conn.execute("SELECT id FROM payhooks_outbox WHERE kind = 'event' ORDER BY id")
    [_, (middle,), _] = rows.fetchall()
    conn.execute(REFUSE_MARKING.format(ident=middle))
    relay = drain(database_url, broker)
    assert (relay.totals.published, relay.totals.unmarked) == (2, 1)
    assert relay.totals.duplicates == 0  # the refused one was not published again
    assert relay.failure is not None and "could not be written" in relay.failure, relay.failure
    assert unpublished(conn, "nats") == 1
    assert sorted(m.message_id for m in stored(broker)) == sorted(
        f"razorpay:{p}:payment_captured" for p in payments
    )


REFUSE_MARKING_DEFERRED = """
CREATE FUNCTION refuse_marking() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.id = {ident:d} AND NEW.sent_at IS NOT NULL THEN
    RAISE EXCEPTION 'this row is not to be marked';
  END IF;
  RETURN NEW;
END $$;
CREATE CONSTRAINT TRIGGER refuse_marking AFTER UPDATE ON payhooks_outbox
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_marking();
"""


def test_a_mark_a_deferred_constraint_refuses_is_that_events_alone(
    database_url, conn, nats_server: NatsServer
):
    """A constraint checked at the commit refused the batch's mark there, outside every
    savepoint: the whole batch was published again at each backoff, none marked. Deferred
    constraints are checked as each statement of a pass ends."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    paid(conn, 3)
    rows = conn.execute("SELECT id FROM payhooks_outbox WHERE kind = 'event' ORDER BY id")
    [_, (middle,), _] = rows.fetchall()
    conn.execute(REFUSE_MARKING_DEFERRED.format(ident=middle))
    relay = drain(database_url, broker)
    assert (relay.totals.published, relay.totals.unmarked, relay.totals.duplicates) == (2, 1, 0)
    assert unpublished(conn, "nats") == 1


def captured_then_refunded_its_capture_unwritable(conn: psycopg.Connection) -> Purchase:
    """A payment captured then refunded, both queued for the ``nats`` channel, the capture's
    row refusing every write (a trigger of the app's)."""
    outbox.add_channel(conn, "nats")
    buy = purchase(conn)
    deliver(conn, buy.captured())
    deliver(conn, refund_of(buy.payment_id, buy.reference, buy.amount_paise))
    [(capture,), _] = conn.execute(
        "SELECT id FROM payhooks_outbox WHERE kind = 'event' ORDER BY id"
    ).fetchall()
    conn.execute(REFUSE_MARKING.format(ident=capture))
    return buy


def test_a_payments_later_event_waits_behind_a_refused_one_whose_wait_cannot_be_written(
    database_url, conn, nats_server: NatsServer
):
    """A capture the broker refused, whose row the database would not let the relay write its
    wait to: it was set aside as if published, and the payment's refund went out before it.
    It is held with its payment: neither goes until the relay starts again."""
    broker = jetstream(nats_server)
    captured_then_refunded_its_capture_unwritable(conn)

    async def refusing_drain() -> Relay:
        client = await nats.connect(broker.options.url)  # a stream taking refunds alone
        refunds = f"{broker.options.prefix}.*.refund_processed"
        await client.jetstream().add_stream(name=broker.options.stream, subjects=[refunds])
        await client.close()
        relay = Relay(connecting(database_url), broker, FAST)
        await relay.run(asyncio.Event(), drain=True)
        return relay

    relay = asyncio.run(refusing_drain())
    assert (relay.totals.published, relay.totals.refused, relay.totals.unmarked) == (0, 1, 1)
    assert unpublished(conn, "nats") == 2  # the refund did not overtake its capture
    assert relay.failure is not None and "payment_captured" in relay.failure, relay.failure


def test_a_payments_later_event_goes_after_its_published_one_was_set_aside_even_once(
    database_url, conn, nats_server: NatsServer
):
    """``--once``: a pass that published only an event whose mark was refused ended the drain,
    and the payment's refund behind it never went, run after run. The drain goes on: the
    broker has the capture, in its order, so the refund follows it."""
    broker = jetstream(nats_server)
    buy = captured_then_refunded_its_capture_unwritable(conn)
    relay = drain(database_url, broker)
    assert (relay.totals.published, relay.totals.unmarked) == (1, 1)
    found = [m.message_id for m in stored(broker)]
    assert found == [f"razorpay:{buy.payment_id}:payment_captured", found[1]], found
    assert found[1].startswith("razorpay:refund:")


def test_events_set_aside_do_not_fill_the_window_of_those_to_publish(
    database_url, conn, nats_server: NatsServer
):
    """Events set aside are unpublished still: read into every pass's window, as many as it
    holds crowded out every other event, for good. They are left out of the window."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    paid(conn, 3)
    conn.execute(REFUSE_MARKING.replace("IF NEW.id = {ident:d}", "IF true"))
    relay = Relay(connecting(database_url), broker, replace(FAST, window=3))

    async def two_passes() -> tuple[Tally | None, Tally | None]:
        first = await relay.attempt()
        conn.execute("DROP TRIGGER refuse_marking ON payhooks_outbox")
        paid(conn, 1)  # queued after the three set aside
        second = await relay.attempt()
        await relay.close()
        return first, second

    first, second = asyncio.run(two_passes())
    assert first is not None and first.unmarked == 3
    assert second is not None and (second.published, second.unmarked) == (1, 0)
    assert unpublished(conn, "nats") == 3


def test_a_mark_the_database_silently_leaves_unwritten_is_set_aside_not_taken_for_done(
    database_url, conn, nats_server: NatsServer
):
    """A trigger of the app's returning NULL (or a rule, a row policy) leaves the mark
    unwritten with no error: the event was counted published, chosen again at once and
    published again without end, its payment's refund never. Only the rows written count."""
    broker = jetstream(nats_server)
    buy = captured_then_refunded_its_capture_unwritable(conn)
    conn.execute("DROP TRIGGER refuse_marking ON payhooks_outbox")
    conn.execute(
        "CREATE FUNCTION leave_as_is() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN RETURN NULL; END $$;"
        " CREATE TRIGGER leave_as_is BEFORE UPDATE ON payhooks_outbox FOR EACH ROW"
        " WHEN (NEW.dedupe_key LIKE '%payment_captured') EXECUTE FUNCTION leave_as_is()"
    )
    relay = drain(database_url, broker)
    assert (relay.totals.published, relay.totals.unmarked, relay.totals.duplicates) == (1, 1, 0)
    found = [m.message_id for m in stored(broker)]
    assert found == [f"razorpay:{buy.payment_id}:payment_captured", found[1]], found
    assert relay.failure is not None and "payment_captured" in relay.failure


def test_an_event_with_no_message_id_is_refused_alone_never_published_as_none(
    database_url, conn, nats_server: NatsServer
):
    """An event row whose payload had lost its message id was published as ``Nats-Msg-Id:
    None``; a second such row was then taken for that message (the broker "already had" it)
    and marked published, lost. It is refused alone, saying why; the others are published."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    payments = paid(conn, 3)
    rows = conn.execute("SELECT id FROM payhooks_outbox WHERE kind = 'event' ORDER BY id")
    [_, (middle,), _] = rows.fetchall()
    conn.execute("UPDATE payhooks_outbox SET payload = payload - 'message_id' WHERE id = %s",
                 (middle,))  # fmt: skip
    relay = drain(database_url, broker)
    assert (relay.totals.published, relay.totals.refused) == (2, 1)
    assert sorted(m.message_id for m in stored(broker)) == sorted(
        f"razorpay:{p}:payment_captured" for p in (payments[0], payments[2])
    )
    [(sent, error)] = conn.execute(
        "SELECT sent_at, last_error FROM payhooks_outbox WHERE id = %s", (middle,)
    ).fetchall()
    assert sent is None and "message id" in error


async def outage_then_drain(
    database_url: str,
    broker: Broker,
    sabotage: Callable[[], Awaitable[object]],
    restore: Callable[[], Awaitable[object]] | None = None,
) -> tuple[Tally | None, str | None, Tally]:
    """A relay connected (its stream or queue made), then ``sabotage``d under it: its next
    pass's tally (None: an outage) and the reason it gave; then, after ``restore``, passes
    until nothing is due, and the relay's totals."""
    relay = Relay(connecting(database_url), broker, FAST)
    await broker.connect()
    relay._broker_up = True
    await sabotage()
    outage = await relay.attempt()
    failure = relay.failure
    if restore is not None:
        await restore()
    await relay.run(asyncio.Event(), drain=True)
    return outage, failure, relay.totals


def test_a_stream_deleted_under_the_relay_is_an_outage_it_waits_out_and_makes_again(
    database_url, conn, nats_server: NatsServer
):
    """JetStream answers 503, no responders, for a stream that is gone: no event is refused
    (none backs off alone), the channel waits, and the relay's next connection makes the
    stream again and publishes every event in order."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    buy = purchase(conn)
    deliver(conn, buy.captured())
    deliver(conn, refund_of(buy.payment_id, buy.reference, buy.amount_paise))

    async def deleted() -> None:
        client = await nats.connect(broker.options.url)
        await client.jetstream().delete_stream(broker.options.stream)
        await client.close()

    outage, failure, totals = asyncio.run(outage_then_drain(database_url, broker, deleted))
    assert outage is None and failure is not None and broker.options.stream in failure
    assert (totals.published, totals.refused) == (2, 0)
    tried = conn.execute(
        "SELECT attempts, last_error FROM payhooks_outbox WHERE kind = 'event' ORDER BY id"
    )
    assert tried.fetchall() == [(1, None), (1, None)]
    assert [json.loads(m.body)["kind"] for m in stored(broker)] == [
        "payment_captured", "refund_processed",
    ]  # fmt: skip


def test_a_full_stream_is_an_outage_the_channel_waits_out_not_a_refusal_of_its_events(
    database_url, conn, nats_server: NatsServer
):
    """JetStream answers 503 for a stream of the merchant's own that is full and discards new
    messages ("maximum messages exceeded"): no event is refused for it (none backs off
    alone, its attempts and error untouched); the channel waits, and once the stream has
    room every event is published."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    payments = paid(conn, 2)

    limited = StreamConfig(name=broker.options.stream, subjects=[f"{broker.options.prefix}.>"],
                           max_msgs=1, discard=DiscardPolicy.NEW)  # fmt: skip

    async def limit(config: StreamConfig) -> None:
        client = await nats.connect(broker.options.url)
        await client.jetstream().update_stream(config)
        await client.close()

    outage, failure, totals = asyncio.run(outage_then_drain(
        database_url, broker, lambda: limit(limited), lambda: limit(replace(limited, max_msgs=-1))
    ))  # fmt: skip
    assert outage is None and failure is not None and "maximum messages exceeded" in failure
    assert (totals.published, totals.refused) == (2, 0)
    tried = conn.execute("SELECT attempts, last_error FROM payhooks_outbox WHERE kind = 'event'")
    assert sorted(tried.fetchall()) == [(1, None), (1, None)]
    assert sorted(m.message_id for m in stored(broker)) == sorted(
        f"razorpay:{p}:payment_captured" for p in payments
    )


def test_its_queue_deleted_under_the_relay_is_an_outage_it_waits_out_and_declares_again(
    database_url, conn, rabbit_server: RabbitServer
):
    """The relay's own queue gone (an operator, an expiry policy): every message comes back
    unroutable. No event is refused (none backs off alone): the channel waits, and the
    relay's next connection declares the queue again and publishes every event."""
    broker = rabbitmq(rabbit_server)
    outbox.add_channel(conn, "rabbitmq")
    payments = paid(conn, 2)

    async def deleted() -> None:
        connection = await aio_pika.connect(broker.options.url)
        await (await connection.channel()).queue_delete(broker.options.queue)
        await connection.close()

    outage, failure, totals = asyncio.run(outage_then_drain(database_url, broker, deleted))
    assert outage is None and failure is not None and broker.options.queue in failure
    assert (totals.published, totals.refused) == (2, 0)
    tried = conn.execute("SELECT attempts, last_error FROM payhooks_outbox WHERE kind = 'event'")
    assert tried.fetchall() == [(1, None), (1, None)]
    assert sorted(m.message_id for m in queued(broker)) == sorted(
        f"razorpay:{p}:payment_captured" for p in payments
    )


def test_an_event_id_past_amqps_255_bytes_reaches_rabbitmq_under_its_digest(
    database_url, conn, rabbit_server: RabbitServer
):
    """AMQP's ``message_id`` holds 255 bytes; a payment id payhooks takes (up to 255
    characters) makes a longer event id. That event is published under a digest of its id,
    the whole id in a header, and the others of its batch are not held back by it."""
    broker = rabbitmq(rabbit_server)
    outbox.add_channel(conn, "rabbitmq")
    buy, long_id = purchase(conn), "pay_" + "L" * 246
    deliver(conn, buy.captured(payment_id=long_id))
    (other,) = paid(conn, 1)
    relay = drain(database_url, broker)
    whole = f"razorpay:{long_id}:payment_captured"
    found = {m.message_id: m for m in queued(broker)}
    assert found.keys() == {amqp_message_id(whole), f"razorpay:{other}:payment_captured"}
    assert amqp_message_id(whole) == "sha256:" + hashlib.sha256(whole.encode()).hexdigest()
    assert found[amqp_message_id(whole)].whole_id == whole
    assert (relay.totals.published, relay.totals.refused) == (2, 0)
    assert unpublished(conn, "rabbitmq") == 0


def test_a_dispute_is_relayed_with_its_figures_after_its_payments_capture(
    database_url, conn, nats_server: NatsServer
):
    """A consumer of a dispute's events learns which dispute, where it stands and what it
    cost, not only that the payment has one."""
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    buy = purchase(conn)
    deliver(conn, buy.captured())
    lost = Disputed(what="lost", dispute_id="disp_RELAY1", payment_id=buy.payment_id,
                    reference=buy.reference, amount_paise=buy.amount_paise,
                    respond_by=1_767_312_000, reported_at=1_767_225_600)  # fmt: skip
    assert deliver(conn, razorpay_sim.dispute_delivery(GATEWAY, lost)).outcome.value == "processed"
    drain(database_url, broker)
    capture, dispute = (json.loads(m.body) for m in stored(broker))
    assert (capture["kind"], capture["dispute"]) == ("payment_captured", None)
    assert (dispute["kind"], dispute["payment_id"]) == ("dispute_lost", buy.payment_id)
    assert dispute["dispute"] == {
        "id": "disp_RELAY1",
        "amount_paise": buy.amount_paise,
        "reason": "goods_or_services_not_received_or_partially_received",
        "phase": "chargeback",
        "status": "lost",
        "respond_by": "2026-01-02T00:00:00+00:00",
        "reported_at": "2026-01-01T00:00:00+00:00",
        "deducted_paise": buy.amount_paise,
    }


def test_more_refused_events_than_a_pass_reads_hold_back_no_other_payment(
    database_url, conn, nats_server: NatsServer
):
    """A stream of the merchant's own that takes captures only refuses every refund: refunds
    backing off, more of them than a pass reads, still leave another payment's capture to go."""
    broker = jetstream(nats_server)
    options = replace(FAST, window=2, refused_base_s=300.0)
    outbox.add_channel(conn, "nats")
    buys = [purchase(conn) for _ in range(2)]
    for buy in buys:
        deliver(conn, buy.captured())

    async def passes() -> list[Tally | None]:
        client = await nats.connect(broker.options.url)
        captures = f"{broker.options.prefix}.razorpay.payment_captured"
        await client.jetstream().add_stream(name=broker.options.stream, subjects=[captures])
        await client.close()
        relay = Relay(connecting(database_url), broker, options)
        tallies = [await relay.attempt()]  # both captures
        for buy in buys:
            deliver(conn, refund_of(buy.payment_id, buy.reference, buy.amount_paise))
        tallies.append(await relay.attempt())  # both refunds refused, backing off
        paid(conn, 1)
        tallies.append(await relay.attempt())  # the third payment's capture
        await relay.close()
        return tallies

    published = [(t.published, t.refused) for t in asyncio.run(passes()) if t is not None]
    assert published == [(2, 0), (0, 2), (1, 0)]
    assert unpublished(conn, "nats") == 2  # the refunds, still queued


def relay_env(url: str, home: Path, **settings: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": url, "PAYHOOKS_HOME": str(home), **settings}


def nats_env(broker, url: str, home: Path) -> dict[str, str]:
    return relay_env(
        url,
        home,
        PAYHOOKS_RELAY_NATS_URL=broker.options.url,
        PAYHOOKS_RELAY_NATS_STREAM=broker.options.stream,
        PAYHOOKS_RELAY_SUBJECT_PREFIX=broker.options.prefix,
    )


def rabbit_env(broker, url: str, home: Path) -> dict[str, str]:
    return relay_env(
        url,
        home,
        PAYHOOKS_RELAY_RABBITMQ_URL=broker.options.url,
        PAYHOOKS_RELAY_RABBITMQ_EXCHANGE=broker.options.exchange,
        PAYHOOKS_RELAY_RABBITMQ_QUEUE=broker.options.queue,
        PAYHOOKS_RELAY_SUBJECT_PREFIX=broker.options.prefix,
    )


def waiting_on(conn: psycopg.Connection, holder: int) -> bool:
    """Some session waits on a lock ``holder`` holds: the relay, at its mark."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (holder,)
    ).fetchone()
    return bool(row and row[0])


def killed_between_publish_and_mark(
    channel: str, env: dict[str, str], database_url: str, conn: psycopg.Connection, tmp_path
) -> None:
    """``payhooks relay CHANNEL`` publishes, then waits to mark while the test holds the row;
    it is SIGKILLed there, and its transaction, marks and hold, rolled back."""
    with psycopg.connect(database_url, autocommit=True) as holder, holder.transaction():
        holder.execute("SELECT 1 FROM payhooks_outbox WHERE kind = 'event' FOR UPDATE")
        with (tmp_path / f"relay-{channel}.log").open("ab") as log:
            relay = subprocess.Popen(
                [PAYHOOKS, "relay", channel], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            wait_until(lambda: waiting_on(conn, holder.info.backend_pid), timeout=60,
                       what="the relay at its mark")  # fmt: skip
        finally:
            relay.send_signal(signal.SIGKILL)
            relay.wait(timeout=30)


def test_a_relay_killed_between_publish_and_mark_publishes_again_under_the_same_id_jetstream_drops(
    database_url, conn, nats_server: NatsServer, tmp_path
):
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    (payment,) = paid(conn, 1)
    env = nats_env(broker, database_url, tmp_path)
    killed_between_publish_and_mark("nats", env, database_url, conn, tmp_path)
    assert len(stored(broker)) == 1 and unpublished(conn, "nats") == 1  # published, unmarked
    relay = drain(database_url, broker)
    assert (relay.totals.published, relay.totals.duplicates) == (1, 1)
    assert [m.message_id for m in stored(broker)] == [f"razorpay:{payment}:payment_captured"]
    assert unpublished(conn, "nats") == 0


def test_a_relay_killed_between_publish_and_mark_publishes_again_and_the_inbox_applies_it_once(
    database_url, conn, rabbit_server: RabbitServer, tmp_path
):
    broker = rabbitmq(rabbit_server)
    outbox.add_channel(conn, "rabbitmq")
    (payment,) = paid(conn, 1)
    env = rabbit_env(broker, database_url, tmp_path)
    killed_between_publish_and_mark("rabbitmq", env, database_url, conn, tmp_path)
    drain(database_url, broker)
    found = queued(broker)  # RabbitMQ keeps both: it does not deduplicate
    assert [m.message_id for m in found] == [f"razorpay:{payment}:payment_captured"] * 2
    inbox.install(conn)
    conn.execute("CREATE TABLE shipments (message_id text)")
    applied = [
        inbox.once(conn, "fulfilment", m.message_id, lambda c, m=m: c.execute(
            "INSERT INTO shipments VALUES (%s)", (m.message_id,)))
        for m in found
    ]  # fmt: skip
    assert applied == [True, False]
    assert conn.execute("SELECT count(*) FROM shipments").fetchone()[0] == 1


def test_a_broker_outage_grows_the_backlog_which_drains_when_it_returns(
    database_url, conn, nats_server: NatsServer, tmp_path
):
    broker = jetstream(nats_server)
    outbox.add_channel(conn, "nats")
    env = nats_env(broker, database_url, tmp_path)
    with (tmp_path / "relay.log").open("ab") as log:
        relay = subprocess.Popen(
            [PAYHOOKS, "relay", "nats"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        paid(conn, 1)
        wait_until(lambda: unpublished(conn, "nats") == 0, timeout=60, what="the first event")
        nats_server.stop()
        paid(conn, 5)
        (backlog,) = [b for b in outbox.backlogs(conn) if b.channel == "nats"]
        assert backlog.waiting == 5 and backlog.relayed
        later = backlog.oldest_at + alerts.RELAY_LAG + timedelta(seconds=1)
        (alert,) = alerts.relay_backlog(conn, later)
        assert alert.key == "relay_backlog:nats" and "5 payment events" in alert.title
        nats_server.start()
        wait_until(lambda: unpublished(conn, "nats") == 0, timeout=90, what="the drain")
        assert alerts.relay_backlog(conn, later) == []
    finally:
        relay.send_signal(signal.SIGTERM)
        code = relay.wait(timeout=30)
    assert code == 0, (tmp_path / "relay.log").read_text()
    ids = [m.message_id for m in stored(broker)]
    assert len(ids) == 6 == len(set(ids))
    assert "relay_broker_unavailable" in (tmp_path / "relay.log").read_text()


def test_two_relays_of_one_channel_publish_each_event_once(
    database_url, conn, rabbit_server: RabbitServer
):
    """RabbitMQ keeps every copy, so a second relay publishing beside the first would show:
    the channel's hold lets one publish at a time."""
    broker, twin = rabbitmq(rabbit_server), None
    twin = type(broker)(broker.options)
    outbox.add_channel(conn, "rabbitmq")
    paid(conn, 12)
    options = RelayOptions(batch=3, every_s=0.01)

    async def both() -> None:
        relays = [Relay(connecting(database_url), b, options) for b in (broker, twin)]
        await asyncio.gather(*(r.run(asyncio.Event(), drain=True) for r in relays))

    asyncio.run(both())
    ids = [m.message_id for m in queued(broker)]
    assert len(ids) == 12 == len(set(ids))


@pytest.mark.parametrize("channel", ["nats", "rabbitmq"])
def test_relay_once_without_its_broker_exits_1_saying_so(database_url, tmp_path, channel):
    env = relay_env(
        database_url,
        tmp_path,
        PAYHOOKS_RELAY_NATS_URL="nats://127.0.0.1:9",
        PAYHOOKS_RELAY_RABBITMQ_URL="amqp://guest:guest@127.0.0.1:9/",
    )
    # The relay's loop sets its signal handlers, which only a main thread may: a process.
    result = subprocess.run(
        [PAYHOOKS, "relay", channel, "--once"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert f"payhooks: {channel}: cannot connect" in result.stderr
    assert "guest:guest" not in result.stdout + result.stderr


def test_relay_status_and_remove(database_url, conn, tmp_path):
    outbox.add_channel(conn, "rabbitmq")
    paid(conn, 2)
    env = relay_env(database_url, tmp_path)
    status = invoke(env, "relay", "status")
    assert status.returncode == 0, status.stderr
    found = {row["channel"]: row for row in json.loads(status.stdout)}
    assert (found["rabbitmq"]["relayed"], found["rabbitmq"]["waiting"]) == (True, 2)
    assert (found["nats"]["relayed"], found["nats"]["waiting"]) == (False, 0)
    removed = invoke(env, "relay", "remove", "rabbitmq")
    assert removed.returncode == 0, removed.stderr
    assert "no longer queued; 2 queued event(s) left unpublished" in removed.stdout
    paid(conn, 1)
    assert unpublished(conn, "rabbitmq") == 2
    wrong = invoke(env, "relay", "remove", "kafka")
    assert wrong.returncode == 1 and "the channels are nats, rabbitmq" in wrong.stderr
    dropped = invoke(env, "relay", "remove", "rabbitmq", "--drop-queued")
    assert dropped.returncode == 0, dropped.stderr
    assert "2 queued event(s) dropped, never to be published" in dropped.stdout
    assert unpublished(conn, "rabbitmq") == 0


def test_events_left_for_a_removed_channel_are_alerted_as_such(conn):
    """Not "is its relay running?" for ever: the channel was removed; add it back, or drop
    them (``payhooks relay remove CHANNEL --drop-queued``)."""
    from datetime import UTC, datetime, timedelta

    from payhooks.operations import alerts

    outbox.add_channel(conn, "nats")
    paid(conn, 1)
    outbox.remove_channel(conn, "nats")
    [alert] = alerts.relay_backlog(conn, datetime.now(UTC) + timedelta(hours=1))
    assert alert.title == "nats: 1 payment events left queued for a removed channel"
    assert "payhooks relay remove nats --drop-queued" in alert.body


def test_removing_the_channel_of_a_running_relay_stops_it_saying_so(
    database_url, conn, nats_server: NatsServer, tmp_path
):
    broker = jetstream(nats_server)
    env = nats_env(broker, database_url, tmp_path)
    with (tmp_path / "relay.log").open("ab") as log:
        relay = subprocess.Popen(
            [PAYHOOKS, "relay", "nats"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: "nats" in relayed(conn), timeout=60, what="the relay's channel")
        removed = invoke(env, "relay", "remove", "nats")
        assert removed.returncode == 0, removed.stderr
        code = relay.wait(timeout=60)
    finally:
        if relay.poll() is None:
            relay.send_signal(signal.SIGTERM)
            relay.wait(timeout=30)
    said = (tmp_path / "relay.log").read_text()
    assert code == 1, said
    assert "payhooks: nats: the channel was removed (payhooks relay remove nats)" in said
    assert "relay_channel_removed" in said


def relayed(conn: psycopg.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT channel FROM payhooks_relay_channels")}


def test_the_purge_deletes_published_events_past_the_window_and_never_unpublished_ones(conn):
    outbox.add_channel(conn, "nats")
    for _ in range(3):
        buy = purchase(conn)
        deliver(conn, buy.captured())
    conn.execute("UPDATE payhooks_outbox SET created_at = now() - interval '100 days'")
    conn.execute(
        "UPDATE payhooks_outbox SET sent_at = now() - interval '100 days' WHERE id IN"
        " (SELECT id FROM payhooks_outbox WHERE kind = 'event' ORDER BY id LIMIT 2)"
    )
    assert retention.purge(conn, 90) is not None
    left = conn.execute("SELECT sent_at IS NULL FROM payhooks_outbox WHERE kind = 'event'")
    assert left.fetchall() == [(True,)]

"""What a callback only a gateway's API can confirm may make payhooks store and call: PayU's
refund callbacks carry only the merchant key, which every checkout form shows, so each bound
here is what anyone can reach (docs/security.md, "Callbacks only an API can confirm")."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from payhooks import Hooks, ingest
from payhooks.events import Provider
from payhooks.intake import confirmations
from payhooks.intake.answers import error_status
from payhooks.intake.ingest import Outcome
from payhooks.plumbing.errors import ConfirmationsFull
from tests.factories import ADAPTERS

SUCCESS = Path(__file__).resolve().parent.parent / "data" / "payu" / "refund_callback_success.json"
PAYU = ADAPTERS[Provider.PAYU]


def refund_callback(txnid: str, request_id: int) -> bytes:
    doc = json.loads(SUCCESS.read_bytes())
    doc.update(key=PAYU.merchant_key, merchantTxnId=txnid, request_id=str(request_id))
    return json.dumps(doc).encode()


def send(conn: psycopg.Connection, body: bytes):
    return ingest(conn, PAYU, body, {}, Hooks())


def stored(conn: psycopg.Connection) -> tuple[int, int]:
    records = conn.execute("SELECT count(*) FROM processed_webhooks").fetchone()[0]
    waiting = conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone()[0]
    return records, waiting


def test_forged_refund_callbacks_for_one_order_stop_at_the_bound_stored_nowhere(conn):
    bound = confirmations.MAX_OPEN_PER_ORDER
    for n in range(bound):
        assert send(conn, refund_callback("ORDER_1", 1000 + n)).outcome is Outcome.CONFIRMING
    for n in range(bound, bound + 20):
        with pytest.raises(ConfirmationsFull, match="already wait"):
            send(conn, refund_callback("ORDER_1", 1000 + n))
    assert stored(conn) == (bound, bound)
    # Refused for now, never dropped: answered 503, so PayU sends it again.
    assert error_status(ConfirmationsFull("payu", "full")) == (503, "confirmations_full")


def test_a_settled_confirmation_makes_room_for_the_next_callback_of_its_order(conn):
    bound = confirmations.MAX_OPEN_PER_ORDER
    for n in range(bound):
        send(conn, refund_callback("ORDER_1", 1000 + n))
    conn.execute("UPDATE payhooks_confirmations SET verdict = 'refuted', settled_at = now()")
    assert send(conn, refund_callback("ORDER_1", 2000)).outcome is Outcome.CONFIRMING


def test_forged_refund_callbacks_over_many_orders_stop_at_the_gateways_bound(conn, monkeypatch):
    monkeypatch.setattr(confirmations, "MAX_OPEN_PER_GATEWAY", 6)
    for n in range(6):
        send(conn, refund_callback(f"ORDER_{n}", 1000 + n))
    with pytest.raises(ConfirmationsFull, match="of this gateway"):
        send(conn, refund_callback("ORDER_new", 3000))
    assert stored(conn) == (6, 6)


def test_the_bound_is_per_gateway(conn):
    """Another gateway's callbacks waiting leave a PayU callback its own room."""
    bound = confirmations.MAX_OPEN_PER_ORDER
    conn.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, payload_sha256,"
        " body, headers) SELECT 'phonepe', 'k' || n, 'x', 'confirming', 'h' || n, '', '{}'"
        " FROM generate_series(1, %s) n",
        (bound,),
    )
    conn.execute(
        "INSERT INTO payhooks_confirmations (provider, event_id, gateway_order_id, kind)"
        " SELECT 'phonepe', 'k' || n, 'ORDER_1', 'payment_captured'"
        " FROM generate_series(1, %s) n",
        (bound,),
    )
    assert send(conn, refund_callback("ORDER_1", 1000)).outcome is Outcome.CONFIRMING

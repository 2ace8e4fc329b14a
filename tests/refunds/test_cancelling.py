"""A way out for every refund intent: a person cancels one stuck ``requested`` (a gateway that
fails its every call), saying who and why; it is never sent afterwards and its amount is free
again. Never while a sender is calling the gateway with it. Against the gateways' refund
doubles over a loopback socket, on real PostgreSQL."""

from __future__ import annotations

import threading

import pytest

from payhooks.events import Provider
from payhooks.gateways import credentials
from payhooks.gateways._status import http_client
from payhooks.gateways.cashfree.status import client as cashfree_client
from payhooks.plumbing.errors import NotFound
from payhooks.reconcile.running import connecting
from payhooks.refunding import refunds
from payhooks.refunding.refunds import NotCancellable, RefundState
from payhooks.refunding.sending import send_due
from payhooks.sim.gateway_api import Fault
from tests.reconcile.conftest import API_KEYS
from tests.refunds import test_sending as sending_tests
from tests.refunds.test_sending import PAYMENT, ask, books, due_now, paid, send

CF = Provider.CASHFREE
core = sending_tests.core  # its fixtures
gateway_api = sending_tests.gateway_api


def cancel(conn, made, by: str = "asha", reason: str = "Cashfree keeps failing it"):
    """Cancelled by a person who looked in the gateway's dashboard: no such refund there."""
    return refunds.cancel(conn, made.provider, made.idempotency_key, reason=reason,
                          cancelled_by=by, not_at_gateway=True)  # fmt: skip


def test_an_intent_sent_before_is_cancelled_only_by_one_who_says_the_gateway_lacks_it(
    core, database_url
):
    """A call that timed out or lost its answer after the gateway acted leaves the intent
    ``requested`` with a refund made: a cancel then freed its amount, the next intent was
    sent for it, and the customer got more back than was paid (a check with three senders
    and cancels under churn: 55 refunds made under intents payhooks showed cancelled). An
    intent sent before is cancelled only by one who looked: its gateway does not have it."""
    conn, api, url = core
    paid(api, CF)
    made = ask(conn, CF, amount=40_000)
    api.fail_after_acting(CF, Fault(status=503))  # the refund made, its answer an error
    send(database_url, url)
    with pytest.raises(refunds.NotCancellable, match="sent to the gateway 1 time"):
        refunds.cancel(conn, CF, made.idempotency_key, reason="r", cancelled_by="asha")
    [still] = refunds.of_payment(conn, CF, made.payment_id)
    assert still.state is RefundState.REQUESTED
    never = ask(conn, CF, amount=100, key="never sent")  # never called: no one need look
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now() + interval '1 hour'"
                 " WHERE idempotency_key = %s", (never.idempotency_key,))  # fmt: skip
    done = refunds.cancel(conn, CF, never.idempotency_key, reason="r", cancelled_by="asha")
    assert done.state is RefundState.CANCELLED


def test_an_intent_cancelled_is_never_sent_and_frees_its_amount(core, database_url):
    conn, api, url = core
    paid(api, CF)
    made = ask(conn, CF)
    api.fail_next(CF, Fault(status=500), Fault(status=500))
    send(database_url, url)
    due_now(conn)
    send(database_url, url)  # stuck: requested after two errors
    done = cancel(conn, made)
    assert (done.state, done.cancelled_by, done.cancel_reason) == (
        RefundState.CANCELLED, "asha", "Cashfree keeps failing it",
    )  # fmt: skip
    assert done.settled_at is not None
    due_now(conn)
    assert send(database_url, url).sent[CF] == 0
    assert books(api, CF) == (0, 0)
    again = ask(conn, CF, key="second try")  # the whole amount is refundable again
    assert again.state is RefundState.REQUESTED


def test_cancelling_twice_is_the_one_cancel(core):
    conn, _, _ = core
    made = ask(conn, CF)
    first = cancel(conn, made)
    assert cancel(conn, made, by="ravi", reason="again") == first


def test_an_intent_the_gateway_has_is_not_cancelled(core, database_url):
    conn, api, url = core
    paid(api, CF)
    made = ask(conn, CF)
    send(database_url, url)
    with pytest.raises(NotCancellable, match="processed"):
        cancel(conn, made)
    assert [r.state for r in refunds.of_payment(conn, CF, PAYMENT[CF])] == [RefundState.PROCESSED]


def test_an_unknown_intent_is_not_found(core):
    conn, _, _ = core
    with pytest.raises(NotFound):
        refunds.cancel(conn, CF, "ph00000000000000000000", reason="why", cancelled_by="asha")


def test_an_intent_a_sender_is_calling_the_gateway_with_is_not_cancelled(
    core,
    database_url,
):
    """A sender mid-call (its lease committed, the gateway not yet answered) and a person
    cancelling at that moment: the cancel is refused, the call's answer recorded, the refund
    made once. The sender's call waits at a gate until the cancel has been tried."""
    conn, api, url = core
    paid(api, CF)
    made = ask(conn, CF)
    in_call, cancel_tried = threading.Event(), threading.Event()
    tried: list[BaseException] = []

    with http_client(5.0) as http:
        real = cashfree_client(credentials(API_KEYS.env(url))[CF], http)

        class Gated:
            provider = CF

            def send_refund(self, refund):
                in_call.set()
                assert cancel_tried.wait(timeout=30)
                return real.send_refund(refund)

            def refund_status(self, refund):
                return real.refund_status(refund)

        def person() -> None:
            assert in_call.wait(timeout=30)
            try:
                cancel(conn, made)
            except NotCancellable as exc:
                tried.append(exc)
            finally:
                cancel_tried.set()

        threading.Thread(target=person).start()
        tally = send_due(connecting(database_url), {CF: Gated()})
    assert tally.sent[CF] == 1
    assert [type(e) for e in tried] == [NotCancellable]
    assert [r.state for r in refunds.of_payment(conn, CF, PAYMENT[CF])] == [RefundState.PROCESSED]
    assert books(api, CF) == (1, 49_900)


@pytest.mark.parametrize("deadline_s", [5.0, 65.0])
def test_an_intent_is_held_longer_than_all_the_calls_its_send_may_make(
    core, database_url, deadline_s
):
    """The defect: the hold was two minutes whatever each call's deadline. With
    ``PAYHOOKS_RECONCILE_TIMEOUT_MS`` at 65 s, a retried send (a lookup, then the post) ran past
    it: a cancel was accepted mid-call, the amount freed and refunded again. The hold is
    twice what the send's calls may take together (``refunds.CALLS_PER_SEND``), two minutes
    at least; the gateway's client reads it while its call is under way."""
    conn, api, url = core
    paid(api, CF)
    ask(conn, CF)
    held: list[float] = []
    with http_client(deadline_s) as http:
        real = cashfree_client(credentials(API_KEYS.env(url))[CF], http)

        class Watching:
            provider = CF

            def __init__(self) -> None:
                self.http = http

            def send_refund(self, refund):
                (left,) = conn.execute(
                    "SELECT extract(epoch FROM leased_until - now()) FROM payhooks_refunds"
                ).fetchone()
                held.append(float(left))
                return real.send_refund(refund)

            def refund_status(self, refund):
                return real.refund_status(refund)

        assert send_due(connecting(database_url), {CF: Watching()}).sent[CF] == 1
    (left,) = held
    least = max(120.0, 2 * refunds.CALLS_PER_SEND * deadline_s)
    assert least - 5 < left <= least


def test_a_sender_that_leases_after_the_cancel_sends_nothing(core, database_url):
    """The other order of the same race: the cancel commits first, the sender's lease then
    finds nothing due."""
    conn, api, url = core
    paid(api, CF)
    made = ask(conn, CF)
    cancel(conn, made)
    assert send(database_url, url).sent[CF] == 0
    assert books(api, CF) == (0, 0)


def test_the_cli_cancels_an_intent_and_says_why_it_cannot(core, database_url):
    import json
    import subprocess
    import sys
    from pathlib import Path

    conn, _, _ = core
    made = ask(conn, CF)
    command = [str(Path(sys.executable).parent / "payhooks"), "refunds", "cancel",
               made.idempotency_key, "--provider", "cashfree", "--reason", "refunded by NEFT",
               "--by", "asha", "--database-url", database_url]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    shown = json.loads(done.stdout)
    assert (shown["state"], shown["cancelled_by"], shown["cancel_reason"]) == (
        "cancelled", "asha", "refunded by NEFT",
    )  # fmt: skip
    conn.execute("UPDATE payhooks_refunds SET state = 'processed'")
    refused = subprocess.run(command, capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "only a refund not yet sent" in refused.stderr


def test_a_sender_that_outlived_its_lease_records_what_the_gateway_made(core):
    """A call slower than its lease, a cancel meanwhile, then the gateway's answer: the
    gateway has the refund, so the intent is sent again and counts again (never a refund made
    and a cancelled intent freeing its amount)."""
    conn, _, _ = core
    made = ask(conn, CF)
    (leased,) = refunds.leased(conn, CF, 1)
    conn.execute("UPDATE payhooks_refunds SET leased_until = now() - interval '1 second'")
    cancel(conn, made)
    refunds.accepted(conn, leased, "cf_1234", processed=False)
    (found,) = refunds.of_payment(conn, CF, PAYMENT[CF])
    assert (found.state, found.gateway_refund_id) == (RefundState.SENT, "cf_1234")
    assert found.cancelled_by == "asha"  # what the person did is kept
    with pytest.raises(refunds.RefundTooLarge):
        ask(conn, CF, key="another")

"""Refunds sent exactly once, whatever goes wrong between payhooks and the gateway: the sender
against the gateways' refund doubles over a loopback socket, on real PostgreSQL. Under every
fault the double's books show one refund per intent and never more than was captured."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import payhooks
from payhooks.events import Provider
from payhooks.gateways import credentials
from payhooks.gateways._status import client, http_client
from payhooks.operations import alerts
from payhooks.reconcile.refunding import send_once
from payhooks.reconcile.running import connecting
from payhooks.refunding import refunds, sending
from payhooks.refunding.refunds import RefundState
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateway_api import Fault
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

PAYMENT = {Provider.RAZORPAY: "pay_rfsend0000001", Provider.CASHFREE: "5114917039291",
           Provider.PAYU: "403993715529184406"}  # fmt: skip
ORDER = {Provider.RAZORPAY: "order_rfsend00001", Provider.CASHFREE: "ph_rfsend0000001",
         Provider.PAYU: "ph_rfsend0000002"}  # fmt: skip
GATEWAYS = [Provider.RAZORPAY, Provider.CASHFREE, Provider.PAYU]
AT_ONCE = {Provider.RAZORPAY, Provider.CASHFREE}
"""The gateways whose double answers a refund processed at once; PayU's answer is always
"Refund Request Queued", its refund processed when asked about later."""
TIMEOUT_S = 1.0
"""The gateway's answer waited for in the tests of an answer that never comes in time."""
PATIENT_S = 30.0
"""Everywhere else: on a loaded two-core machine the double can take over a second to answer,
and a call timed out is a refund asked again, not the outcome the test reads."""
gateway_api = reconciling.gateway_api  # its fixture


@pytest.fixture
def core(database_url, gateway_api):
    api, url = gateway_api
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        yield conn, api, url


def paid(api, provider: Provider, amount: int = 49_900) -> None:
    order = Purchase(provider=provider, cart_id="RF-1", reference=ORDER[provider],
                     amount_paise=amount, items={"TEA": 1})  # fmt: skip
    api.pay(order, PAYMENT[provider])


def ask(conn, provider: Provider, amount: int = 49_900, key: str = "double-payment"):
    return refunds.request(conn, provider, PAYMENT[provider], amount, key=key,
                           captured_paise=49_900, reason="double payment", requested_by="shop",
                           gateway_order_id=ORDER[provider])  # fmt: skip


def send(database_url: str, url: str, timeout_s: float = PATIENT_S):
    return send_once(connecting(database_url), credentials(API_KEYS.env(url)), timeout_s=timeout_s)


def asked_again(conn, database_url: str, url: str, provider: Provider) -> None:
    """A pass that neither sends nor refuses the intent: it stays requested, asked again (its
    wait passed)."""
    tally = send(database_url, url)
    assert tally.refused[provider] == 0 and tally.retried[provider] == 1, tally.summary()
    [(found, _, _)] = state(conn, provider)
    assert found == "requested"
    due_now(conn)


def due_now(conn) -> None:
    """The wait before the next attempt (5 s and up), passed."""
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now()")


def settle(conn, database_url: str, url: str) -> None:
    """A minute on: every refund the gateway accepted asked about (PayU's, queued at first)."""
    due_now(conn)
    send(database_url, url)


def state(
    conn, provider: Provider, payment_id: str | None = None
) -> list[tuple[str, str | None, int]]:
    found = refunds.of_payment(conn, provider, payment_id or PAYMENT[provider])
    return [(r.state.value, r.gateway_refund_id, r.attempts) for r in found]


def books(api, provider: Provider) -> tuple[int, int]:
    """Refunds the gateway made for the payment, and the paise it gave back."""
    key = (provider, PAYMENT[provider])
    return api.money.made[key], api.money.refunded[key]


@pytest.mark.parametrize("provider", GATEWAYS)
def test_an_intent_is_sent_once_and_recorded_with_the_gateways_refund_id(
    core, database_url, provider
):
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    tally = send(database_url, url)
    assert tally.sent[provider] == 1 and tally.processed[provider] == (provider in AT_ONCE)
    settle(conn, database_url, url)
    [(found, refund_id, attempts)] = state(conn, provider)
    assert (found, attempts) == ("processed", 1) and refund_id
    assert books(api, provider) == (1, 49_900)
    assert send(database_url, url).sent[provider] == 0  # nothing more to send


FAULTS = {
    "timeout after the gateway acted": ("after", Fault(delay_s=TIMEOUT_S + 1.5)),
    "answer lost after the gateway acted": ("after", Fault(status=503)),
    "409 in progress, then 200": ("before", Fault(status=409)),
    "5xx before acting": ("before", Fault(status=500)),
    "429 before acting": ("before", Fault(status=429, retry_after_s=1)),
}


@pytest.mark.parametrize("provider", GATEWAYS)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_under_each_fault_the_gateway_refunds_once(core, database_url, provider, fault):
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    when, scripted = FAULTS[fault]
    (api.fail_after_acting if when == "after" else api.fail_next)(provider, scripted)
    first = send(database_url, url, TIMEOUT_S)
    assert first.retried[provider] == 1, first.summary()
    [(found, _, _)] = state(conn, provider)
    assert found == "requested"  # not known to be refunded: asked again, same key and body
    due_now(conn)
    again = send(database_url, url)
    assert again.sent[provider] == 1, again.summary()
    settle(conn, database_url, url)
    [(found, refund_id, attempts)] = state(conn, provider)
    assert (found, attempts) == ("processed", 2) and refund_id
    assert books(api, provider) == (1, 49_900)


@pytest.mark.parametrize("provider", GATEWAYS)
def test_two_senders_at_once_refund_once(core, database_url, provider):
    """Two senders racing: each leases what the other has not; and one meeting an intent whose
    lease ran out while the first was still mid-call sends the same key: one refund."""
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    api.fail_after_acting(provider, Fault(delay_s=TIMEOUT_S + 1.5))  # the first never hears
    start = threading.Barrier(2)
    tallies = []

    def sender() -> None:
        start.wait(timeout=30)
        tallies.append(send(database_url, url, TIMEOUT_S))

    threads = [threading.Thread(target=sender) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(t.sent[provider] + t.retried[provider] for t in tallies) == 1  # one lease
    due_now(conn)  # the lease ran out; a second sender meets it
    send(database_url, url)
    settle(conn, database_url, url)
    assert books(api, provider) == (1, 49_900)
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]


@pytest.mark.parametrize("provider", GATEWAYS)
def test_a_refund_the_gateway_refuses_is_recorded_refused_with_its_words(
    core, database_url, provider
):
    """The gateway captured less than the shop said: it refuses, and payhooks says why."""
    conn, api, url = core
    paid(api, provider, amount=10_000)
    ask(conn, provider, amount=20_000)
    tally = send(database_url, url)
    assert tally.refused[provider] == 1
    (refund,) = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REFUSED and refund.last_error
    assert any(words in refund.last_error for words in
               ("greater than amount captured", "refundable", "Invalid amount"))  # fmt: skip
    assert books(api, provider) == (0, 0)


@pytest.mark.parametrize("provider", GATEWAYS)
def test_partial_refunds_add_up_to_what_was_captured_and_no_more(core, database_url, provider):
    conn, api, url = core
    paid(api, provider)
    for n, amount in enumerate((10_000, 20_000, 19_900)):
        ask(conn, provider, amount=amount, key=f"partial-{n}")
    with pytest.raises(refunds.RefundTooLarge):
        ask(conn, provider, amount=1, key="one-paisa-more")
    send(database_url, url)
    settle(conn, database_url, url)
    assert books(api, provider) == (3, 49_900)
    intents = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert sum(r.amount_paise for r in intents) == 49_900
    assert {r.state for r in intents} == {RefundState.PROCESSED}


@pytest.mark.parametrize("provider", GATEWAYS)
def test_a_sender_killed_mid_call_leaves_a_refund_the_next_one_records_once(
    core, database_url, provider
):
    """``payhooks refunds send`` SIGKILLed while the gateway, having refunded, is still
    answering: the intent stays leased, then the next sender finds the refund and records
    it, never refunding twice."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    api.fail_after_acting(provider, Fault(delay_s=30))  # refunded; the answer takes 30 s
    command = [str(Path(sys.executable).parent / "payhooks"), "refunds", "send",
               "--database-url", database_url]  # fmt: skip
    env = {**os.environ, **API_KEYS.env(url)}
    sender = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while books(api, provider)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # the gateway has made the refund; the sender waits for its answer
    sender.send_signal(signal.SIGKILL)
    sender.wait(timeout=15)
    assert books(api, provider) == (1, 49_900)
    assert [s for s, _, _ in state(conn, provider)] == ["requested"]  # it never heard
    due_now(conn)  # the lease, two minutes long, ran out
    done = subprocess.run([*command, "--once"], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 refund(s) sent" in done.stdout
    settle(conn, database_url, url)
    assert books(api, provider) == (1, 49_900)
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]


def test_intents_are_leased_one_at_a_time_just_before_their_call(core, database_url):
    """A lease starts when its call does: however slow the calls before it, no intent waits
    leased behind them while its lease runs out (a second sender would send it meanwhile)."""
    conn, api, _ = core
    paid(api, Provider.RAZORPAY)
    for n in range(3):
        ask(conn, Provider.RAZORPAY, amount=10_000, key=f"lease-{n}")
    leased_at_each_call: list[int] = []

    class Watching:
        provider = Provider.RAZORPAY

        def send_refund(self, refund):
            from payhooks.refunding.sending import Sent

            with psycopg.connect(database_url) as watcher:
                leased_at_each_call.append(watcher.execute(
                    "SELECT count(*) FROM payhooks_refunds WHERE state = 'requested'"
                    " AND next_attempt_at > now()").fetchone()[0])  # fmt: skip
            return Sent(gateway_refund_id=f"rfnd_{refund.idempotency_key}")

    from payhooks.refunding.sending import send_due

    send_due(connecting(database_url), {Provider.RAZORPAY: Watching()}, limit=10)
    assert leased_at_each_call == [1, 1, 1]


def test_a_cashfree_refusal_of_a_refund_it_already_made_is_read_as_made(core, database_url):
    """A stale sender posts a refund_id Cashfree has already refunded under (another sender's
    call): whatever Cashfree answers, payhooks reads the refund before calling it refused."""
    conn, api, url = core
    paid(api, Provider.CASHFREE)
    ask(conn, Provider.CASHFREE)
    send(database_url, url)  # made
    stale = (
        "UPDATE payhooks_refunds SET state = 'requested', attempts = 0,"
        " gateway_refund_id = NULL, next_attempt_at = now()"
    )
    conn.execute(stale)  # the intent as a second sender saw it, its lease run out
    api.fail_next(Provider.CASHFREE, Fault(status=400))
    tally = send(database_url, url)
    assert tally.refused[Provider.CASHFREE] == 0 and tally.sent[Provider.CASHFREE] == 1
    assert [s for s, _, _ in state(conn, Provider.CASHFREE)] == ["processed"]
    assert books(api, Provider.CASHFREE) == (1, 49_900)


ALREADY_PROCESSED = Fault(status=400, body=json.dumps({"error": {
    "code": "BAD_REQUEST_ERROR", "source": "NA", "step": "NA", "reason": "NA", "metadata": {},
    "description": "Different request with the same idempotency key has already been processed.",
}}).encode())  # fmt: skip
"""Razorpay's answer to a key it took a request under (razorpay.com/docs/api/refunds/
normal-refunds-idempotent): a refund under the key may be made, so never its refusal."""


@pytest.mark.parametrize("made", [True, False], ids=["made by another sender", "none listed"])
def test_a_razorpay_key_already_processed_is_never_a_refusal(core, database_url, made):
    """Razorpay answers a post under the intent's key that a request under it was processed
    already. Made before (a stale sender's post, as above), the refund is found under the key
    in the same pass; none listed (yet), the intent stays ``requested`` and is asked again.
    Either way the customer is refunded once, and the intent is never ``refused``."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider)
    if made:
        send(database_url, url)
        conn.execute(
            "UPDATE payhooks_refunds SET state = 'requested', attempts = 0,"
            " gateway_refund_id = NULL, next_attempt_at = now()"
        )
    api.fail_next(provider, ALREADY_PROCESSED)
    tally = send(database_url, url)
    assert tally.refused[provider] == 0, tally.summary()
    assert tally.sent[provider] == made and tally.retried[provider] == (not made)
    if not made:
        [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
        assert refund.state is RefundState.REQUESTED
        assert "already been processed" in (refund.last_error or "")
        due_now(conn)
        assert send(database_url, url).sent[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


def razorpay_400(description: str) -> Fault:
    return Fault(status=400, body=json.dumps({"error": {
        "code": "BAD_REQUEST_ERROR", "source": "NA", "step": "NA", "reason": "NA",
        "metadata": {}, "description": description,
    }}).encode())  # fmt: skip


@pytest.mark.parametrize(
    "description",
    [
        # Razorpay's Common Errors page names the unknown id so now.
        "The id provided does not exist or access is unauthorised",
        # The account's IP allow-list refusing payhooks' host.
        "Access Denied",
        # A path Razorpay has no route for (a base URL naming /v1 twice).
        "The requested URL was not found on the server",
    ],
)
def test_a_razorpay_400_that_says_nothing_of_the_refund_is_never_its_refusal(
    core, database_url, description
):
    """Razorpay answers ``BAD_REQUEST_ERROR`` for what is wrong on payhooks' side of the API
    too (its keys, its address, its host): the refund is asked again, the words kept, never
    recorded ``refused`` with its amount freed; once the cause is mended, it is made once."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider)
    api.fail_next(provider, razorpay_400(description))
    tally = send(database_url, url)
    assert tally.refused[provider] == 0 and tally.retried[provider] == 1, tally.summary()
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REQUESTED and description in (refund.last_error or "")
    due_now(conn)
    assert send(database_url, url).sent[provider] == 1
    assert books(api, provider) == (1, 49_900)


@pytest.mark.parametrize("provider", GATEWAYS)
def test_a_refund_accepted_pending_is_closed_by_asking_once_the_gateway_processed_it(
    core, database_url, provider
):
    """Razorpay's normal refunds and PayU's queue: accepted, not yet processed. No refund
    webhook comes (or it came before the sender recorded the answer, closing nothing): the
    checker asks the gateway and closes the intent when the gateway says processed."""
    conn, api, url = core
    api.money.pending = True
    paid(api, provider)
    ask(conn, provider)
    assert send(database_url, url).processed[provider] == 0
    [(found, refund_id, _)] = state(conn, provider)
    assert found == "sent" and refund_id
    due_now(conn)
    assert send(database_url, url).settled[provider] == 0  # asked: still pending
    assert [s for s, _, _ in state(conn, provider)] == ["sent"]
    assert api.settle(provider) == 1
    quiet = send(database_url, url)  # asked again only once due: not yet
    assert quiet.settled[provider] == 0
    due_now(conn)
    assert send(database_url, url).settled[provider] == 1
    assert state(conn, provider) == [("processed", refund_id, 1)]
    assert books(api, provider) == (1, 49_900)


@pytest.mark.parametrize("provider", GATEWAYS)
def test_a_sent_refund_whose_status_the_api_fails_to_tell_is_counted_to_try_again(
    core, database_url, provider, caplog
):
    """Asking about a sent refund failing (the API's 500) is counted and logged, as sending
    one is: ``refunds send --once`` exits 1 on it, and the intent is asked about again."""
    conn, api, url = core
    api.money.pending = True
    paid(api, provider)
    ask(conn, provider)
    send(database_url, url)
    due_now(conn)
    api.fail_next(provider, Fault(status=500))
    with caplog.at_level("INFO", logger="payhooks.refunds"):
        tally = send(database_url, url)
    assert tally.retried[provider] == 1 and tally.settled[provider] == 0, tally.summary()
    assert [r.getMessage() for r in caplog.records].count("refund_check_retry") == 1
    [(found, _, _)] = state(conn, provider)
    assert found == "sent"
    api.settle(provider)
    due_now(conn)
    assert send(database_url, url).settled[provider] == 1


@pytest.mark.parametrize("provider", GATEWAYS)
def test_a_refund_the_gateway_fails_after_accepting_frees_its_amount(core, database_url, provider):
    conn, api, url = core
    api.money.pending = True
    paid(api, provider)
    ask(conn, provider)
    send(database_url, url)
    api.settle(provider, failed=True)
    due_now(conn)
    assert send(database_url, url).failed[provider] == 1
    (refund,) = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.FAILED and refund.last_error  # the gateway's words
    api.money.pending = False
    ask(conn, provider, key="after-the-failure")  # the whole amount refundable again
    send(database_url, url)
    settle(conn, database_url, url)
    assert sorted(s for s, _, _ in state(conn, provider)) == ["failed", "processed"]
    assert api.money.refunded[(provider, PAYMENT[provider])] == 49_900


@pytest.mark.parametrize("provider", GATEWAYS)
def test_a_refund_the_gateway_made_and_failed_in_its_answer_is_failed_with_its_id(
    core, database_url, provider
):
    """The gateway made the refund under its own id and already failed it (Razorpay's
    ``failed``, Cashfree's ``FAILED`` in the create call's answer; PayU's when asked): closed
    ``failed`` with that id, as a status check closes it, never ``refused`` (the gateway's no
    to the call, no refund made), and its whole amount refundable again."""
    conn, api, url = core
    api.money.failing = True
    paid(api, provider)
    ask(conn, provider)
    first = send(database_url, url)
    settle(conn, database_url, url)
    assert first.refused[provider] == 0, first.summary()
    [(found, refund_id, _)] = state(conn, provider)
    assert found == "failed" and refund_id, state(conn, provider)
    if provider in AT_ONCE:
        assert (first.failed[provider], first.sent[provider]) == (1, 0), first.summary()
    api.money.failing = False
    ask(conn, provider, key="after-the-failure")
    send(database_url, url)
    settle(conn, database_url, url)
    assert sorted(s for s, _, _ in state(conn, provider)) == ["failed", "processed"]
    assert api.money.refunded[(provider, PAYMENT[provider])] == 49_900


FAILED_NAMING_NOTHING = {
    Provider.RAZORPAY: {"status": "failed"},
    Provider.CASHFREE: {"refund_status": "CANCELLED"},
}


@pytest.mark.parametrize("provider", list(FAILED_NAMING_NOTHING))
def test_an_answer_saying_failed_that_names_no_refund_of_the_intent_is_asked_again(
    core, database_url, provider
):
    """A 2xx answer to the refund call holding a failed status and nothing else (a proxy's,
    or the API's in a shape it does not document) names no refund of this intent: it was
    closed ``refused`` and its amount was free again for a second refund. Only an answer that
    names the intent's refund (Razorpay's ``payment_id``, Cashfree's ``refund_id``) can say it
    failed; this one is unreadable, asked again, and the refund is sent."""
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider, amount=10_000)
    body = json.dumps(FAILED_NAMING_NOTHING[provider]).encode()
    api.fail_next(provider, Fault(status=200, body=body))
    asked_again(conn, database_url, url, provider)
    with pytest.raises(refunds.RefundTooLarge):  # the first still holds its amount
        ask(conn, provider, amount=49_900, key="a-second-refund")
    assert send(database_url, url).sent[provider] == 1
    assert books(api, provider) == (1, 10_000)


def test_a_sent_intent_is_asked_about_less_often_as_it_ages(core, database_url):
    """A minute after it was sent, then at a quarter of its age, at most every six hours."""
    conn, api, url = core
    api.money.pending = True
    paid(api, Provider.RAZORPAY)
    ask(conn, Provider.RAZORPAY)
    send(database_url, url)
    waits = []
    for age_hours in (0, 4, 100):
        conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now(),"
                     " sent_at = now() - make_interval(hours => %s)", (age_hours,))  # fmt: skip
        send(database_url, url)
        waits.append(conn.execute(
            "SELECT extract(epoch FROM next_attempt_at - now()) FROM payhooks_refunds"
        ).fetchone()[0])  # fmt: skip
    assert [round(float(w) / 60) for w in waits] == [1, 60, 360]


def wait_asked(conn, provider: Provider) -> float:
    """Seconds from now until the intent is due again."""
    row = conn.execute(
        "SELECT extract(epoch FROM next_attempt_at - now()) FROM payhooks_refunds "
        "WHERE provider = %s",
        (provider.value,),
    ).fetchone()
    return float(row[0])


@pytest.mark.parametrize("provider", GATEWAYS)
@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_a_429_is_asked_again_no_sooner_than_the_gateway_asked(core, database_url, provider, form):
    """The sender called again 5-6 s after a 429 that asked for 8 (longer than
    the sender's own first backoff, 5 s). Retry-After in seconds or as an HTTP date; Cashfree's
    own x-ratelimit-retry."""
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    api.fail_next(
        provider, Fault(status=429, retry_after_s=300, retry_after_date=form != "seconds")
    )
    assert send(database_url, url).retried[provider] == 1
    assert wait_asked(conn, provider) > 295  # the 300 s asked, less the seconds a date rounds off


@pytest.mark.parametrize("provider", GATEWAYS)
@pytest.mark.parametrize(
    "faults",
    [[Fault(status=429, retry_after_s=30)], [Fault(status=503)] * 3],
    ids=["429", "three 5xx"],
)
def test_a_rate_limit_or_outages_in_a_row_stop_the_gateways_turn(
    core, database_url, provider, faults
):
    """The sender went on calling a gateway that answered 429 (or was down), one intent after
    another, up to 50 a pass: a 429, or three outages in a row, end that gateway's turn, as
    they end reconciliation's (docs/operations.md); the intents not called wait for the next
    pass, untouched."""
    conn, api, url = core
    paid(api, provider)
    for n in range(5):
        ask(conn, provider, amount=100, key=f"part-{n}")
    api.fail_next(provider, *faults)
    tally = send(database_url, url)
    assert tally.retried[provider] == len(faults) and tally.sent[provider] == 0, tally.summary()
    assert books(api, provider) == (0, 0)  # nothing made, nothing more asked
    untouched = [r for r in state(conn, provider) if r[2] == 0]
    assert len(untouched) == 5 - len(faults)
    due_now(conn)
    send(database_url, url)
    assert books(api, provider) == (5, 500)


def test_a_hand_over_that_calls_no_gateway_does_not_break_a_run_of_outages(core, database_url):
    """Three outages in a row pause the gateway; a refund handed to the app's hooks again (no
    call) between them reset the run, and the sender went on calling a gateway that was down."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    for n in range(5):
        ask(conn, provider, amount=100, key=f"part-{n}")
    send(database_url, url)  # each sent; the double says each processed at once
    conn.execute(
        "UPDATE payhooks_refunds SET state = 'sent', next_attempt_at = now() - interval '1 s',"
        " last_error = NULL, settled_at = NULL"
    )
    first, second = (refunds.idempotency_key(provider, PAYMENT[provider], f"part-{n}")
                     for n in (0, 1))  # fmt: skip
    conn.execute(  # asked about in turn: part-0, then part-1 (a hand-over), then the rest
        "UPDATE payhooks_refunds SET next_attempt_at = now() - interval '3 s'"
        " WHERE idempotency_key = %s",
        (first,),
    )
    handed = conn.execute(
        "UPDATE payhooks_refunds SET last_error = %s, next_attempt_at = now() - interval '2 s'"
        " WHERE idempotency_key = %s",
        (refunds.NOT_TAKEN + " (RuntimeError: the app was down)", second),
    )
    assert handed.rowcount == 1
    api.fail_next(provider, *[Fault(status=503)] * 4)
    tally = send(database_url, url)
    assert tally.retried[provider] == 3 and provider in tally.paused, tally.summary()


@pytest.mark.parametrize("provider", GATEWAYS)
@pytest.mark.parametrize("named", [None, 30.0])
def test_a_429_is_asked_again_no_sooner_than_a_minute(core, database_url, provider, named):
    """A rate limit naming no wait (PayU's "Requests limit reached" under 200 names none), or
    a shorter one, is read as every pass reads one, at least a minute: the intent waited its
    own 5 s backoff, or the 30 s asked, and the sender called a rate-limited gateway again
    before reconciliation would."""
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    api.fail_next(provider, Fault(status=429, retry_after_s=named))
    assert send(database_url, url).retried[provider] == 1
    assert wait_asked(conn, provider) > 55


def test_a_429_whose_write_is_refused_still_pauses_its_gateway(core, database_url, monkeypatch):
    """The database refused to write down a 429's wait (a row locked): the error left as a
    step broken, and the sender called the gateway that had just asked it to stop for the
    next intent."""
    from tests.racing import refused_once

    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    for n in range(3):
        ask(conn, provider, amount=100, key=f"part-{n}")
    api.fail_next(provider, Fault(status=429, retry_after_s=30))
    refused_once(monkeypatch, refunds, "again")
    tally = send(database_url, url)
    assert provider in tally.paused and tally.retried[provider] == 1, tally.summary()
    assert books(api, provider) == (0, 0)  # nothing more asked of it this pass


class Breaking:
    """A gateway's refund client that fails, not as a gateway error, on one payment's refunds
    (a bug, a client's own exception): the pass must go on to the others."""

    def __init__(self, client, payment_id: str) -> None:
        self.client, self.payment_id, self.provider = client, payment_id, client.provider

    def send_refund(self, refund):
        if refund.payment_id == self.payment_id:
            raise RuntimeError("the client broke on this one")
        return self.client.send_refund(refund)

    def refund_status(self, refund):
        return self.client.refund_status(refund)


def test_one_intent_that_breaks_the_sender_holds_back_none_of_the_others(core, database_url):
    """One item's exception left the pass; every intent after it waited."""
    from payhooks.gateways._status import client, http_client
    from payhooks.refunding.sending import send_due

    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    refunds.request(conn, provider, "pay_broken0000001", 100, key="broken", captured_paise=100,
                    reason="double payment", requested_by="shop")  # fmt: skip
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now() - interval '1 minute'")
    ask(conn, provider)  # leased after the broken one
    with http_client(PATIENT_S) as http:
        breaking = Breaking(client(credentials(API_KEYS.env(url))[provider], http),
                            "pay_broken0000001")  # fmt: skip
        tally = send_due(connecting(database_url), {provider: breaking})
    assert tally.sent[provider] == 1 and tally.retried[provider] == 1
    (broken,) = refunds.of_payment(conn, provider, "pay_broken0000001")
    assert broken.state is RefundState.REQUESTED and "the client broke" in broken.last_error
    assert books(api, provider) == (1, 49_900)


def test_a_sent_refund_that_cannot_be_asked_about_is_an_alert(core, database_url):
    """The check of a sent intent failing every time keeps its error on the intent, and an
    alert says so (it used to say nothing)."""
    from datetime import UTC, datetime

    from payhooks.operations.alerts import refunds as refund_alerts

    conn, api, url = core
    provider = Provider.PAYU  # queued when sent: asked about later
    paid(api, provider)
    ask(conn, provider)
    send(database_url, url)
    assert refund_alerts(conn, datetime.now(UTC)) == []
    api.fail_next(provider, Fault(status=500))
    settle(conn, database_url, url)
    [(found, _, _)] = state(conn, provider)
    assert found == "sent"
    [alert] = refund_alerts(conn, datetime.now(UTC))
    assert "1 being retried after an error" in alert.body


def test_a_payu_refund_check_payu_refuses_keeps_payus_own_words(core, database_url):
    """A wrong PayU salt: every check of a sent refund kept "no action status for request N"
    as its error, though PayU answered "Invalid Hash.": a person was sent looking for a lost
    refund, not at the salt. PayU's words are kept, and the refund is asked about again."""
    conn, api, url = core
    paid(api, Provider.PAYU)
    ask(conn, Provider.PAYU)
    assert send(database_url, url).sent[Provider.PAYU] == 1  # queued: asked about later
    api.fail_next(Provider.PAYU, Fault(body=b'{"status":0,"msg":"Invalid Hash."}'))
    settle(conn, database_url, url)
    (refund,) = refunds.of_payment(conn, Provider.PAYU, PAYMENT[Provider.PAYU])
    assert (refund.state, refund.last_error) == (RefundState.SENT, "refused: Invalid Hash.")
    settle(conn, database_url, url)
    (refund,) = refunds.of_payment(conn, Provider.PAYU, PAYMENT[Provider.PAYU])
    assert refund.state is RefundState.PROCESSED


def payu_answers_its_refund_as(api, rupees: str) -> None:
    """PayU's ``check_action_status`` names the refund it made of the payment with another
    amount (``amt``, rupees) than the intent asked for."""
    [made] = api.money.refunds[(Provider.PAYU, PAYMENT[Provider.PAYU])]
    made["amt"] = rupees


def test_a_payu_refund_payu_reports_of_another_amount_is_never_recorded_processed(
    core, database_url
):
    """The check of a sent PayU refund read its status alone, never its ``amt``: a refund PayU
    reports refunded with another amount than asked was closed ``processed``, silently. Like an
    answer about another refund, it says nothing of this one: asked again, its error kept,
    and the refunds alert says so."""
    from datetime import UTC, datetime

    from payhooks.operations.alerts import refunds as refund_alerts

    conn, api, url = core
    paid(api, Provider.PAYU)
    ask(conn, Provider.PAYU)
    assert send(database_url, url).sent[Provider.PAYU] == 1  # queued: asked about later
    payu_answers_its_refund_as(api, "100.00")
    settle(conn, database_url, url)
    (refund,) = refunds.of_payment(conn, Provider.PAYU, PAYMENT[Provider.PAYU])
    assert refund.state is RefundState.SENT
    assert "10000 paise, not the 49900 asked" in (refund.last_error or "")
    [alert] = refund_alerts(conn, datetime.now(UTC))
    assert "1 being retried after an error" in alert.body


def test_a_payu_refund_found_under_its_token_with_another_amount_is_not_taken_as_sent(
    core, database_url
):
    """After a lost answer the sender finds the refund PayU made under the intent's token
    (``check_action_status`` by ``payuid``) and took it as this one whatever its ``amt``. One of
    another amount is not taken: the intent stays ``requested``, its error kept, and nothing
    is sent again."""
    conn, api, url = core
    paid(api, Provider.PAYU)
    ask(conn, Provider.PAYU)
    api.fail_after_acting(Provider.PAYU, Fault(status=503))
    assert send(database_url, url).retried[Provider.PAYU] == 1
    payu_answers_its_refund_as(api, "100.00")
    due_now(conn)
    assert send(database_url, url).retried[Provider.PAYU] == 1
    (refund,) = refunds.of_payment(conn, Provider.PAYU, PAYMENT[Provider.PAYU])
    assert (refund.state, refund.gateway_refund_id) == (RefundState.REQUESTED, None)
    assert "10000 paise, not the 49900 asked" in (refund.last_error or "")
    assert books(api, Provider.PAYU) == (1, 49_900)


# --- no refusal on an answer payhooks cannot read -------------------------------------------

HTML = b"<html><body>502 Bad Gateway</body></html>"
PASS_THROUGH = Fault()
UNREADABLE: dict[str, tuple[Provider, tuple[Fault, ...]]] = {
    "razorpay: 400 from a proxy, no error object": (
        Provider.RAZORPAY, (Fault(status=400, body=HTML, content_type="text/html"),)),
    "cashfree: 400 from a proxy, no code": (
        Provider.CASHFREE, (Fault(status=400, body=HTML, content_type="text/html"),)),
    "cashfree: 404 from a proxy, then 400": (
        Provider.CASHFREE, (Fault(status=400, body=b'{"message":"x","code":"bad",'
                                  b'"type":"invalid_request_error"}'),
                            Fault(status=404, body=HTML, content_type="text/html"))),
    "payu: a rate limit in PayU's words": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Too many requests"}'),)),
    "payu: refused under 200, no error_code": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Invalid Hash."}'),)),
    "payu: 123, pending a manual follow-up": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Request set as pending",'
                               b'"error_code":123}'),)),
    "payu: 106, the token is PayU's already, its refund not listed yet": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Token already exists.",'
                               b'"error_code":106}'),)),
    "payu: 227, the same amount under the same token": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Transactions with the same amount and'
                               b' same token are not allowed","error_code":227}'),)),
    "payu: 107, a cancel upgraded to a refund": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Upgraded to refund","error_code":107}'),)),
    "payu: 116, the payment not found at PayU for now": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Transaction not found",'
                               b'"error_code":116}'),)),
    "payu: 214, the same amount within 5 minutes": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Same amount same transaction within 5'
                               b' minutes","error_code":214}'),)),
    "payu: the action list refused": (
        Provider.PAYU, (Fault(body=b'{"status":0,"msg":"Refund FAILURE","error_code":105}'),
                        Fault(body=b'{"status":0,"msg":"Too many requests"}'))),
}  # fmt: skip


def ask_for(conn, provider: Provider, payment_id: str | None = None):
    return refunds.request(conn, provider, payment_id or PAYMENT[provider], 49_900,
                           key="double-payment", captured_paise=49_900, reason="double payment",
                           requested_by="shop", gateway_order_id=ORDER[provider])  # fmt: skip


@pytest.mark.parametrize("case", list(UNREADABLE))
def test_an_answer_it_cannot_read_refuses_nothing_and_the_refund_is_made_once(
    core, database_url, case
):
    conn, api, url = core
    provider, faults = UNREADABLE[case]
    paid(api, provider)
    ask_for(conn, provider)
    api.fail_next(provider, *faults)
    tally = send(database_url, url)
    assert tally.refused[provider] == 0 and tally.retried[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["requested"]
    assert books(api, provider) == (0, 0)
    due_now(conn)
    send(database_url, url)
    settle(conn, database_url, url)
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


def test_a_txnids_payment_payu_cannot_name_for_now_is_refunded_later_not_refused(
    core, database_url
):
    """A refund of a txnid's first payment (recorded under the txnid): verify_payment names
    its mihpayid. PayU refusing that call once (``Invalid Hash.``, as it answers a rate limit)
    is no "PayU names no payment"."""
    conn, api, url = core
    api.pay(_purchase(), PAYMENT[Provider.PAYU])
    ask_for(conn, Provider.PAYU, payment_id=ORDER[Provider.PAYU])
    api.fail_next(Provider.PAYU, Fault(body=b'{"status":0,"msg":"Invalid Hash."}'))
    tally = send(database_url, url)
    assert tally.refused[Provider.PAYU] == 0
    (refund,) = refunds.of_payment(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert refund.state.value == "requested" and "Invalid Hash." in (refund.last_error or "")
    due_now(conn)
    send(database_url, url)
    settle(conn, database_url, url)
    (refund,) = refunds.of_payment(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert refund.state.value == "processed"
    assert books(api, Provider.PAYU) == (1, 49_900)


def test_payus_answer_to_cancelling_an_authorised_payment_is_its_request_id(core, database_url):
    """PayU answers ``cancel_refund_transaction`` of a payment still in ``auth`` with its id as
    ``txn_update_id`` ("Cancel Request Queued", PayU's refund API reference), not
    ``request_id``: the intent is sent under that id, not an unreadable answer asked again."""
    conn, api, url = core
    paid(api, Provider.PAYU)
    ask(conn, Provider.PAYU)
    api.fail_next(Provider.PAYU, Fault(body=json.dumps({
        "status": 1, "msg": "Cancel Request Queued", "txn_update_id": 131279998,
        "bank_ref_num": None, "mihpayid": PAYMENT[Provider.PAYU]}).encode()))  # fmt: skip
    tally = send(database_url, url)
    assert (tally.sent[Provider.PAYU], tally.retried[Provider.PAYU]) == (1, 0)
    [(found, refund_id, attempts)] = state(conn, Provider.PAYU)
    assert (found, refund_id, attempts) == ("sent", "131279998", 1)


# --- an intent payhooks will not send: its own refusal, never the gateway's ------------------

WRITTEN_BEFORE = """
INSERT INTO payhooks_refunds (provider, idempotency_key, payment_id, gateway_order_id,
    amount_paise, currency, captured_paise, reason, requested_by)
VALUES (%s, %s, %s, %s, 49900, 'INR', 49900, 'double payment', 'shop')
"""
"""An intent as an earlier release wrote it, naming less than ``request`` now asks for."""
UNSENDABLE = {
    # neither its mihpayid nor its txnid: a txnid is never sent as a mihpayid
    "payu: neither mihpayid nor txnid": (Provider.PAYU, PAYMENT[Provider.PAYU], None, "mihpayid"),
    # (a txnid PayU's API knows no payment of names enough: an error, asked again, below)
    # Cashfree refunds under the order
    "cashfree: no order": (Provider.CASHFREE, PAYMENT[Provider.CASHFREE], None, "order"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(UNSENDABLE))
def test_an_intent_payhooks_will_not_send_is_its_own_refusal_never_the_gateways(
    core, database_url, case
):
    """payhooks closes an intent naming too little for its gateway's refund call ``refused``
    without asking for the refund: counted and summarised as payhooks' refusal, its
    ``last_error`` saying payhooks refused it and the gateway never had it, never "refused by
    the gateway" (the gateway was never asked to refund)."""
    from datetime import UTC, datetime

    from payhooks.operations.alerts import refunds as refund_alerts

    conn, api, url = core
    provider, payment_id, order, words = UNSENDABLE[case]
    paid(api, provider)
    conn.execute(WRITTEN_BEFORE, (provider.value, "ph00000000000000000001", payment_id, order))
    tally = send(database_url, url)
    assert (tally.refused[provider], tally.incomplete[provider]) == (0, 1), tally.summary()
    assert "0 refused by the gateway" in tally.summary()
    assert "1 refused by payhooks, not sent" in tally.summary()
    (refund,) = refunds.of_payment(conn, provider, payment_id)
    assert refund.state is RefundState.REFUSED and refund.gateway_refund_id is None
    said = refund.last_error or ""
    assert said.startswith("refused by payhooks, never sent to the gateway: ") and words in said
    assert books(api, provider) == (0, 0) and sum(api.money.made.values()) == 0
    assert send(database_url, url).incomplete[provider] == 0  # closed: never sent afterwards
    [alert] = refund_alerts(conn, datetime.now(UTC))
    assert f"1 refused by payhooks in the last day, never sent to {provider.value}" in alert.body
    assert "refused or failed at" not in alert.body


# --- a txnid or mihpayid PayU's API does not know: an error, never payhooks' refusal ---------

NOT_FOUND = {"status": 0, "msg": "0 out of 1 Transactions Fetched Successfully",
             "transaction_details": {ORDER[Provider.PAYU]: {"mihpayid": "Not Found",
                                                            "status": "Not Found"}}}  # fmt: skip
"""``verify_payment``'s answer for a txnid PayU knows no payment of (its docs' sample)."""
UNKNOWN = Fault(body=json.dumps({"status": 0, "msg": "Transaction Not Found"}).encode())
"""``check_payment``'s for a ``mihpayid`` it does not know."""
RECORDED = {"by its txnid": None, "its mihpayid recorded": PAYMENT[Provider.PAYU]}


def ask_by_txnid(conn, attempt_id: str | None):
    txnid = ORDER[Provider.PAYU]
    return refunds.request(conn, Provider.PAYU, txnid, 49_900, key="double-payment",
                           captured_paise=49_900, reason="double payment", requested_by="shop",
                           gateway_order_id=txnid, attempt_id=attempt_id)  # fmt: skip


@pytest.mark.parametrize("recorded", list(RECORDED))
def test_a_txnid_payu_knows_no_payment_of_is_asked_again_never_refused(
    core, database_url, recorded
):
    """PayU's ``verify_payment`` answers ``Not Found`` for the intent's txnid, and
    ``check_payment`` knows no ``mihpayid`` recorded for it. The intent names all PayU's
    refund needs; what is wrong is on payhooks' side of the API (the key and salt of another
    PayU account: test keys for live payments, another brand's), or the payment not yet
    visible. As Razorpay's "does not exist" and Cashfree's ``order_not_found``: an error, asked
    again with PayU's words kept, never refused (by payhooks or PayU), its amount still held;
    the ``refunds_failing`` alert says it is being retried after an error. Once PayU knows the
    payment, the refund is made once. (It was closed ``refused by payhooks``, its amount
    freed, telling the merchant to name more, which would be refused the same way.)"""
    from datetime import UTC, datetime

    from payhooks.operations.alerts import refunds as refund_alerts

    conn, api, url = core
    ask_by_txnid(conn, RECORDED[recorded])
    for _ in range(2):
        tally = send(database_url, url)
        assert (tally.refused[Provider.PAYU], tally.incomplete[Provider.PAYU],
                tally.retried[Provider.PAYU]) == (0, 0, 1), tally.summary()  # fmt: skip
        (refund,) = refunds.of_payment(conn, Provider.PAYU, ORDER[Provider.PAYU])
        assert refund.state is RefundState.REQUESTED, refund
        assert "names no payment" in (refund.last_error or ""), refund.last_error
        assert not (refund.last_error or "").startswith("refused")
        due_now(conn)
    with pytest.raises(refunds.RefundTooLarge):  # its amount still held
        refunds.request(conn, Provider.PAYU, ORDER[Provider.PAYU], 1, key="another",
                        captured_paise=49_900, reason="more", requested_by="shop",
                        gateway_order_id=ORDER[Provider.PAYU])  # fmt: skip
    [alert] = refund_alerts(conn, datetime.now(UTC))
    assert "1 being retried after an error" in alert.body and "refused" not in alert.title
    assert "refused by payhooks" not in alert.body
    api.pay(_purchase(), PAYMENT[Provider.PAYU])
    assert send(database_url, url).sent[Provider.PAYU] == 1
    settle(conn, database_url, url)
    (refund,) = refunds.of_payment(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert refund.state is RefundState.PROCESSED
    assert books(api, Provider.PAYU) == (1, 49_900)


@pytest.mark.parametrize("recorded", list(RECORDED))
def test_a_refund_made_then_its_payment_unknown_to_payu_for_a_while_is_made_once(
    core, database_url, recorded
):
    """PayU made the refund and its answer was lost; asked again, PayU's API knows neither the
    txnid nor the ``mihpayid`` for a while (credentials changed to another account's, say).
    Nothing is sent meanwhile and nothing is closed (closed ``refused by payhooks, never
    sent``, the intent would have freed an amount PayU had refunded, and asking again as it
    said would have refunded twice); once PayU answers again, the refund made under the
    intent's token is found among the payment's actions and recorded, never made again."""
    conn, api, url = core
    api.pay(_purchase(), PAYMENT[Provider.PAYU])
    ask_by_txnid(conn, RECORDED[recorded])
    api.fail_after_acting(Provider.PAYU, Fault(status=503))
    assert send(database_url, url).retried[Provider.PAYU] == 1
    assert books(api, Provider.PAYU) == (1, 49_900)  # made; payhooks never heard
    due_now(conn)
    unknown = [Fault(body=json.dumps(NOT_FOUND).encode())]
    api.fail_next(Provider.PAYU, *([UNKNOWN, *unknown] if RECORDED[recorded] else unknown))
    tally = send(database_url, url)
    assert (tally.incomplete[Provider.PAYU], tally.retried[Provider.PAYU]) == (0, 1), (
        tally.summary()
    )
    [(found, _, _)] = state(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert found == "requested"
    due_now(conn)
    assert send(database_url, url).sent[Provider.PAYU] == 1
    settle(conn, database_url, url)
    [(found, refund_id, attempts)] = state(conn, Provider.PAYU, ORDER[Provider.PAYU])
    assert (found, attempts) == ("processed", 3) and refund_id
    assert books(api, Provider.PAYU) == (1, 49_900)


def _purchase() -> Purchase:
    return Purchase(provider=Provider.PAYU, cart_id="RF-1", reference=ORDER[Provider.PAYU],
                    amount_paise=49_900, items={"TEA": 1})  # fmt: skip


# --- a mihpayid PayU writes as a JSON number a double rounded --------------------------------


def _checked_as_a_double(conn, api) -> Fault:
    """A refund by the txnid naming its recorded mihpayid: the check of that mihpayid answered
    with it rounded."""
    from payhooks.sim.gateways import payu as payu_sim

    api.pay(_purchase(), PAYMENT[Provider.PAYU])
    ask_by_txnid(conn, PAYMENT[Provider.PAYU])
    return payu_sim.checked_as_a_double(api, PAYMENT[Provider.PAYU])


def _queued_as_a_double(conn, api) -> Fault:
    """A refund of a second payment (sent by its mihpayid, asking nothing first), PayU's
    "Refund Request Queued" naming the mihpayid rounded."""
    from payhooks.sim.gateways import payu as payu_sim

    paid(api, Provider.PAYU)
    ask(conn, Provider.PAYU)
    queued = {"status": 1, "msg": "Refund Request Queued", "request_id": "131279998",
              "bank_ref_num": None, "mihpayid": payu_sim.as_a_double(PAYMENT[Provider.PAYU]),
              "error_code": 102}  # fmt: skip
    return Fault(body=json.dumps(queued).encode())


ROUNDED = {"check_payment's answer": _checked_as_a_double,
           "cancel_refund_transaction's answer": _queued_as_a_double}  # fmt: skip


@pytest.mark.parametrize("where", list(ROUNDED))
def test_a_payu_refund_whose_mihpayid_payu_writes_rounded_is_sent_once(core, database_url, where):
    """PayU's docs write one payment's ``mihpayid`` as the string "403993715521889530" in
    ``verify_payment`` and as the JSON number 403993715521889540 in a ``check_payment`` sample:
    a double-precision serializer's rounding (past 2**53). Compared exactly, the answer read as
    one about another payment: the refund was never sent, or its queued answer never taken
    ("answer names another mihpayid", asked again for ever). A number past 2**53 is the id it
    rounds."""
    conn, api, url = core
    api.fail_next(Provider.PAYU, ROUNDED[where](conn, api))
    tally = send(database_url, url)
    assert (tally.sent[Provider.PAYU], tally.retried[Provider.PAYU]) == (1, 0), tally.summary()
    [refund] = conn.execute("SELECT state, attempts FROM payhooks_refunds").fetchall()
    assert refund == ("sent", 1)


# --- Cashfree: only its answer for a refund id it does not know is "no refund" ----------------


def cashfree_error(code: str, message: str = "not found") -> Fault:
    body = f'{{"message":"{message}","code":"{code}","type":"invalid_request_error"}}'
    return Fault(status=404, body=body.encode())


OTHER_404S = {
    "the order unknown": cashfree_error("order_not_found", "order not found"),
    "a route or API version it does not serve": cashfree_error("request_invalid"),
    "the app id unknown": cashfree_error("merchant_not_found", "merchant not found"),
    "no type in the body": Fault(status=404, body=b'{"message":"x","code":"refund_not_found"}'),
    "another body": Fault(status=404, body=b'{"code":"refund_not_found","type":"x"}'),
}


@pytest.mark.parametrize("case", list(OTHER_404S))
def test_a_cashfree_404_about_anything_but_the_refund_is_no_answer_after_a_lost_one(
    core, database_url, case
):
    """Cashfree made the refund and its answer was lost; asked again, Cashfree answers a 404 in
    its error shape that is not its answer for a refund id it does not know. That is no "none
    made" (it was read so: the refund posted again, and recorded refused when the post and
    the lookup after it answered the same): the refund stays unknown, is asked again, and is
    found made."""
    conn, api, url = core
    provider = Provider.CASHFREE
    first_call_lost(conn, api, database_url, url, Fault(status=503), acted=True)
    api.fail_next(provider, *(OTHER_404S[case],) * 3)  # as many calls as a pass used to make
    for _ in range(3):  # one call a pass now: asked again while Cashfree answers so
        asked_again(conn, database_url, url, provider)
    assert send(database_url, url).sent[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


# --- Cashfree: a refund under the intent's refund_id is never refused ------------------------


def first_call_lost(
    conn, api, database_url: str, url: str, fault: Fault, *, acted: bool, lagging: bool = False
) -> None:
    """Cashfree's answer to the first call is ``fault``, after it made the refund (``acted``)
    or before; its lookup shows a refund made only once ``lagging`` is off. The intent is
    asked again, and due at once."""
    provider = Provider.CASHFREE
    paid(api, provider)
    ask(conn, provider)
    api.money.lagging = lagging
    (api.fail_after_acting if acted else api.fail_next)(provider, fault)
    assert send(database_url, url).retried[provider] == 1
    due_now(conn)


def lost_after_acting(conn, api, database_url: str, url: str) -> None:
    """Cashfree makes the refund and its answer is lost (a 504 from its edge), while its
    lookup does not show it yet (``money.lagging``)."""
    first_call_lost(conn, api, database_url, url, Fault(status=504), acted=True, lagging=True)


def test_a_cashfree_refund_id_already_exists_is_never_a_refusal(core, database_url):
    """The refund made, its answer lost; the next pass's lookup answers ``refund_not_found``
    (Cashfree's read side lags its write side by seconds) and the post under the same
    ``refund_id`` answers 400 ``refund_id_already_exists``, one of Cashfree's two documented
    answers to a reused id. That answer says the refund exists: the intent stays ``requested``,
    its amount held, is looked up again after its backoff and is found made, once."""
    conn, api, url = core
    provider = Provider.CASHFREE
    api.money.reuse_refused = True
    lost_after_acting(conn, api, database_url, url)
    for _ in range(2):  # however long the lookup lags, and the post says the refund exists
        tally = send(database_url, url)
        assert tally.refused[provider] == 0 and tally.retried[provider] == 1, tally.summary()
        [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
        assert refund.state is RefundState.REQUESTED
        assert "refund_id_already_exists" in (refund.last_error or "")
        due_now(conn)
    with pytest.raises(refunds.RefundTooLarge):  # its amount still held: no second refund
        ask(conn, provider, key="asked again")
    api.money.lagging = False  # Cashfree's read side caught up
    assert send(database_url, url).sent[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


def cashfree_refusal(status: int, code: str, message: str) -> Fault:
    body = {"message": message, "code": code, "type": "invalid_request_error"}
    return Fault(status=status, body=json.dumps(body).encode())


AMOUNT_INVALID = cashfree_refusal(
    400, "refund_amount_invalid", "refund amount is more than the refundable amount"
)


def test_a_cashfree_refusal_right_after_a_lost_answer_waits_for_the_lookup_to_catch_up(
    core, database_url
):
    """The refund made, its answer lost; on the next pass the lookup does not show it yet and
    the post under the same ``refund_id`` is refused (an answer about the refund just made:
    the payment refunded already). That ``refund_not_found`` is not final: the intent stays
    ``requested``, asked again no sooner than Cashfree's lookup catches up, and is found made."""
    conn, api, url = core
    provider = Provider.CASHFREE
    lost_after_acting(conn, api, database_url, url)
    api.fail_next(provider, PASS_THROUGH, AMOUNT_INVALID)  # the lookup, then the post
    tally = send(database_url, url)
    assert tally.refused[provider] == 0 and tally.retried[provider] == 1, tally.summary()
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REQUESTED
    assert "refund_amount_invalid" in (refund.last_error or "")
    assert wait_asked(conn, provider) > 55  # a minute: Cashfree's lag is seconds
    api.money.lagging = False
    due_now(conn)
    assert send(database_url, url).sent[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


def test_a_cashfree_refusal_after_a_lost_answer_stands_once_the_lookup_had_time(core, database_url):
    """The call before was lost without Cashfree acting (a 504 before it), and part of the
    payment is refunded meanwhile in Cashfree's dashboard. The refusal right after the lost
    call is asked again once; refused again with still no refund under the id, it stands:
    ``refused``, Cashfree's words kept, nothing refunded by payhooks."""
    conn, api, url = core
    provider = Provider.CASHFREE
    first_call_lost(conn, api, database_url, url, Fault(status=504), acted=False)
    api.refunded_elsewhere(provider, PAYMENT[provider], 10_000)
    first = send(database_url, url)
    assert first.refused[provider] == 0 and first.retried[provider] == 1, first.summary()
    assert [s for s, _, _ in state(conn, provider)] == ["requested"]
    due_now(conn)
    second = send(database_url, url)
    assert second.refused[provider] == 1, second.summary()
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REFUSED
    assert "refund amount is more than the refundable amount" in (refund.last_error or "")
    assert books(api, provider) == (0, 10_000)  # the dashboard's refund alone


@pytest.mark.parametrize(
    ("reason", "note"),
    [("double payment", "double payment"), ("ok", "ok "), ("x" * 150, "x" * 100)],
    ids=["as asked", "padded to Cashfree's 3 characters", "cut to its 100"],
)
def test_a_cashfree_refund_note_is_the_reason_as_asked(core, database_url, reason, note):
    """``refund_note`` is the intent's reason, within Cashfree's 3 to 100 characters: padded
    only when shorter than 3, never given trailing spaces otherwise."""
    conn, api, url = core
    provider = Provider.CASHFREE
    paid(api, provider)
    refunds.request(conn, provider, PAYMENT[provider], 49_900, key="note", reason=reason,
                    captured_paise=49_900, requested_by="shop",
                    gateway_order_id=ORDER[provider])  # fmt: skip
    assert send(database_url, url).sent[provider] == 1
    [made] = api.money.refunds[(provider, PAYMENT[provider])]
    assert made["refund_note"] == note


def test_a_cashfree_409_refund_not_allowed_is_its_refusal(core, database_url):
    """Cashfree answers 409 ``refund_not_allowed`` to a refund of an order not PAID, more than
    six months old or refunded in full already (here in its dashboard, outside payhooks): its
    documented refusal. Once its lookup shows no refund under the id, the intent is
    ``refused`` with Cashfree's words, its amount free again; it was asked again for ever."""
    conn, api, url = core
    provider = Provider.CASHFREE
    paid(api, provider)
    api.refunded_elsewhere(provider, PAYMENT[provider], 49_900)
    ask(conn, provider, amount=10_000)
    tally = send(database_url, url)
    assert tally.refused[provider] == 1 and tally.retried[provider] == 0, tally.summary()
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REFUSED
    assert refund.last_error == (
        "answered 409 (refund_not_allowed: refund is not allowed for this order)"
    )
    assert books(api, provider) == (0, 49_900)  # the dashboard's refund alone


NOT_ABOUT_THE_REFUND = {
    "its server failed": (400, "api_error", "request_failed", "Request failed, please retry"),
    "a rate limit": (422, "rate_limit_error", "request_failed", "too many requests"),
    "the credentials": (400, "authentication_error", "authentication_failed", "bad keys"),
}


@pytest.mark.parametrize("case", list(NOT_ABOUT_THE_REFUND))
def test_a_cashfree_400_or_422_of_a_type_not_about_the_refund_is_asked_again(
    core, database_url, case
):
    """Cashfree's error ``type`` says whose the error is (``invalid_request_error``,
    ``authentication_error``, ``rate_limit_error``, ``api_error``; docs/providers.md). Only an
    ``invalid_request_error`` is about the refund asked for: a 400 or 422 of any other type
    (Cashfree's server failing, a rate limit, the credentials) was read as its refusal, the
    intent closed ``refused`` at its first attempt and its amount free again, the customer never
    refunded. It is asked again, and sent."""
    conn, api, url = core
    provider = Provider.CASHFREE
    status, kind, code, message = NOT_ABOUT_THE_REFUND[case]
    body = {"message": message, "code": code, "type": kind}
    paid(api, provider)
    ask(conn, provider, amount=10_000)
    api.fail_next(provider, Fault(status=status, body=json.dumps(body).encode()))
    asked_again(conn, database_url, url, provider)
    assert send(database_url, url).sent[provider] == 1
    assert books(api, provider) == (1, 10_000)


@pytest.mark.parametrize(
    ("provider", "words"),
    [
        # The intent names an order Cashfree answers ``order_not_found`` for (credentials of
        # another Cashfree account, an order not yet visible).
        (Provider.CASHFREE, "order_not_found"),
        # Razorpay's 400 "The id provided does not exist" to a refund's post: the payment is
        # unknown to the account the keys name (another account's keys, test keys for a live
        # payment).
        (Provider.RAZORPAY, "does not exist"),
    ],
    ids=["cashfree order_not_found", "razorpay id does not exist"],
)
def test_a_payment_or_order_the_gateway_does_not_know_refuses_no_refund(
    core, database_url, provider, words
):
    """The gateway's word says nothing of the refund: it is asked again, the words kept, never
    recorded refused; once the gateway knows the payment, the refund is made once."""
    conn, api, url = core
    ask(conn, provider)
    tally = send(database_url, url)
    assert tally.refused[provider] == 0 and tally.retried[provider] == 1, tally.summary()
    (refund,) = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REQUESTED and words in (refund.last_error or "")
    paid(api, provider)
    due_now(conn)
    assert send(database_url, url).sent[provider] == 1
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert books(api, provider) == (1, 49_900)


def sent_once(database_url: str, tmp_path, *more: str, **environ: str) -> tuple[Any, list[str]]:
    """``payhooks refunds send --once`` on the app's database: its result, and what it said on
    standard error (the log lines left out)."""
    from tests.invoking import payhooks_command

    args = ("refunds", "send", "--once", "--database-url", database_url, *more)
    done = payhooks_command(database_url, tmp_path, *args, **environ)
    return done, [line for line in done.stderr.splitlines() if not line.startswith("{")]


@pytest.mark.parametrize("registry", ["hooks", "async_hooks"])
@pytest.mark.parametrize("provider", [Provider.CASHFREE, Provider.RAZORPAY])
def test_the_command_with_hooks_hands_each_refund_it_made_to_the_app_once(
    core, database_url, tmp_path, registry, provider
):
    """``payhooks refunds send --hooks``: a refund the gateway says processed reaches the app's
    ``REFUND_PROCESSED`` handler as its refund webhook would, so the app records it even when
    that webhook never comes (Cashfree's payments endpoint shows no refunds: no reconciliation
    pass would tell it either); sent again, or told again, it is a duplicate."""
    from tests.refunds import refund_hooks

    conn, api, url = core
    conn.execute(refund_hooks.REFUNDS)
    paid(api, provider)
    ask(conn, provider)
    target = f"tests.refunds.refund_hooks:{registry}"
    for _ in range(2):
        done, _ = sent_once(database_url, tmp_path, "--hooks", target, **API_KEYS.env(url))
        assert done.exit_code == 0, done.output
    [(state_now, refund_id, _)] = state(conn, provider)
    recorded = conn.execute("SELECT refund_id, payment_id, amount, told FROM merchant_refunds")
    assert (state_now, recorded.fetchall()) == (
        "processed", [(refund_id, PAYMENT[provider], 49_900, 1)])  # fmt: skip
    assert books(api, provider) == (1, 49_900)


@pytest.mark.parametrize("provider", [Provider.CASHFREE, Provider.RAZORPAY])
def test_the_command_with_hooks_that_fail_on_a_refund_says_so_and_hands_it_over_again(
    core, database_url, tmp_path, provider
):
    """The gateway made the refund and the app's handler raised on it: ``--once`` exits 1
    saying a refund is to try again, the intent keeps the handler's error, and once the
    handler is mended the next pass hands the refund over and closes the intent."""
    from tests.refunds import refund_hooks

    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    for _ in range(2):  # sent, then asked about
        failing = ("--hooks", "tests.refunds.refund_hooks:failing")
        done, said = sent_once(database_url, tmp_path, *failing, **API_KEYS.env(url))
        assert done.exit_code == 1, done.output
        assert said[-1].startswith("payhooks: 1 refund(s) to try again"), said
        [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
        assert refund.state is RefundState.SENT, refund
        assert "merchant_refunds is missing" in (refund.last_error or ""), refund.last_error
        due_now(conn)
    conn.execute(refund_hooks.REFUNDS)
    done, _ = sent_once(database_url, tmp_path, "--hooks", "tests.refunds.refund_hooks:hooks",
                        **API_KEYS.env(url))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert [s for s, _, _ in state(conn, provider)] == ["processed"]
    assert conn.execute("SELECT count(*) FROM merchant_refunds").fetchone() == (1,)
    assert books(api, provider) == (1, 49_900)


def test_the_command_names_the_intents_it_cannot_send_for_want_of_credentials(
    core, database_url, tmp_path
):
    """Razorpay's API credentials set and Cashfree's not: ``payhooks refunds send --once``
    sends Razorpay's refund, names the Cashfree intent left waiting and the variables that
    would send it, and exits 1, so a cron running it notices."""
    conn, api, url = core
    for provider in (Provider.RAZORPAY, Provider.CASHFREE):
        paid(api, provider)
        ask(conn, provider)
    only_razorpay = {k: v for k, v in API_KEYS.env(url).items() if "_RAZORPAY_" in k}
    done, said = sent_once(database_url, tmp_path, **only_razorpay)
    assert done.exit_code == 1, done.output
    assert "1 refund(s) sent" in done.stdout
    assert said == [
        "payhooks: Cashfree: 1 refund intent(s) waiting, not sent: its API credentials are "
        "not set (PAYHOOKS_CASHFREE_CLIENT_ID and PAYHOOKS_CASHFREE_API_SECRET)"
    ]
    assert [s for s, _, _ in state(conn, Provider.CASHFREE)] == ["requested"]


def test_the_command_once_exits_1_while_the_gateways_api_fails_and_0_once_it_answers(
    core, database_url, tmp_path
):
    """A cron running ``payhooks refunds send --once`` notices a gateway whose API fails: the
    intent stays asked for, retried later, and the command says so and exits 1."""
    conn, api, url = core
    paid(api, Provider.RAZORPAY)
    ask(conn, Provider.RAZORPAY)
    api.fail_next(Provider.RAZORPAY, Fault(status=500))
    done, said = sent_once(database_url, tmp_path, **API_KEYS.env(url))
    assert done.exit_code == 1, done.output
    assert "1 to try again" in done.stdout
    assert said == [
        "payhooks: 1 refund(s) to try again (razorpay: 1): the gateway's API failed, a step"
        " broke or the app's hooks raised; each is asked again after its backoff (payhooks"
        " refunds list: last_error)"
    ]
    assert [s for s, _, _ in state(conn, Provider.RAZORPAY)] == ["requested"]
    # A pass inside its backoff does not ask again, and still says it waits after an error:
    # a cron landing there saw success while nothing was refunded. (The backoff is 5 s, which
    # a busy machine can outlast between two passes: held out of reach here.)
    conn.execute("UPDATE payhooks_refunds SET next_attempt_at = now() + interval '1 hour'")
    done, said = sent_once(database_url, tmp_path, **API_KEYS.env(url))
    assert done.exit_code == 1, done.output
    assert said == [
        "payhooks: 1 refund(s) waiting to be tried again after an error (razorpay: 1): each is"
        " asked again after its backoff (payhooks refunds list: last_error)"
    ]
    due_now(conn)
    done, _ = sent_once(database_url, tmp_path, **API_KEYS.env(url))
    assert done.exit_code == 0, done.output
    assert [s for s, _, _ in state(conn, Provider.RAZORPAY)] == ["processed"]


def test_a_sent_refund_whose_status_check_failed_fails_only_the_pass_that_asked(
    core, database_url, tmp_path
):
    """The gateway has the refund (PayU queued it); a status check answered 503. That pass
    exits 1; the next ones, hours before the check comes round again (a quarter of the
    intent's age, at most six hours), asked nothing and have nothing to try again: they exited
    1 until then, a cron failing for hours over one answer nothing could make sooner."""
    conn, api, url = core
    paid(api, Provider.PAYU)
    ask(conn, Provider.PAYU)
    done, _ = sent_once(database_url, tmp_path, **API_KEYS.env(url))
    assert done.exit_code == 0, done.output
    assert [s for s, _, _ in state(conn, Provider.PAYU)] == ["sent"]
    conn.execute("UPDATE payhooks_refunds SET sent_at = now() - interval '2 days'")
    due_now(conn)
    api.fail_next(Provider.PAYU, Fault(status=503))
    checked, said = sent_once(database_url, tmp_path, **API_KEYS.env(url))
    assert checked.exit_code == 1 and "1 refund(s) to try again (payu: 1)" in said[0], said
    later, said = sent_once(database_url, tmp_path, **API_KEYS.env(url))
    assert (later.exit_code, said) == (0, []), later.output


def test_a_refund_the_apps_hooks_did_not_take_is_handed_over_again_without_asking(
    core, database_url, tmp_path
):
    """The gateway processed the refund and the app's handler raised on it. A later status
    check the gateway's API failed replaced that error with its own: the intent looked merely
    unsettled, ``--once`` exited 0 for up to six hours while the app had never recorded the
    refund. A processed refund stays processed: the next pass hands it over again without
    asking, and says so until the handler takes it."""
    from tests.refunds import refund_hooks

    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider)
    failing = ("--hooks", "tests.refunds.refund_hooks:failing")
    done, _ = sent_once(database_url, tmp_path, *failing, **API_KEYS.env(url))
    assert done.exit_code == 1, done.output
    conn.execute("UPDATE payhooks_refunds SET sent_at = now() - interval '2 days'")
    due_now(conn)
    api.fail_next(provider, *[Fault(status=503)] * 4)  # the gateway's API, were it asked
    for _ in range(2):
        done, said = sent_once(database_url, tmp_path, *failing, **API_KEYS.env(url))
        assert done.exit_code == 1 and said, done.output
        [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
        assert "merchant_refunds is missing" in (refund.last_error or ""), refund.last_error
    conn.execute(refund_hooks.REFUNDS)
    due_now(conn)
    done, _ = sent_once(database_url, tmp_path, "--hooks", "tests.refunds.refund_hooks:hooks",
                        **API_KEYS.env(url))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert conn.execute("SELECT count(*) FROM merchant_refunds").fetchone() == (1,)
    assert books(api, provider) == (1, 49_900)


def test_the_sender_running_names_the_intents_it_cannot_send_once_not_every_pass(
    core, database_url, tmp_path
):
    """Running (no ``--once``) it says the waiting intents at its first pass, not at each one
    (every 0.2 s here), and keeps sending the gateways it can."""
    import os

    from tests.acceptance.conftest import running, wait_until

    conn, api, url = core
    paid(api, Provider.CASHFREE)
    ask(conn, Provider.CASHFREE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYHOOKS_")}
    env.update({k: v for k, v in API_KEYS.env(url).items() if "_RAZORPAY_" in k})
    args = ["refunds", "send", "--every", "0.2", "--database-url", database_url]
    with running(args, env, tmp_path / "sender.log") as sender:
        wait_until(lambda: "waiting, not sent" in sender.output(), timeout=30, what="the line")
        paid(api, Provider.RAZORPAY)
        ask(conn, Provider.RAZORPAY)
        wait_until(lambda: books(api, Provider.RAZORPAY) == (1, 49_900), timeout=30,
                   what="Razorpay's refund")  # fmt: skip
        assert sender.alive()
    assert sender.popen.returncode == 0
    assert sender.output().count("Cashfree: 1 refund intent(s) waiting, not sent") == 1


@pytest.mark.parametrize(
    ("provider", "field", "another", "said"),
    [(Provider.RAZORPAY, "amount", 10_000, "10000 paise, not the 49900 asked"),
     (Provider.CASHFREE, "refund_amount", 100.00, "10000 paise, not the 49900 asked"),
     (Provider.RAZORPAY, "currency", "USD", "another currency: USD, not INR"),
     (Provider.CASHFREE, "refund_currency", "USD", "another currency: USD, not INR")],
    ids=["razorpay", "cashfree", "razorpay-currency", "cashfree-currency"],
)  # fmt: skip
def test_a_refund_found_after_a_lost_answer_with_another_amount_is_not_taken_as_sent(
    core, database_url, provider, field, another, said
):
    """After a lost answer the sender finds the refund by the intent's key (Razorpay's note,
    Cashfree's refund_id) and read its ids and status alone, as PayU's reader once did: one
    of another amount was taken as this one, and one in another currency still is (its
    amount, 499.00 US dollars, read as 49,900 paise). Neither is: the intent stays
    ``requested``, its error kept, and nothing is sent again."""
    conn, api, url = core
    paid(api, provider)
    ask(conn, provider)
    api.fail_after_acting(provider, Fault(status=503))
    assert send(database_url, url).retried[provider] == 1
    [made] = api.money.refunds[(provider, PAYMENT[provider])]
    made[field] = another
    due_now(conn)
    assert send(database_url, url).retried[provider] == 1
    (refund,) = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert (refund.state, refund.gateway_refund_id) == (RefundState.REQUESTED, None)
    assert said in (refund.last_error or "")
    assert api.money.made[(provider, PAYMENT[provider])] == 1


def lost_dispute(
    conn, provider: Provider, amount: int, *, what: str = "lost", phase: str = "chargeback",
    in_transaction: bool = False,
) -> None:  # fmt: skip
    """The card network gave the customer ``amount`` of the payment back (a chargeback lost),
    reported through payhooks as the gateway reports it (inside the caller's transaction)."""
    from payhooks.intake.hooks import Hooks
    from payhooks.intake.ingest import ingest, ingest_in_transaction
    from payhooks.sim.deliveries import Disputed
    from payhooks.sim.gateways import razorpay as razorpay_sim
    from tests.factories import ADAPTERS, GATEWAY

    lost = Disputed(what=what, dispute_id="disp_rfsend00001", payment_id=PAYMENT[provider],
                    reference=ORDER[provider], amount_paise=amount, respond_by=1_900_000_000,
                    reported_at=1_800_000_000 + len(phase), phase=phase)  # fmt: skip
    delivery = razorpay_sim.dispute_delivery(GATEWAY, lost)
    take = ingest_in_transaction if in_transaction else ingest
    take(conn, ADAPTERS[provider], delivery.body, delivery.headers, Hooks())


def test_an_intent_a_lost_dispute_took_the_money_of_before_its_send_is_never_sent(
    core, database_url
):
    """A refund asked for (the console's button, the double-payment policy), then, before
    the sender ran, a chargeback lost for the same payment: the customer has the money back
    from the card network. The sender refunded it all the same (twice back); it is refused by
    payhooks now, never sent, saying what is left to refund."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider)
    lost_dispute(conn, provider, 49_900)
    tally = send(database_url, url)
    assert tally.sent[provider] == 0 and tally.spent[provider] == 1
    assert books(api, provider) == (0, 0)
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REFUSED and refund.attempts == 0  # never called
    assert refund.last_error.startswith("not sent, the customer has that money back already: ")
    assert "has 0 paise left to refund for it" in refund.last_error
    # The person told is told no refund is owed, never to refund it another way.
    [alert] = [a for a in alerts.refunds(conn, datetime.now(UTC))]
    assert "no refund is owed for them" in alert.body
    assert "refunded another way" not in alert.body


def test_an_intent_a_lost_dispute_took_part_of_is_held_for_a_person_once_it_was_tried(
    core, database_url
):
    """An intent whose first call met an error may have been made at the gateway (the answer
    lost): past the bound now, it is neither sent again nor refused (either could be wrong),
    but held, saying why, for a person (it is alerted as an intent retried after an error)."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider)
    api.fail_next(provider, Fault(status=500))
    assert send(database_url, url).retried[provider] == 1
    lost_dispute(conn, provider, 10_000)
    due_now(conn)
    tally = send(database_url, url)
    assert tally.sent[provider] == 0 and tally.retried[provider] == 1
    assert books(api, provider) == (0, 0)
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.state is RefundState.REQUESTED and "39900 paise" in refund.last_error
    # Held again each pass, never called: its calls are not counted up ("Sent 3 times
    # already" on the console's form, for the one call it made).
    for _ in range(2):
        due_now(conn)
        send(database_url, url)
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.attempts == 1 and books(api, provider) == (0, 0)


def test_a_loss_counted_when_the_intent_was_asked_is_not_counted_again_at_its_send(
    core, database_url
):
    """A payment payhooks keeps no record of (a second payment of a paid order) lost 100.00
    to a chargeback; its refund of the rest, 399.00, was bounded so when asked. The dispute,
    reported again before the send (a new phase, a replay), counted its loss a second time:
    "299.00 left", the refund refused, the customer never paid back."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    lost_dispute(conn, provider, 10_000)
    ask(conn, provider, amount=39_900)
    lost_dispute(conn, provider, 10_000, phase="pre_arbitration", what="opened")
    tally = send(database_url, url)
    assert tally.sent[provider] == 1 and tally.incomplete[provider] == 0
    assert books(api, provider) == (1, 39_900)


def test_an_intent_a_lost_dispute_took_part_of_says_the_rest_is_still_owed(core, database_url):
    """A refund of the whole payment asked, then a chargeback lost for a fifth of it: the
    customer is still owed the rest. It was closed "the customer has that money back already"
    and alerted "no refund is owed", and a person told so gave back nothing more."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider)
    lost_dispute(conn, provider, 10_000)
    assert send(database_url, url).spent[provider] == 1
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert refund.last_error.startswith("not sent, it asks more than is left to refund: ")
    assert refund.last_error.endswith("ask again for the 39900 paise still owed")
    [alert] = alerts.refunds(conn, datetime.now(UTC))
    assert "what is left is still owed: ask again for it" in alert.body
    assert "no refund is owed" not in alert.body
    again = ask(conn, provider, amount=39_900, key="the-rest")
    assert again.amount_paise == 39_900
    assert send(database_url, url).sent[provider] == 1 and books(api, provider) == (1, 39_900)


def two_asked_then_a_chargeback(conn, api) -> refunds.Refund:
    """Two refunds of 200.00 asked of a 499.00 Razorpay payment, then a chargeback lost for
    199.00: 300.00 left, room for one. The one asked first."""
    provider = Provider.RAZORPAY
    paid(api, provider)
    first = ask(conn, provider, amount=20_000, key="first")
    ask(conn, provider, amount=20_000, key="second")
    lost_dispute(conn, provider, 19_900)
    return first


def test_what_a_lost_dispute_leaves_goes_to_the_refund_asked_first(core, database_url):
    """Two refunds asked of one payment, 200.00 and then 200.00, and a chargeback lost for
    199.00 before the sender ran: 300.00 is left. Each intent was weighed against every other
    live one, the later among them: the first asked was refused "asks more than is left" while
    the one asked after it was sent; with four asked, the first ones read "0 paise left ...
    the customer has that money back already" while a refund was still owed. The intent
    asked first goes first; the later one is told what is left after it."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    first = two_asked_then_a_chargeback(conn, api)
    tally = send(database_url, url)
    assert (tally.sent[provider], tally.spent[provider]) == (1, 1)
    assert books(api, provider) == (1, 20_000)
    by_key = {r.idempotency_key: r for r in refunds.of_payment(conn, provider, PAYMENT[provider])}
    assert by_key[first.idempotency_key].state is not RefundState.REFUSED
    [later] = [r for k, r in by_key.items() if k != first.idempotency_key]
    assert later.state is RefundState.REFUSED
    assert later.last_error.startswith("not sent, it asks more than is left to refund: ")
    assert later.last_error.endswith("ask again for the 10000 paise still owed")


def test_a_later_intent_a_call_was_made_for_still_counts_against_the_first(core, database_url):
    """The intent asked first goes first, but not past one asked later whose call may have
    reached the gateway (its answer lost): that refund may be made. Two of 200.00 asked; the
    later one's call met a 5xx; a chargeback lost for 199.00 leaves 300.00. The first may
    take 100.00 at most, not 200.00: it is not sent (a review proved the first version sent
    it, 13,000 back on a 10,000 payment)."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    first = ask(conn, provider, amount=20_000, key="first")
    later = ask(conn, provider, amount=20_000, key="second")
    conn.execute(  # its call made, its answer a 5xx: asked again in a while
        "UPDATE payhooks_refunds SET attempts = 1, next_attempt_at = now() + interval '1 hour',"
        " last_error = 'HTTP 502' WHERE idempotency_key = %s",
        (later.idempotency_key,),
    )
    lost_dispute(conn, provider, 19_900)
    tally = send(database_url, url)
    assert (tally.sent[provider], tally.spent[provider]) == (0, 1)
    assert books(api, provider) == (0, 0)
    by_key = {r.idempotency_key: r for r in refunds.of_payment(conn, provider, PAYMENT[provider])}
    assert by_key[first.idempotency_key].state is RefundState.REFUSED
    assert by_key[first.idempotency_key].last_error.endswith(
        "ask again for the 10000 paise still owed"
    )


def test_two_senders_leasing_a_payments_two_intents_at_once_send_the_one_that_fits(
    core, database_url
):
    """Two senders each leased one of a payment's two intents (200.00 each) at the same
    instant, after a chargeback lost for 199.00 left 300.00: room for one. Each lease counted
    its intent called for, so each weighed the other against itself and both were refused
    ("not sent"), a refund still owed. Weighing and counting a call are one step, the
    payment's turn taken: the first to weigh is sent, the other told what is left."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    first = two_asked_then_a_chargeback(conn, api)
    held = [refunds.leased(conn, provider, 1)[0] for _ in range(2)]  # two senders, one each
    assert {r.idempotency_key for r in held} == {
        r.idempotency_key for r in refunds.of_payment(conn, provider, PAYMENT[provider])
    }
    tally = sending.Tally()
    connect = connecting(database_url)
    with http_client(PATIENT_S) as http:
        gateway = client(credentials(API_KEYS.env(url))[provider], http)
        for refund in held:
            sending._Acts(None).send(connect, gateway, refund, tally)
    assert (tally.sent[provider], tally.spent[provider]) == (1, 1), tally.summary()
    assert books(api, provider) == (1, 20_000)
    by_key = {r.idempotency_key: r for r in refunds.of_payment(conn, provider, PAYMENT[provider])}
    [refused] = [r for r in by_key.values() if r.state is RefundState.REFUSED]
    assert refused.attempts == 0  # weighed, never called
    assert refused.last_error.endswith("ask again for the 10000 paise still owed")
    assert by_key[first.idempotency_key].state is not RefundState.REFUSED


def test_a_sender_waits_for_the_payments_turn_within_its_lease_and_calls_only_under_it(
    core, database_url
):
    """Weighing an intent waits for the payment's turn, which any transaction touching the
    payment holds to its end (an app's asking for a refund of it, a capture, a dispute's
    report). Its wait was unbounded: the lease ran out meanwhile, the call was counted and
    made all the same, and a cancel landing then freed the amount the call refunded (a review
    proved 45,000 paise sent where 25,000 were meant); and a sender whose lease ran out and
    was another's since called on that other's lease (the second review: 40,000 for 20,000).
    The wait is bounded within the lease; a call is counted only under the sender's own lease
    while it holds, and its hold renewed from then."""
    from datetime import timedelta

    conn, api, _ = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider, amount=10_000)
    [mine] = refunds.leased(conn, provider, 1, hold=timedelta(seconds=2))
    with psycopg.connect(database_url, autocommit=True) as app, app.transaction():
        app.execute("SELECT payhooks_lock_payment(%s, %s)", (provider.value, PAYMENT[provider]))
        with pytest.raises(refunds.PaymentBusy, match="turn or the intent's row"):
            refunds.weighed(conn, mine, timedelta(seconds=2))  # waits half a second at most
    [(attempts,)] = conn.execute("SELECT attempts FROM payhooks_refunds").fetchall()
    assert attempts == 0  # not counted, not called
    conn.execute("UPDATE payhooks_refunds SET leased_until = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second'")  # fmt: skip  # ran out
    ran_out = refunds.weighed(conn, mine, timedelta(seconds=2))
    assert not ran_out.calling and ran_out.refund is not None and ran_out.refund.attempts == 0
    [theirs] = refunds.leased(conn, provider, 1, hold=timedelta(minutes=1))  # another sender
    assert not refunds.weighed(conn, mine, timedelta(minutes=5)).calling  # never on theirs
    counted = refunds.weighed(conn, theirs, timedelta(minutes=5))
    assert counted.calling and counted.refund is not None and counted.refund.attempts == 1
    with pytest.raises(refunds.NotCancellable):  # held for the call: five minutes from now
        refunds.cancel(conn, provider, mine.idempotency_key, reason="r", cancelled_by="asha")


def test_a_sender_whose_lease_ran_out_never_clears_the_hold_of_the_sender_calling_now(
    core, database_url, gateway_api
):
    """Sender A stalled past its lease; sender B leased the intent and called; a chargeback
    left less than it asks. A woke, weighed it short and held it for a person, clearing B's
    hold mid-call: a cancel landed, the rest was asked again and sent, and the customer got
    69,900 back of 49,900 (the third review of this round's change). A sender writes an
    intent only under its own lease."""
    from datetime import timedelta

    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider, amount=20_000)
    [stale] = refunds.leased(conn, provider, 1, hold=timedelta(seconds=2))
    conn.execute("UPDATE payhooks_refunds SET leased_until = now() - interval '1 second',"
                 " next_attempt_at = now() - interval '1 second'")  # fmt: skip  # ran out
    [calling] = refunds.leased(conn, provider, 1, hold=timedelta(minutes=1))
    assert refunds.weighed(conn, calling, timedelta(minutes=5)).calling  # B, mid-call now
    lost_dispute(conn, provider, 40_000)
    tally = sending.Tally()
    with http_client(PATIENT_S) as http:
        gateway = client(credentials(API_KEYS.env(url))[provider], http)
        sending._Acts(None).send(connecting(database_url), gateway, stale, tally)
    assert (tally.spent[provider], tally.retried[provider]) == (0, 0), tally.summary()
    [(held_on,)] = conn.execute(
        "SELECT leased_until > now() + interval '4 minutes' FROM payhooks_refunds"
    ).fetchall()
    assert held_on  # B's hold, as B's call renewed it
    with pytest.raises(refunds.NotCancellable):
        refunds.cancel(conn, provider, stale.idempotency_key, reason="r", cancelled_by="asha")
    assert books(api, provider) == (0, 0)


def test_an_intent_read_by_anyone_but_its_sender_is_never_written_over_a_call(core):
    """``refunds.again`` and ``refused`` are public: given an intent as ``of_payment`` reads
    it (no lease of its own), they wrote over a sender's hold mid-call (a cancel could land
    then, or the refund the call made be counted nowhere, the fourth review showed). They
    write it only while no sender holds it."""
    from datetime import timedelta

    conn, api, _ = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider, amount=20_000)
    [leased] = refunds.leased(conn, provider, 1, hold=timedelta(minutes=1))
    assert refunds.weighed(conn, leased, timedelta(minutes=5)).calling  # mid-call now
    [read] = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert not refunds.again(conn, read, timedelta(seconds=5), "someone's tool")
    assert not refunds.refused(conn, read, "someone's tool")
    with pytest.raises(refunds.NotCancellable):
        refunds.cancel(conn, provider, read.idempotency_key, reason="r", cancelled_by="asha")


def test_a_busy_payment_on_the_services_sessions_is_said_busy_not_a_step_that_broke(
    core, database_url
):
    """The reference service's sessions time a statement out at 3 s, before the weighing's
    bound on its wait for the payment's turn: the wait ended a statement cancelled, logged a
    step that broke, with a traceback. The weighing bounds its own statement too."""
    from dataclasses import replace as replaced
    from datetime import timedelta

    from payhooks.service import database
    from payhooks.service.config import Settings

    conn, api, _ = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider, amount=10_000)
    [leased] = refunds.leased(conn, provider, 1)
    settings = replaced(Settings(), statement_timeout_ms=300, lock_timeout_ms=200)
    with (
        database.connect(database_url, settings, database.timeouts(settings)) as session,
        psycopg.connect(database_url, autocommit=True) as app,
        app.transaction(),
    ):
        app.execute("SELECT payhooks_lock_payment(%s, %s)", (provider.value, PAYMENT[provider]))
        with pytest.raises(refunds.PaymentBusy):
            refunds.weighed(session, leased, timedelta(seconds=4))  # a second's wait


@pytest.mark.parametrize("mode", ["session", "transaction"])
def test_the_services_sessions_weigh_read_committed_whatever_the_databases_default(
    core, database_url, mode
):
    """Behind a transaction pooler the service's sessions set their bounds by a query right
    after ``BEGIN``, which takes the snapshot: the weighing's ``SET TRANSACTION ISOLATION
    LEVEL`` after it was refused, on a database whose default is repeatable read, and no
    refund was ever sent. The weighing begins read committed instead."""
    from dataclasses import replace as replaced

    from payhooks.service import database
    from payhooks.service.config import PoolMode, Settings

    conn, api, url = core
    provider = Provider.RAZORPAY
    conn.execute(
        f'ALTER DATABASE "{conn.info.dbname}" SET default_transaction_isolation = '
        "'repeatable read'".encode()
    )
    paid(api, provider)
    ask(conn, provider, amount=20_000)
    settings = replaced(Settings(), database_pool_mode=PoolMode(mode))
    pool = database.open_pool(database_url, settings, deadline=False)
    try:
        pool.wait(10)
        with http_client(PATIENT_S) as http:
            gateway = client(credentials(API_KEYS.env(url))[provider], http)
            tally = sending.send_due(lambda: database.connection(pool), {provider: gateway})
    finally:
        pool.close()
    assert books(api, provider) == (1, 20_000), tally.summary()


def test_an_intent_is_weighed_read_committed_whatever_the_databases_default(core, database_url):
    """Under a default of repeatable read the snapshot of the weighing was taken by the
    statement that waited for the payment's turn: a chargeback lost meanwhile went unseen and
    a refund past what was left was sent. The weighing reads committed."""
    import time

    conn, api, _ = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    ask(conn, provider, amount=40_000)
    [leased] = refunds.leased(conn, provider, 1)
    found: list[refunds.Weighed] = []
    with psycopg.connect(database_url, autocommit=True) as sender:
        sender.execute("SET default_transaction_isolation = 'repeatable read'")
        pid = sender.info.backend_pid
        with conn.transaction():  # the dispute's report, holding the payment's turn
            conn.execute(
                "SELECT payhooks_lock_payment(%s, %s)", (provider.value, PAYMENT[provider])
            )
            weighing = threading.Thread(
                target=lambda: found.append(refunds.weighed(sender, leased))
            )
            weighing.start()
            while not conn.execute(
                "SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted", (pid,)
            ).fetchone():
                time.sleep(0.01)  # until the sender waits for the turn
            lost_dispute(conn, provider, 19_900, in_transaction=True)
        weighing.join(timeout=30)
        [(isolation,)] = sender.execute("SHOW default_transaction_isolation").fetchall()
    [weighed] = found
    assert not weighed.calling and weighed.room.left == 30_000  # the loss seen
    assert isolation == "repeatable read"  # the session's own, as it was


def test_intents_asked_in_one_transaction_go_in_the_order_asked(core, database_url):
    """Two intents asked in one transaction shared its start time, and the tie went to the
    smaller key (a hash): the one asked second could take the room of the first. Each is
    stamped when it is asked now."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    with conn.transaction():
        keys = [f"k{n}" for n in range(12)]  # some hash below "first"'s, some above
        first = ask(conn, provider, amount=30_000, key="first")
        for key in keys:
            ask(conn, provider, amount=1_000, key=key)
    lost_dispute(conn, provider, 10_000)  # 399.00 left: the first, and 9 of the others
    tally = send(database_url, url)
    assert tally.sent[provider] == 10 and books(api, provider) == (10, 39_000)
    by_key = {r.idempotency_key: r for r in refunds.of_payment(conn, provider, PAYMENT[provider])}
    assert by_key[first.idempotency_key].state is not RefundState.REFUSED


def test_an_intent_refused_says_what_no_other_refund_holds(core, database_url):
    """An intent refused for what is left, while one asked after it (never called yet) holds
    part of it: "ask again for the 500 paise still owed", though the later one then took 400
    of them and a new ask for 500 was refused. It says what no other refund holds."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    first = ask(conn, provider, amount=30_000, key="first")
    ask(conn, provider, amount=15_000, key="second")
    lost_dispute(conn, provider, 20_000)  # 299.00 left: the first does not fit, the second does
    tally = send(database_url, url)
    assert (tally.sent[provider], tally.spent[provider]) == (1, 1)
    assert books(api, provider) == (1, 15_000)
    by_key = {r.idempotency_key: r for r in refunds.of_payment(conn, provider, PAYMENT[provider])}
    assert by_key[first.idempotency_key].last_error.endswith(
        "ask again for the 14900 paise still owed"
    )
    again = ask(conn, provider, amount=14_900, key="the-rest")
    assert again.amount_paise == 14_900


POISON = """
CREATE FUNCTION poisoned_refund() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.idempotency_key = '{key}' THEN RAISE EXCEPTION 'this row is poisoned'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER poisoned_refund BEFORE UPDATE ON payhooks_refunds
FOR EACH ROW EXECUTE FUNCTION poisoned_refund();
"""


def test_an_intent_the_database_refuses_to_lease_is_set_aside_and_the_rest_are_sent(
    core, database_url
):
    """An app's trigger refusing the update of one intent (the oldest due) failed the whole
    gateway's turn, on every pass: every later refund of that gateway waited behind it, a
    double payment's among them. The refused intent is set aside for the pass, named; the
    others are sent."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    poisoned = ask(conn, provider, amount=10_000, key="poisoned")
    ask(conn, provider, amount=20_000, key="healthy")
    conn.execute(POISON.format(key=poisoned.idempotency_key))
    tally = send(database_url, url)
    assert tally.sent[provider] == 1 and books(api, provider) == (1, 20_000)
    trouble = tally.trouble() or ""
    assert poisoned.idempotency_key in trouble and "this row is poisoned" in trouble, trouble
    assert "turn failed whole" not in trouble
    again = send(database_url, url)  # the next pass: the same, nothing sent twice
    assert again.sent[provider] == 0 and books(api, provider) == (1, 20_000)
    assert poisoned.idempotency_key in (again.trouble() or "")
    assert "CONTEXT" not in (again.trouble() or "")  # the database's words, its first line


def test_intents_set_aside_take_no_turn_of_the_pass(core, database_url):
    """Each intent set aside took one of the pass's turns (``limit`` a gateway) and stayed
    the oldest due: as many refused as the limit held every other refund back, every pass."""
    conn, api, url = core
    provider = Provider.RAZORPAY
    paid(api, provider)
    refused = [ask(conn, provider, amount=1_000, key=f"frozen-{n}") for n in range(3)]
    ask(conn, provider, amount=20_000, key="healthy")
    conn.execute(POISON.replace("OLD.idempotency_key = '{key}'", "OLD.amount_paise = 1000"))
    tally = send_once(connecting(database_url), credentials(API_KEYS.env(url)),
                      timeout_s=PATIENT_S, limit=2)  # fmt: skip
    assert tally.sent[provider] == 1 and books(api, provider) == (1, 20_000)
    assert sorted(tally.aside) == sorted(r.idempotency_key for r in refused)


def test_a_refund_answer_lacking_its_status_says_so_of_the_refund(core, database_url):
    """Cashfree's refund entity without its refund_status (under HTTP 200): the intent's error
    read "payment refund_status is missing", of a refund."""
    conn, api, url = core
    provider = Provider.CASHFREE
    paid(api, provider)
    made = ask(conn, provider)
    entity = {"refund_id": made.idempotency_key, "order_id": ORDER[provider]}  # no status
    api.fail_next(provider, Fault(body=json.dumps(entity).encode()))
    assert send(database_url, url).retried[provider] == 1
    [refund] = refunds.of_payment(conn, provider, PAYMENT[provider])
    error = refund.last_error or ""
    assert "refund_status is missing or not a string" in error, error
    assert "payment refund_status" not in error

"""PayU's hash does not cover ``mihpayid``: a signed success post resent under another
``mihpayid`` is a second payment of one txnid, or a copy edited by whoever holds it (the
customer's browser shows it). It never reaches a handler as it came: it is recorded under a key
of its own and answered at once, and the confirmation pass asks PayU's ``check_payment`` about
both posts' ``mihpayid``. A real second payment reaches the handler once (the merchant's
double-payment path); an edited copy changes nothing and is refuted. Real PostgreSQL, the
status double over a loopback socket."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import psycopg
import pytest

import payhooks
from payhooks import Applied, EventKind, Hooks, Outcome, ingest
from payhooks.events import Event, Provider
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._reports import KEY_PREFIX, one_of
from payhooks.gateways.payu import status
from payhooks.gateways.payu.status import PayUClient
from payhooks.intake.confirmations import PATIENCE
from payhooks.operations import retention
from payhooks.plumbing.errors import ConfirmationsFull
from payhooks.reconcile.confirming import confirm
from payhooks.reconcile.passes import Tally
from payhooks.reconcile.running import connecting, delivering
from payhooks.service.reconcile.clients import http_client
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateway_api import Fault
from payhooks.sim.gateways import payu as payu_sim
from payhooks.sim.gateways.payu import delivery
from tests.factories import ADAPTERS, GATEWAY
from tests.reconcile.conftest import API_KEYS

TXNID = "ph_second0000001"
FIRST = "403993715521000001"
SECOND = "403993715521000002"
ORDER = Purchase(provider=Provider.PAYU, cart_id="S-1", reference=TXNID, amount_paise=49_900,
                 items={"TEA": 1})  # fmt: skip
AMOUNT = f"{Decimal(ORDER.amount_paise) / 100:.2f}"


def later() -> datetime:
    """A pass the confirmations' patience after the posts came (read when the pass runs: a
    moment fixed when the module was imported is minutes earlier by then in a long run)."""
    return datetime.now(UTC) + PATIENCE + timedelta(minutes=1)


@pytest.fixture
def shop(database_url, gateway_api):
    api, url = gateway_api
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        captured: list[Event] = []
        hooks = Hooks()

        @hooks.on(EventKind.PAYMENT_CAPTURED)
        def paid(conn, event):
            captured.append(event)

        yield conn, api, url, hooks, captured


def post(mihpayid: str, txnid: str = TXNID, **extra: str):
    """A signed success post naming ``mihpayid`` (outside the hash)."""
    signed = delivery(GATEWAY, txnid=txnid, mihpayid=mihpayid, amount=AMOUNT)
    if extra:
        from urllib.parse import parse_qsl, urlencode

        fields = dict(parse_qsl(signed.body.decode()))
        body = urlencode({**fields, **extra}).encode()
        return body, signed.headers
    return signed.body, signed.headers


def sent(conn, hooks, mihpayid: str, **extra: str) -> Outcome:
    body, headers = post(mihpayid, **extra)
    return ingest(conn, ADAPTERS[Provider.PAYU], body, headers, hooks).outcome


def payu_client(url: str) -> PayUClient:
    credentials = ApiCredentials(provider=Provider.PAYU, id=API_KEYS.payu_key,
                                 secret=API_KEYS.payu_salt, base_url=url)  # fmt: skip
    return PayUClient(credentials=credentials, http=http_client(5.0))


PASS_THROUGH = Fault()


def a_pass(database_url, url, hooks, *, at: datetime | None = None) -> Tally:
    client = payu_client(url)
    connect = connecting(database_url)
    moment = at or datetime.now(UTC)
    return confirm(connect, {Provider.PAYU: client}, delivering(connect, hooks), Tally(),
                   now=lambda: moment)  # fmt: skip


def settled(conn, key: str) -> tuple[str, str]:
    return conn.execute(
        "SELECT w.outcome, c.detail FROM processed_webhooks w"
        " JOIN payhooks_confirmations c USING (provider, event_id)"
        " WHERE w.provider = 'payu' AND w.event_id = %s",
        (key,),
    ).fetchone()


def test_a_real_second_payment_reaches_the_handler_once_under_its_own_id(shop, database_url):
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)  # PayU took the txnid twice
    assert sent(conn, hooks, FIRST) is Outcome.PROCESSED
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING  # not `duplicate`, not applied yet
    assert [e.payment_id for e in captured] == [TXNID]
    tally = a_pass(database_url, url, hooks)
    assert tally.confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]  # a second payment: its own id
    second = captured[1]
    assert (second.merchant_ref, second.amount_paise) == (TXNID, 49_900)
    assert second.event_id == f"{KEY_PREFIX}:{SECOND}:success"
    outcome, detail = settled(conn, f"{TXNID}:success:{SECOND}")
    assert outcome == "confirmed" and "a second payment" in detail
    # PayU's retry of the second post, and a later pass: nothing more.
    assert sent(conn, hooks, SECOND) is Outcome.DUPLICATE
    a_pass(database_url, url, hooks)
    assert len(captured) == 2


def test_a_real_second_payment_check_payment_writes_rounded_reaches_the_handler_once(
    shop, database_url
):
    """``check_payment``'s sample writes ``mihpayid`` as a JSON number, 403993715521889540 for
    the payment ``verify_payment`` names "403993715521889530" (a double's rounding). Compared
    exactly, both answers read as about other payments, and the second payment was never
    confirmed: a number past 2**53 is the id it rounds."""
    from payhooks.sim.gateways.payu import checked_as_a_double

    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    api.fail_next(Provider.PAYU, checked_as_a_double(api, SECOND), checked_as_a_double(api, FIRST))
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def test_a_post_resent_under_an_invented_mihpayid_is_refuted_past_the_patience_changing_nothing(
    shop, database_url
):
    """PayU posts only payments it has: a mihpayid its ``check_payment`` still does not know
    once the confirmations' patience has passed is invented."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    sent(conn, hooks, FIRST)
    invented = "403993715521999999"
    assert sent(conn, hooks, invented) is Outcome.CONFIRMING
    tally = a_pass(database_url, url, hooks, at=later())
    assert tally.refuted[Provider.PAYU] == 1
    outcome, detail = settled(conn, f"{TXNID}:success:{invented}")
    assert outcome == "refuted" and detail == f"PayU knows no payment {invented}"
    assert [e.payment_id for e in captured] == [TXNID]


def test_a_second_payment_payu_reports_pending_waits_for_its_word_and_is_applied_once_paid(
    shop, database_url
):
    """``pending`` is a passing state (PayU's status lags the post): no verdict yet, asked
    again, never refuted at once; once PayU says success, the second payment is applied."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND, "pending")
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    tally = a_pass(database_url, url, hooks)
    assert (tally.refuted[Provider.PAYU], tally.confirmed[Provider.PAYU]) == (0, 0)
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    api.pay(ORDER, SECOND)  # PayU's word now: a success
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def unknown_once(api, *before: Fault) -> None:
    """PayU's ``check_payment`` answering "Transaction Not Found" once, after ``before``:
    a payment too new for its API, or a blip."""
    api.fail_next(Provider.PAYU, *before, Fault(body=json.dumps(payu_sim.UNKNOWN_PAYMENT).encode()))


def test_a_second_payment_check_payment_does_not_know_yet_is_applied_once_it_does(
    shop, database_url
):
    """PayU posted a real second payment; its ``check_payment`` did not know it yet. That one
    answer refuted the post for good and the second payment never reached the handler: "not
    found" decides only once it has lasted the confirmations' patience."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    unknown_once(api)
    tally = a_pass(database_url, url, hooks)
    assert (tally.refuted[Provider.PAYU], tally.confirmed[Provider.PAYU]) == (0, 0)
    assert settled(conn, f"{TXNID}:success:{SECOND}") == ("confirming", None)
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def test_a_first_payment_check_payment_does_not_know_yet_loses_no_second_payment(
    shop, database_url
):
    """``check_payment`` knowing the second post's payment and not (yet) the first post's read
    the first post as edited, and settled the second as the payment applied: the second
    payment never reached the handler. Not until that has lasted the patience."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    unknown_once(api, PASS_THROUGH)  # check_payment of SECOND, then of FIRST
    tally = a_pass(database_url, url, hooks)
    assert (tally.refuted[Provider.PAYU], tally.confirmed[Provider.PAYU]) == (0, 0)
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]
    outcome, detail = settled(conn, f"{TXNID}:success:{SECOND}")
    assert outcome == "confirmed" and "a second payment" in detail


def test_the_other_payment_check_payment_does_not_know_yet_is_applied_once_it_does(
    shop, database_url
):
    """Reconciliation applied FIRST; SECOND's post came first (recorded ``ignored``), then
    FIRST's, whose confirmation asks ``check_payment`` about SECOND: not known yet, it was
    read as "not a success at PayU" and SECOND never reached the handler."""
    from payhooks.reconcile.running import run

    conn, api, url, hooks, captured = shop
    payhooks.expect(conn, "payu", TXNID, 49_900, "INR", "S-1")
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    run(database_url, hooks, environ=API_KEYS.env(url), after_s=0)
    sent(conn, hooks, SECOND)
    assert sent(conn, hooks, FIRST) is Outcome.CONFIRMING
    unknown_once(api)
    tally = a_pass(database_url, url, hooks)
    assert (tally.refuted[Provider.PAYU], tally.confirmed[Provider.PAYU]) == (0, 0)
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def test_a_refund_of_the_second_payment_is_booked_to_the_second_payment(shop, database_url):
    """The merchant refunds the duplicate: PayU's refund callback names the txnid, its
    ``check_action_status`` the mihpayid refunded, the second payment's."""
    from payhooks.sim.gateways import payu as payu_sim

    conn, api, url, hooks, _ = shop
    refunded: list[Event] = []

    @hooks.on(EventKind.REFUND_PROCESSED)
    def noted(conn, event):
        refunded.append(event)

    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    sent(conn, hooks, SECOND)
    a_pass(database_url, url, hooks)
    api.refund(ORDER, "136409872", payu_sim.refund_entity(
        mihpayid=SECOND, request_id="136409872", amount=AMOUNT, status="success"))  # fmt: skip
    callback = payu_sim.refund_callback(GATEWAY, txnid=TXNID, mihpayid=SECOND,
                                        request_id="136409872", amount=AMOUNT)  # fmt: skip
    assert ingest(conn, ADAPTERS[Provider.PAYU], callback.body, callback.headers,
                  hooks).outcome is Outcome.CONFIRMING  # fmt: skip
    a_pass(database_url, url, hooks)
    assert [(e.payment_id, e.refund_amount_paise) for e in refunded] == [(SECOND, 49_900)]


def test_resent_posts_beyond_two_open_ones_are_refused_for_now_never_answered_copies(
    shop, database_url
):
    """A customer holding their signed post can resend it under any mihpayid: two resent
    posts of one payment may wait for PayU's word at once. Another is refused for now (503
    ``confirmations_full``, stored nowhere, asking nothing), never answered ``duplicate``:
    it may be PayU's own post of a real second payment, taken when PayU sends it again once
    the invented ones are refuted."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    answers = [sent(conn, hooks, f"40399371552188{n:04d}") for n in range(2)]
    assert answers == [Outcome.CONFIRMING] * 2
    again = sent(conn, hooks, "403993715521880001", field9="the browser's copy")
    assert again is Outcome.DUPLICATE  # its own key waits already: a copy, never refused
    for _ in range(3):
        with pytest.raises(ConfirmationsFull):
            sent(conn, hooks, SECOND)
    waiting = conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone()
    assert waiting == (2,)
    assert a_pass(database_url, url, hooks, at=later()).refuted[Provider.PAYU] == 2
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING  # PayU's post, sent again
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def test_a_real_second_payment_posted_after_its_mihpayid_was_refuted_is_asked_about_again(
    shop, database_url
):
    """A post naming a mihpayid PayU had not given yet was refuted (``PayU knows no payment``,
    past the patience); PayU then gave that id to a real second payment of the txnid, and its
    post, in other bytes, was answered duplicate under the refuted key and never reached a
    handler."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING  # before PayU took it: invented
    assert a_pass(database_url, url, hooks, at=later()).refuted[Provider.PAYU] == 1
    api.pay(ORDER, SECOND)  # the customer paid again, and PayU named it so
    assert sent(conn, hooks, SECOND, field9="real") is Outcome.CONFIRMING
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]
    assert sent(conn, hooks, SECOND, field9="real") is Outcome.DUPLICATE  # PayU's retry of it


def test_a_post_resent_under_another_orders_mihpayid_is_refuted_at_once(shop, database_url):
    conn, api, url, hooks, captured = shop
    other = Purchase(provider=Provider.PAYU, cart_id="S-2", reference="ph_someone_else",
                     amount_paise=49_900, items={"TEA": 1})  # fmt: skip
    api.pay(ORDER, FIRST)
    api.pay(other, SECOND)
    sent(conn, hooks, FIRST)
    sent(conn, hooks, SECOND)
    tally = a_pass(database_url, url, hooks)
    assert tally.refuted[Provider.PAYU] == 1
    outcome, detail = settled(conn, f"{TXNID}:success:{SECOND}")
    assert outcome == "refuted" and "for txnid ph_someone_else" in detail
    assert [e.payment_id for e in captured] == [TXNID]


def test_a_first_post_carrying_an_edited_mihpayid_leaves_one_payment(shop, database_url):
    """The customer's edited copy came first and applied the (real, signed) payment; PayU's own
    post, with the true mihpayid, is that payment, not a second one: once PayU has known
    nothing of the edited mihpayid for the confirmations' patience."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    sent(conn, hooks, "403993715521777777")
    assert sent(conn, hooks, FIRST) is Outcome.CONFIRMING
    tally = a_pass(database_url, url, hooks, at=later())
    assert tally.confirmed[Provider.PAYU] == 1
    outcome, detail = settled(conn, f"{TXNID}:success:{FIRST}")
    assert outcome == "confirmed" and "is the one applied" in detail
    assert [e.payment_id for e in captured] == [TXNID]


def test_a_copy_with_other_bytes_but_the_same_mihpayid_is_a_duplicate_at_once(shop):
    """The same ``mihpayid`` its payment's record names, in other bytes (an unhashed field
    resent otherwise): a copy, answered ``duplicate``. It was recorded ``confirming``, which a
    merchant without PayU's API keys saw wait for ever, every pass exiting 1 and alerting."""
    conn, api, _, hooks, captured = shop
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, FIRST, field9="Transaction is Successful") is Outcome.DUPLICATE
    assert sent(conn, hooks, FIRST, addedon="2026-12-07 10:00:05") is Outcome.DUPLICATE
    assert conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone() == (0,)
    assert api.asked[(Provider.PAYU, FIRST)] == 0 and len(captured) == 1


def mismatches(conn) -> dict[str, int]:
    rows = conn.execute(
        "SELECT event_id, mismatches FROM processed_webhooks WHERE provider = 'payu'"
    )
    return dict(rows.fetchall())


def test_a_second_payments_posts_are_no_copies_of_the_first_posts_key(shop):
    """A post naming another ``mihpayid`` is recorded under a key of its own, and its copies
    under that key: each was also counted a copy with another body of the first post (its
    record's ``mismatches``, which the console and Django's admin show), before it was told
    apart. A copy of the first post in other bytes still counts (Django project check)."""
    conn, _, _, hooks, _ = shop
    sent(conn, hooks, FIRST)
    for _ in range(2):
        assert sent(conn, hooks, SECOND) in (Outcome.CONFIRMING, Outcome.DUPLICATE)
    assert sent(conn, hooks, SECOND, field9="resent otherwise") is Outcome.DUPLICATE
    assert sent(conn, hooks, FIRST, addedon="2026-12-07 10:00:05") is Outcome.DUPLICATE
    second = f"{TXNID}:success:{SECOND}"
    assert mismatches(conn) == {f"{TXNID}:success": 1, second: 1}


def test_an_attempt_posted_again_after_its_refutation_is_no_copy_of_the_attempts_key(
    shop, database_url
):
    """An invented ``mihpayid`` refuted, then posted again in other bytes: recorded under a key
    of its own (``posted_again``), it was also counted a copy with another body of the refuted
    attempt's key."""
    conn, api, url, hooks, _ = shop
    api.pay(ORDER, FIRST)
    sent(conn, hooks, FIRST)
    invented = "403993715521999999"
    assert sent(conn, hooks, invented) is Outcome.CONFIRMING
    assert a_pass(database_url, url, hooks, at=later()).refuted[Provider.PAYU] == 1
    assert sent(conn, hooks, invented, field9="resent") is Outcome.CONFIRMING  # its own key
    assert sent(conn, hooks, invented, field9="resent") is Outcome.DUPLICATE  # its copy
    counted = mismatches(conn)
    assert len(counted) == 3 and set(counted.values()) == {0}, counted


def test_a_copy_no_payments_record_names_is_settled_a_copy_without_asking(shop, database_url):
    """Where no payment's record names the ``mihpayid`` (gone with it), the copy waits for the
    pass, which reads the first post's body and settles it a copy, asking PayU nothing."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    sent(conn, hooks, FIRST)
    conn.execute("DELETE FROM payhooks_payments")  # no record names the attempt
    assert sent(conn, hooks, FIRST, field9="Transaction is Successful") is Outcome.CONFIRMING
    a_pass(database_url, url, hooks)
    outcome, detail = settled(conn, f"{TXNID}:success:{FIRST}")
    assert outcome == "confirmed" and "a copy" in detail
    assert api.asked[(Provider.PAYU, FIRST)] == 0 and len(captured) == 1


def test_a_post_with_no_usable_mihpayid_is_a_copy_as_before(shop):
    conn, _, _, hooks, _ = shop
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, "not-an-id!") is Outcome.DUPLICATE
    assert conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone() == (0,)


def test_a_second_payment_applied_reads_again_as_it_was_stored(shop, database_url):
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    sent(conn, hooks, SECOND)
    a_pass(database_url, url, hooks)
    key = f"{KEY_PREFIX}:{SECOND}:success"
    body = conn.execute(
        "SELECT body FROM processed_webhooks WHERE event_id = %s", (key,)
    ).fetchone()[0]
    again = one_of(status.stored(key, json.loads(bytes(body))), Provider.PAYU, key)
    assert again.event == captured[1]


@pytest.mark.parametrize(
    "answer",
    [{"status": 0, "msg": "Transaction Not Found"},
     {"status": 0, "msg": "no transaction found for this id"}],
)  # fmt: skip
def test_a_mihpayid_payu_does_not_know_is_no_payment(answer):
    assert status.checked("1", json.dumps(answer).encode()).received == ()


def test_any_other_check_payment_refusal_is_an_api_error_not_no_payment():
    from payhooks.gateways._status import CredentialsRefused
    from payhooks.plumbing.errors import GatewayApiError

    with pytest.raises(CredentialsRefused, match="Invalid Hash"):
        status.checked("1", b'{"status": 0, "msg": "Invalid Hash."}')
    with pytest.raises(GatewayApiError, match="refused: Something else"):
        status.checked("1", b'{"status": 0, "msg": "Something else"}')


@pytest.mark.parametrize(
    "posted", [(SECOND, FIRST), (FIRST, SECOND)], ids=["second first", "in order"]
)
def test_a_second_payment_posted_after_reconciliation_reaches_the_handler_once(
    shop, database_url, posted
):
    """Reconciliation runs before either post and applies the payment verify_payment names
    (FIRST) under the txnid; then both posts come, in either order. Each real payment reaches
    the handler once: FIRST as the txnid's, SECOND under its own mihpayid, however the
    confirmation's own delivery compares with reconciliation's."""
    from payhooks.reconcile.running import run

    conn, api, url, hooks, captured = shop
    payhooks.expect(conn, "payu", TXNID, 49_900, "INR", "S-1")
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    run(database_url, hooks, environ=API_KEYS.env(url), after_s=0)
    assert [(e.payment_id, e.event_id) for e in captured] == [
        (TXNID, f"{KEY_PREFIX}:{TXNID}:success")
    ]
    for mihpayid in posted:
        sent(conn, hooks, mihpayid)
    a_pass(database_url, url, hooks)
    a_pass(database_url, url, hooks)
    assert [e.payment_id for e in captured] == [TXNID, SECOND]
    assert captured[1].event_id == f"{KEY_PREFIX}:{SECOND}:success"
    open_ones = conn.execute(
        "SELECT count(*) FROM payhooks_confirmations WHERE verdict IS NULL"
    ).fetchone()[0]
    assert open_ones == 0


@pytest.mark.parametrize(
    "entity",
    [{"mihpayid": SECOND}, {"mihpayid": SECOND, "txnid": TXNID},
     {"mihpayid": SECOND, "status": "success"}, {"mihpayid": SECOND, "status": 1, "txnid": TXNID},
     {"txnid": TXNID, "status": "success", "amt": AMOUNT}],
    ids=["no status nor txnid", "no status", "no txnid", "a status not text", "no mihpayid"],
)  # fmt: skip
def test_a_check_payment_answer_it_cannot_read_refutes_no_second_payment(
    shop, database_url, entity
):
    """An entity with no readable ``status`` or ``txnid`` says nothing of the payment, and one
    with no ``mihpayid`` does not say which payment it is: the second post is asked about
    again, never refuted as "not a success of the txnid", nor confirmed as a second payment
    with nothing to apply."""
    unreadable = {"status": 1, "msg": "Transaction Fetched Successfully",
                  "transaction_details": entity}  # fmt: skip
    _second_post_asked_again_after(shop, database_url, unreadable)


def test_a_check_payment_answer_with_no_mihpayid_for_the_other_payment_loses_none(
    shop, database_url
):
    """Reconciliation applied FIRST; the posts come SECOND first (recorded ``ignored``), then
    FIRST, whose confirmation asks ``check_payment`` about SECOND as the other payment. An
    answer with no ``mihpayid`` does not say which payment it is: asked again, never read as
    "not a success at PayU", so SECOND still reaches the handler as a second payment."""

    from payhooks.reconcile.running import run

    conn, api, url, hooks, captured = shop
    payhooks.expect(conn, "payu", TXNID, 49_900, "INR", "S-1")
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    run(database_url, hooks, environ=API_KEYS.env(url), after_s=0)
    assert [e.attempt_id for e in captured] == [FIRST]
    sent(conn, hooks, SECOND)
    assert sent(conn, hooks, FIRST) is Outcome.CONFIRMING
    nameless = {"txnid": TXNID, "status": "success", "amt": AMOUNT, "mode": "UPI"}
    answer = {"status": 1, "msg": "Transaction Fetched Successfully",
              "transaction_details": nameless}  # fmt: skip
    _asked_again_then_confirmed(shop, database_url, answer)


@pytest.mark.parametrize(
    "refusal",
    [{"status": 0, "msg": "Merchant key not found"}, {"status": 0, "msg": "Merchant not found"}],
)
def test_a_check_payment_refusal_saying_not_found_of_the_merchant_refutes_nothing(
    shop, database_url, refusal
):
    """A ``status: 0`` whose words say "not found" of the merchant or its key is PayU refusing
    the call, not PayU knowing no such payment: the second post is asked about again, never
    refuted as invented."""
    _second_post_asked_again_after(shop, database_url, refusal)


def _second_post_asked_again_after(shop, database_url, answer: dict) -> None:
    """The second post's check_payment answered ``answer`` once: no verdict, an API error;
    asked again, it is confirmed and reaches the hooks after the first."""

    conn, api, _, hooks, _ = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    _asked_again_then_confirmed(shop, database_url, answer)


def _asked_again_then_confirmed(shop, database_url, answer: dict) -> None:
    """The waiting post's check_payment answered ``answer`` once: neither confirmed nor
    refuted, an API error; asked again, it is confirmed and SECOND reaches the hooks after the
    first payment."""
    conn, api, url, hooks, captured = shop
    api.fail_next(Provider.PAYU, Fault(body=json.dumps(answer).encode()))
    tally = a_pass(database_url, url, hooks)
    assert (tally.confirmed[Provider.PAYU], tally.refuted[Provider.PAYU]) == (0, 0)
    assert tally.api_errors[Provider.PAYU] == 1
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def test_a_check_payment_refusal_naming_the_key_is_refused_credentials():
    from payhooks.gateways._status import CredentialsRefused

    with pytest.raises(CredentialsRefused, match="Merchant key not found"):
        status.checked("1", b'{"status": 0, "msg": "Merchant key not found"}')


@pytest.mark.parametrize("later", ["settled", "naming the second payment"])
def test_reconciliations_payment_reported_again_with_another_body_is_a_copy_asking_nothing(
    shop, database_url, later
):
    """Reconciliation's record of the txnid's payment names its ``mihpayid`` (the refund
    goes there). A paid checkout is asked about again for days, and ``verify_payment``'s entry
    changes meanwhile (settled; or naming a second payment of the txnid): under reconciliation's
    key, a body of payhooks' making, that is a copy, never a post naming another attempt to
    ask PayU about. The record keeps the ``mihpayid`` it named first."""
    from payhooks.intake import payments
    from payhooks.reconcile.running import run

    conn, api, url, hooks, captured = shop
    payhooks.expect(conn, "payu", TXNID, 49_900, "INR", "S-1")
    api.pay(ORDER, FIRST)
    run(database_url, hooks, environ=API_KEYS.env(url), after_s=0)
    assert [e.attempt_id for e in captured] == [FIRST]
    if later == "settled":
        api.book(ORDER, {**api.payment_of(Provider.PAYU, FIRST), "Settled_At": "2026-03-05"})
    else:
        api.pay(ORDER, SECOND)
        api.pay(ORDER, FIRST)  # verify_payment now names SECOND
    again = payu_client(url).report(TXNID)  # the checkout's next look, as a pass makes it
    assert [r.event.event_id for r in again.received] == [f"{KEY_PREFIX}:{TXNID}:success"]
    deliver = delivering(connecting(database_url), hooks)
    assert [deliver(r, then=lambda *_: None).outcome for r in again.received] == [Outcome.DUPLICATE]
    key = f"{KEY_PREFIX}:{TXNID}:success"
    assert conn.execute(
        "SELECT mismatches FROM processed_webhooks WHERE provider = 'payu' AND event_id = %s",
        (key,),
    ).fetchone() == (1,)  # asked again, and answered another body
    assert conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (1,)
    assert len(captured) == 1
    found = payments.find(conn, "payu", TXNID)
    assert found is not None and found.attempt_id == FIRST


def purged(conn) -> None:
    """Every record but the second post's past the retention window, then the purge: the
    payment's record (``payhooks_payments``, kept a refund's year) is what is left of the
    first post."""
    conn.execute(
        "UPDATE processed_webhooks SET processed_at = processed_at - interval '20 days'"
        " WHERE event_id NOT LIKE %s",
        (f"%:{SECOND}",),
    )
    assert retention.purge(conn, 15).deleted >= 1


def test_a_second_payment_posted_after_the_first_posts_record_was_purged_is_its_own(
    shop, database_url
):
    """The first post's record is gone, its payment's record kept (its mihpayid): a success
    post naming another mihpayid is another attempt, asked about, never the txnid's payment
    again (a handler would take it as the paid order's copy: the second payment lost)."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    assert sent(conn, hooks, FIRST) is Outcome.PROCESSED
    purged(conn)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    assert [e.payment_id for e in captured] == [TXNID]
    tally = a_pass(database_url, url, hooks)
    assert tally.confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]
    outcome, detail = settled(conn, f"{TXNID}:success:{SECOND}")
    assert outcome == "confirmed" and "a second payment" in detail
    assert sent(conn, hooks, SECOND) is Outcome.DUPLICATE  # PayU's retry of it
    a_pass(database_url, url, hooks)
    assert [e.payment_id for e in captured] == [TXNID, SECOND]


def test_a_second_payment_asked_about_after_the_first_posts_record_was_purged_is_its_own(
    shop, database_url
):
    """Purged while the second post waits for PayU's word: the first post's mihpayid is read
    from its payment's record."""
    conn, api, url, hooks, captured = shop
    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    sent(conn, hooks, FIRST)
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    purged(conn)
    tally = a_pass(database_url, url, hooks)
    assert tally.confirmed[Provider.PAYU] == 1
    assert [e.payment_id for e in captured] == [TXNID, SECOND]
    outcome, detail = settled(conn, f"{TXNID}:success:{SECOND}")
    assert outcome == "confirmed" and "a second payment" in detail


def test_a_confirmed_second_payment_its_handler_ignores_is_said_ignored_not_unapplied(
    shop, database_url
):
    """The guides' handlers answer a second payment of a paid order ``ignored`` (money to give
    back, not an order to pay). The pass's line said "0 payment event(s) applied" as if no
    handler had seen it: it says what the event was recorded."""
    conn, api, url, _, _ = shop
    seen: list[str] = []
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def paid(conn, event):
        seen.append(event.payment_id)
        first = event.payment_id == TXNID
        return Applied(outcome=Outcome.PROCESSED if first else Outcome.IGNORED)

    api.pay(ORDER, FIRST)
    api.pay(ORDER, SECOND)
    assert sent(conn, hooks, FIRST) is Outcome.PROCESSED
    assert sent(conn, hooks, SECOND) is Outcome.CONFIRMING
    tally = a_pass(database_url, url, hooks)
    assert seen == [TXNID, SECOND]
    assert tally.confirmations() == (
        "1 callback(s) confirmed by the API, 0 refuted, 0 payment event(s) applied, "
        "1 recorded ignored"
    )

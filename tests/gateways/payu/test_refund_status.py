"""PayU's refund callbacks take effect only as PayU's ``check_action_status`` confirms them:
the callback is answered at once and recorded ``confirming``; the confirmation pass asks the
status API (its double, over a loopback socket) about the refund by PayU's request id and
hands the refund the API reports to the merchant's handler, once; a forged callback changes
nothing and is refuted. On real PostgreSQL, in a merchant's own database."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

import payhooks
from payhooks import EventKind, Hooks, Outcome, ingest
from payhooks.events import Event, Provider
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._reports import KEY_PREFIX, Report, one_of
from payhooks.gateways._status import CredentialsRefused
from payhooks.gateways.payu import status
from payhooks.gateways.payu.status import PayUClient
from payhooks.intake.confirmations import PATIENCE
from payhooks.plumbing.errors import GatewayApiError
from payhooks.reconcile.confirming import confirm
from payhooks.reconcile.passes import Tally
from payhooks.reconcile.running import connecting, delivering
from payhooks.service.reconcile.clients import http_client
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateway_api import Fault
from payhooks.sim.gateways import payu as payu_sim
from tests.factories import ADAPTERS, GATEWAY
from tests.reconcile.conftest import API_KEYS

DATA = Path(__file__).resolve().parents[2] / "data" / "payu"
TXNID = "ph_refund0000001"
MIHPAYID = "403993715529184406"
REQUEST_ID = "129450317"
ORDER = Purchase(provider=Provider.PAYU, cart_id="R-1", reference=TXNID, amount_paise=49_900,
                 items={"TEA": 1})  # fmt: skip


def client(url: str, salt: str = API_KEYS.payu_salt) -> PayUClient:
    credentials = ApiCredentials(provider=Provider.PAYU, id=API_KEYS.payu_key, secret=salt,
                                 base_url=url)  # fmt: skip
    return PayUClient(credentials=credentials, http=http_client(5.0))


def refunded_at_gateway(
    api, *, amount: str = "499.00", state: str = "success", mihpayid: str = MIHPAYID,
    request_id: str = REQUEST_ID, order: Purchase = ORDER,
) -> None:  # fmt: skip
    """The payment PayU took for ``order``, and a refund of it."""
    api.pay(order, mihpayid)
    entity = payu_sim.refund_entity(mihpayid=mihpayid, request_id=request_id, amount=amount,
                                    status=state)  # fmt: skip
    api.refund(order, request_id, entity)


# --- the client: check_action_status as PayU answers it ----------------------------------------


def test_a_refund_payu_reports_refunded_is_a_refund_of_the_txnid(gateway_api):
    api, url = gateway_api
    refunded_at_gateway(api)
    (found,) = client(url).refund(REQUEST_ID, TXNID).received
    event = found.event
    assert (event.kind, event.refund_id, event.refund_amount_paise) == (
        EventKind.REFUND_PROCESSED, REQUEST_ID, 49_900,
    )  # fmt: skip
    assert (event.payment_id, event.merchant_ref, event.amount_paise) == (TXNID, TXNID, None)
    assert event.event_id == f"{KEY_PREFIX}:{REQUEST_ID}:refund"
    assert api.asked[(Provider.PAYU, REQUEST_ID)] == 1


def test_a_refund_payu_reports_names_the_merchants_token_for_it(gateway_api):
    """``check_action_status`` names the refund's token: for a refund payhooks sent, its
    intent's key, which finds the intent whose answer the sender never heard."""
    api, url = gateway_api
    refunded_at_gateway(api)
    (found,) = client(url).refund(REQUEST_ID, TXNID).received
    assert found.event.refund_key == f"rf{REQUEST_ID}"


@pytest.mark.parametrize(
    ("state", "final", "underway"),
    [("queued", False, True), ("IN PROGRESS", False, True), ("requested", False, True),
     ("failure", True, False), ("reversed", False, False)],
)  # fmt: skip
def test_a_refund_not_refunded_reports_nothing_saying_whether_it_is_final(
    gateway_api, state, final, underway
):
    """``failure`` is final (a callback claiming the refund is contradicted); the states PayU
    documents on the way are the refund on its way (a callback claiming it waits for it); a
    state it may add later is neither (the callback waits no longer than the patience)."""
    api, url = gateway_api
    refunded_at_gateway(api, state=state)
    report = client(url).refund(REQUEST_ID, TXNID)
    assert (report.received, report.skipped) == ((), (f"{REQUEST_ID}:{state}",))
    assert (report.contradicted, report.underway) == (final, underway)


@pytest.mark.parametrize("state", ["queued", "failure"])
def test_a_refund_of_another_order_on_its_way_or_failed_says_nothing_of_this_one(
    gateway_api, state
):
    """The callback's txnid is unsigned and a request id anyone's to copy: a refund of another
    order, queued, kept callbacks under invented txnids waiting as long as it stayed queued,
    filling the gateway's bounded places (docs/security.md); failed, it refuted them saying
    another order's state. Neither says anything of this txnid's refund."""
    api, url = gateway_api
    other = Purchase(provider=Provider.PAYU, cart_id="R-2", reference="ph_someone_else",
                     amount_paise=49_900, items={"TEA": 1})  # fmt: skip
    refunded_at_gateway(api, order=other, mihpayid="403993715529000777", state=state)
    report = client(url).refund(REQUEST_ID, TXNID)
    assert (report.received, report.skipped) == ((), (f"{REQUEST_ID}:{state}",))
    assert (report.contradicted, report.underway) == (False, False)


def test_a_request_id_payu_does_not_know_is_no_refund(gateway_api):
    _, url = gateway_api
    assert client(url).refund("999", TXNID) == Report(unknown=True)


def test_a_real_refund_of_another_order_confirms_nothing_for_this_one(gateway_api):
    """The callback's txnid is unsigned: PayU's answer names the refunded payment, which must
    be a payment of that txnid."""
    api, url = gateway_api
    other = Purchase(provider=Provider.PAYU, cart_id="R-2", reference="ph_someone_else",
                     amount_paise=49_900, items={"TEA": 1})  # fmt: skip
    refunded_at_gateway(api, order=other, mihpayid="403993715529000777")
    report = client(url).refund(REQUEST_ID, TXNID)
    assert report.received == ()
    assert report.skipped == (f"{REQUEST_ID}: a refund of another order than {TXNID}",)


def test_a_wrong_salt_is_a_refusal_not_no_refund(gateway_api):
    _, url = gateway_api
    with pytest.raises(CredentialsRefused, match=r"refused: Invalid Hash\."):
        client(url, "wrong").refund(REQUEST_ID, TXNID)


def sent_refund():
    """A refund payhooks sent, PayU's request id known, as its sender asks about it."""
    from payhooks.gateways._refunds import Refund

    return Refund(
        provider=Provider.PAYU, idempotency_key=f"rf{REQUEST_ID}", payment_id=TXNID,
        gateway_order_id=TXNID, amount_paise=49_900, currency="INR", captured_paise=49_900,
        reason="customer asked", requested_by="shop", attempts=1, attempt_id=MIHPAYID,
        gateway_refund_id=REQUEST_ID,
    )  # fmt: skip


def test_a_wrong_salt_asking_about_a_sent_refund_is_refused_credentials_in_payus_words(
    gateway_api,
):
    """The sender's check read any answer without the request's entry as "no action status
    for request N": PayU's "Invalid Hash." (a wrong salt) was lost, and never counted as the
    credentials refused, as PayU's every other call reads it."""
    api, url = gateway_api
    refunded_at_gateway(api, state="queued")
    with pytest.raises(CredentialsRefused, match=r"refused: Invalid Hash\.$"):
        client(url, "wrong").refund_status(sent_refund())


def test_a_sent_refund_payu_shows_no_action_of_yet_is_asked_about_again_in_payus_words(
    gateway_api,
):
    api, url = gateway_api
    refunded_at_gateway(api, state="queued")
    nothing = Fault(body=(DATA / "check_action_status_not_found.json").read_bytes())
    api.fail_next(Provider.PAYU, nothing)
    with pytest.raises(GatewayApiError, match="No action status found") as raised:
        client(url).refund_status(sent_refund())
    assert not isinstance(raised.value, CredentialsRefused)
    assert client(url).refund_status(sent_refund()).processed is False  # queued, as it is


def test_answers_of_the_documented_shape_read_as_documented():
    (found,) = status.refund_status(
        REQUEST_ID, TXNID, (DATA / "check_action_status_success.json").read_bytes()
    ).received
    assert (found.event.refund_amount_paise, found.event.bank_ref) == (1_800, "531820946713")
    unknown = (DATA / "check_action_status_not_found.json").read_bytes()
    assert status.refund_status(REQUEST_ID, TXNID, unknown) == Report(unknown=True)


def test_a_reported_refund_reads_again_as_it_was_stored(gateway_api):
    api, url = gateway_api
    refunded_at_gateway(api)
    (found,) = client(url).refund(REQUEST_ID, TXNID).received
    again = one_of(status.stored(found.event.event_id, json.loads(found.body)), Provider.PAYU,
                   found.event.event_id)  # fmt: skip
    assert again.event == found.event


# --- a merchant's app: the callback, the pass, the handler ---------------------------------------


@pytest.fixture
def shop(database_url):
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        yield conn


def noting(refunds: list[Event]) -> Hooks:
    hooks = Hooks()

    @hooks.on(EventKind.REFUND_PROCESSED)
    def refunded(conn, event):
        refunds.append(event)

    return hooks


def callback(*, request_id: str = REQUEST_ID, amount: str = "499.00", status: str = "success"):
    return payu_sim.refund_callback(
        GATEWAY, txnid=TXNID, mihpayid=MIHPAYID, request_id=request_id, amount=amount,
        status=status,
    )  # fmt: skip


def received_by(conn, hooks: Hooks, delivery) -> Outcome:
    adapter = ADAPTERS[Provider.PAYU]
    return ingest(conn, adapter, delivery.body, delivery.headers, hooks).outcome


def a_pass(database_url: str, url: str, hooks: Hooks, *, at: datetime | None = None) -> Tally:
    connect = connecting(database_url)
    moment = at or datetime.now(UTC)
    return confirm(connect, {Provider.PAYU: client(url)}, delivering(connect, hooks), Tally(),
                   now=lambda: moment)  # fmt: skip


def outcome(conn, key: str) -> str:
    return conn.execute(
        "SELECT outcome FROM processed_webhooks WHERE provider = 'payu' AND event_id = %s", (key,)
    ).fetchone()[0]


def test_a_refund_callback_is_applied_once_payu_confirms_it(shop, database_url, gateway_api):
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    assert refunds == []  # never handed over as it came
    key = f"{TXNID}:{REQUEST_ID}:refund.success"
    assert outcome(shop, key) == "confirming"
    refunded_at_gateway(api)
    tally = a_pass(database_url, url, hooks)
    assert tally.confirmed[Provider.PAYU] == 1 and outcome(shop, key) == "confirmed"
    (applied,) = refunds  # what the API said, under a key no webhook can take
    assert applied.event_id == f"{KEY_PREFIX}:{REQUEST_ID}:refund"
    assert (applied.merchant_ref, applied.refund_amount_paise) == (TXNID, 49_900)
    # PayU's retry of the callback, and a later pass: nothing applied twice.
    assert received_by(shop, hooks, callback()) is Outcome.DUPLICATE
    a_pass(database_url, url, hooks)
    assert len(refunds) == 1


def test_a_refund_payu_reports_for_another_amount_than_claimed_is_never_applied(
    shop, database_url, gateway_api
):
    """A partial refund of 40.00 made in PayU's dashboard, its callback saying so, and
    ``check_action_status`` answering ``amt`` 499.00: PayU's field table says that ``amt`` is
    the original transaction's amount. The API's figure was applied, the payment recorded
    refunded in full. As the sender reads such an answer (docs/providers.md, "Refunds"), it
    says nothing certain of the refund: unreadable, its figures kept as the callback's error,
    asked again, never applied and never refuted."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    assert received_by(shop, hooks, callback(amount="40.00")) is Outcome.CONFIRMING
    refunded_at_gateway(api, amount="499.00")
    tally = a_pass(database_url, url, hooks)
    assert refunds == [] and tally.unreadable[Provider.PAYU] == 1
    assert outcome(shop, f"{TXNID}:{REQUEST_ID}:refund.success") == "confirming"
    (error,) = shop.execute("SELECT last_error FROM payhooks_confirmations").fetchone()
    assert "49900 paise" in error and "4000" in error, error
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    later = a_pass(database_url, url, hooks, at=datetime.now(UTC) + PATIENCE)
    assert (later.refuted[Provider.PAYU], refunds) == (0, [])


def test_a_refund_payhooks_sent_is_applied_for_its_intents_amount_whatever_a_callback_claimed(
    shop, database_url, gateway_api
):
    """A forged callback naming a real refund's request id with ``amt`` 1.00 (the merchant
    key and the txnid are in every checkout form) took the key PayU's own callback takes:
    PayU's was answered ``duplicate``, the forged one waited for ever with neither figure
    applied, and the app never recorded a refund PayU made. ``check_action_status`` names the
    refund's token, the key of the intent payhooks sent it under: the intent asked 499.00,
    which is the ``amt`` PayU reports, so that figure is the refund's own, and applied."""
    from payhooks.refunding import refunds as intents

    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    asked = intents.request(shop, "payu", TXNID, 49_900, key="customer asked",
                            captured_paise=49_900, reason="returned", requested_by="shop",
                            gateway_order_id=TXNID, attempt_id=MIHPAYID)  # fmt: skip
    api.pay(ORDER, MIHPAYID)
    entity = payu_sim.refund_entity(mihpayid=MIHPAYID, request_id=REQUEST_ID, amount="499.00",
                                    status="success")  # fmt: skip
    api.refund(ORDER, REQUEST_ID, {**entity, "token": asked.idempotency_key})
    assert received_by(shop, hooks, callback(amount="1.00")) is Outcome.CONFIRMING  # forged
    assert received_by(shop, hooks, callback()) is Outcome.DUPLICATE  # PayU's own, its key taken
    tally = a_pass(database_url, url, hooks)
    assert tally.confirmed[Provider.PAYU] == 1, tally.summary()
    (applied,) = refunds
    assert (applied.refund_id, applied.refund_amount_paise) == (REQUEST_ID, 49_900)
    (detail,) = shop.execute("SELECT detail FROM payhooks_confirmations").fetchone()
    assert "1.00" in detail and "499.00" in detail, detail  # both figures, for a person


def test_a_refund_callback_payu_reports_queued_waits_for_it_and_one_it_failed_is_refuted(
    shop, database_url, gateway_api
):
    """A callback claiming a refund done while ``check_action_status`` reports it queued was
    refuted after the 30 minutes' patience; PayU's own callback, days later when the refund
    completes, comes under the same key and was answered ``duplicate``: the refund never
    reached the app. It waits for the refund, however long, and is confirmed then. One PayU
    reports ``failure`` (final) is refuted at once."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api, state="queued")
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    days_on = datetime.now(UTC) + PATIENCE * 100
    tally = a_pass(database_url, url, hooks, at=days_on)
    assert (tally.refuted[Provider.PAYU], refunds) == (0, [])
    assert outcome(shop, f"{TXNID}:{REQUEST_ID}:refund.success") == "confirming"
    refunded_at_gateway(api, state="success")
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks, at=days_on).confirmed[Provider.PAYU] == 1
    assert [e.refund_id for e in refunds] == [REQUEST_ID]
    other = "129450999"
    refunded_at_gateway(api, state="failure", request_id=other)
    assert received_by(shop, hooks, callback(request_id=other)) is Outcome.CONFIRMING
    assert a_pass(database_url, url, hooks).refuted[Provider.PAYU] == 1
    assert outcome(shop, f"{TXNID}:{other}:refund.success") == "refuted"


def test_a_refund_payu_reports_for_the_amount_claimed_is_applied(gateway_api):
    api, url = gateway_api
    refunded_at_gateway(api, amount="40.00")
    (found,) = client(url).refund(REQUEST_ID, TXNID, claimed_paise=4_000).received
    assert found.event.refund_amount_paise == 4_000
    report = client(url).refund(REQUEST_ID, TXNID, claimed_paise=49_900)
    assert report.received == () and len(report.unreadable) == 1


def test_a_forged_refund_callback_changes_nothing_and_is_refuted(shop, database_url, gateway_api):
    """The merchant key is in every checkout form: anyone can write a refund callback. PayU
    calls back once a refund exists, so one its API still does not know once the
    confirmations' patience has passed is refuted."""
    _, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    forged = callback(request_id="777000111")
    assert received_by(shop, hooks, forged) is Outcome.CONFIRMING
    assert a_pass(database_url, url, hooks).refuted[Provider.PAYU] == 0
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    tally = a_pass(database_url, url, hooks, at=datetime.now(UTC) + PATIENCE)
    assert refunds == []
    assert tally.refuted[Provider.PAYU] == 1
    assert outcome(shop, f"{TXNID}:777000111:refund.success") == "refuted"
    detail = shop.execute("SELECT detail FROM payhooks_confirmations").fetchone()[0]
    assert detail == "the status API knows no such refund, 30 minutes after the callback"


def test_a_forged_callback_naming_another_order_leaves_the_real_refund_to_its_own(
    shop, database_url, gateway_api
):
    """A real refund's request id under a forged callback that names another txnid: nothing
    is booked to that order, and PayU's own callback then books it to the right one."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api)
    forged = payu_sim.refund_callback(GATEWAY, txnid="ph_OTHER_ORDER", mihpayid=MIHPAYID,
                                      request_id=REQUEST_ID, amount="499.00")  # fmt: skip
    assert received_by(shop, hooks, forged) is Outcome.CONFIRMING
    shop.execute("UPDATE payhooks_confirmations SET requested_at = now() - interval '1 hour'")
    a_pass(database_url, url, hooks)  # the API never reports that refund for that order
    forged_key = f"ph_OTHER_ORDER:{REQUEST_ID}:refund.success"
    assert refunds == [] and outcome(shop, forged_key) == "refuted"
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING  # PayU's own: its own key
    a_pass(database_url, url, hooks)
    assert [(e.merchant_ref, e.payment_id) for e in refunds] == [(TXNID, TXNID)]


def test_a_failed_refund_callback_is_recorded_and_asks_nothing(shop, gateway_api):
    api, _ = gateway_api
    refunds: list[Event] = []
    assert received_by(shop, noting(refunds), callback(status="failure")) is Outcome.IGNORED
    assert shop.execute("SELECT count(*) FROM payhooks_confirmations").fetchone() == (0,)
    assert api.asked == {}


# --- an API error is never an answer ------------------------------------------------------------

REFUSED_ONCE = b'{"status":0,"msg":"Invalid Hash."}'
"""PayU refusing one call (it answers a rate limit so too), under HTTP 200."""
NOT_FOUND = {"status": 0, "msg": "0 out of 1 Transactions Fetched Successfully",
             "transaction_details": {TXNID: {"mihpayid": status.NOT_FOUND,
                                             "status": status.NOT_FOUND}}}  # fmt: skip
"""``verify_payment``'s answer for a txnid PayU knows no payment of (its docs' sample)."""
NAMING_NO_PAYMENT = {
    "PayU's refusal under 200": Fault(status=200, body=REFUSED_ONCE),
    "a rate limit in PayU's words": Fault(body=b'{"status":0,"msg":"Too many requests"}'),
    "an HTML page from a proxy": Fault(body=b"<html>busy</html>", content_type="text/html"),
    "truncated JSON": Fault(body=b'{"status":1,"msg":"1 out of 1 Transactions Fe'),
    "an entry with no mihpayid": Fault(
        body=b'{"status":1,"transaction_details":{"%s":{"status":"success"}}}' % TXNID.encode()
    ),
    "PayU's Not Found for the txnid": Fault(body=json.dumps(NOT_FOUND).encode()),
}
PASS_THROUGH = Fault()


@pytest.mark.parametrize("answer", list(NAMING_NO_PAYMENT))
def test_a_verify_payment_naming_no_payment_books_no_refund_and_is_asked_again(
    shop, database_url, gateway_api, answer
):
    """The pass asks verify_payment (the order), check_action_status, check_payment, then
    verify_payment for the mihpayid it names: only an entry naming a mihpayid says whether the
    refund is of the txnid's payment or of a second one. That last call refused once, or
    answering ``Not Found`` while check_payment knows the txnid's payment, must not turn the
    refund into a refund of a "second payment" under its permanent key (a payments row of no
    amount and no cart, the real payment left captured)."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api)
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    api.fail_next(
        Provider.PAYU, PASS_THROUGH, PASS_THROUGH, PASS_THROUGH, NAMING_NO_PAYMENT[answer]
    )
    tally = a_pass(database_url, url, hooks)
    assert refunds == [] and tally.api_errors[Provider.PAYU] == 1
    assert outcome(shop, f"{TXNID}:{REQUEST_ID}:refund.success") == "confirming"
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [(e.payment_id, e.refund_id) for e in refunds] == [(TXNID, REQUEST_ID)]


def test_a_check_action_status_refusal_is_no_proof_there_is_no_such_refund(
    shop, database_url, gateway_api
):
    """Only "No action status found" says PayU has no such refund; another word under the
    request id (a refusal, a rate limit) refutes nothing: the callback is asked about again."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api)
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    busy = b'{"status":0,"msg":"Too many requests","transaction_details":{"%s":"Try later"}}'
    api.fail_next(Provider.PAYU, PASS_THROUGH, Fault(body=busy % REQUEST_ID.encode()))
    tally = a_pass(database_url, url, hooks)
    assert tally.refuted[Provider.PAYU] == 0 and tally.api_errors[Provider.PAYU] == 1
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.refund_id for e in refunds] == [REQUEST_ID]


def test_a_refund_payus_api_does_not_show_yet_is_asked_about_again_never_refuted_at_once(
    shop, database_url, gateway_api
):
    """A refund made in PayU's dashboard, its callback come; ``check_action_status`` answers
    "No action status found" once (in PayU's documented shape), the refund not yet visible
    to it. That one answer refuted the callback for good and the refund was never recorded:
    PayU knowing no such refund decides only once it has lasted the confirmations'
    patience, as a refund the API never reports does."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api)
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    not_yet = Fault(body=(DATA / "check_action_status_not_found.json").read_bytes())
    api.fail_next(Provider.PAYU, PASS_THROUGH, not_yet)
    tally = a_pass(database_url, url, hooks)
    assert (tally.refuted[Provider.PAYU], tally.confirmed[Provider.PAYU]) == (0, 0)
    assert outcome(shop, f"{TXNID}:{REQUEST_ID}:refund.success") == "confirming"
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.refund_id for e in refunds] == [REQUEST_ID]


def _nameless_refund() -> tuple[Fault, ...]:
    """check_action_status's entry for the refund, naming no mihpayid (the order's
    verify_payment first)."""
    entity = payu_sim.refund_entity(mihpayid=MIHPAYID, request_id=REQUEST_ID, amount="499.00",
                                    status="success")  # fmt: skip
    del entity["mihpayid"]
    nameless = {"status": 1, "transaction_details": {REQUEST_ID: {REQUEST_ID: entity}}}
    return PASS_THROUGH, Fault(body=json.dumps(nameless).encode())


UNKNOWN_PAYMENT = Fault(body=json.dumps(payu_sim.UNKNOWN_PAYMENT).encode())
WHOSE_UNSAID = {
    "check_action_status naming no mihpayid": _nameless_refund(),
    "check_payment knowing no payment it names": (PASS_THROUGH, PASS_THROUGH, UNKNOWN_PAYMENT),
}


@pytest.mark.parametrize("answer", list(WHOSE_UNSAID))
def test_a_refund_answer_naming_no_payment_is_asked_again_never_refuted(
    shop, database_url, gateway_api, answer
):
    """check_action_status names the refunded payment (``mihpayid``), and check_payment says
    whose it is; an answer without it, or check_payment knowing no payment of that
    ``mihpayid``, cannot say whose refund it is, so it is no "refund of another order": past
    the patience the callback is still asked about, never refuted on it."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api)
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    api.fail_next(Provider.PAYU, *WHOSE_UNSAID[answer])
    shop.execute("UPDATE payhooks_confirmations SET requested_at = now() - interval '1 hour'")
    tally = a_pass(database_url, url, hooks)
    assert tally.refuted[Provider.PAYU] == 0 and tally.api_errors[Provider.PAYU] == 1
    assert outcome(shop, f"{TXNID}:{REQUEST_ID}:refund.success") == "confirming"
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [e.refund_id for e in refunds] == [REQUEST_ID]


# --- a mihpayid PayU writes as a JSON number a double rounded ----------------------------------


def _verified_as_a_double(api) -> Fault:
    """``verify_payment``'s answer for the txnid, its ``mihpayid`` a JSON number rounded."""
    entity = {**api.payment_of(Provider.PAYU, MIHPAYID),
              "mihpayid": payu_sim.as_a_double(MIHPAYID)}  # fmt: skip
    answered = {"status": 1, "msg": "1 out of 1 Transactions Fetched Successfully",
                "transaction_details": {TXNID: entity}}  # fmt: skip
    return Fault(body=json.dumps(answered).encode())


ROUNDED = {  # the pass asks verify_payment, check_action_status, check_payment, verify_payment
    "check_payment's": lambda api: (
        PASS_THROUGH, PASS_THROUGH, payu_sim.checked_as_a_double(api, MIHPAYID)),
    "verify_payment's": lambda api: (
        PASS_THROUGH, PASS_THROUGH, PASS_THROUGH, _verified_as_a_double(api)),
}  # fmt: skip


@pytest.mark.parametrize("answer", list(ROUNDED))
def test_a_refund_whose_mihpayid_an_answer_writes_rounded_is_the_txnids_once(
    shop, database_url, gateway_api, answer
):
    """PayU's ``check_payment`` sample writes the ``mihpayid`` its ``verify_payment`` sample
    names "403993715521889530" as the JSON number 403993715521889540 (a double's rounding).
    Compared exactly, the callback was never confirmed ("check_payment answer names another
    mihpayid"), or its refund booked to a second payment no one made: a number past 2**53 is
    the id it rounds."""
    api, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    refunded_at_gateway(api)
    assert received_by(shop, hooks, callback()) is Outcome.CONFIRMING
    api.fail_next(Provider.PAYU, *ROUNDED[answer](api))
    assert a_pass(database_url, url, hooks).confirmed[Provider.PAYU] == 1
    assert [(e.payment_id, e.refund_id) for e in refunds] == [(TXNID, REQUEST_ID)]


def test_a_retried_refund_whose_payment_payu_lists_nothing_under_a_typod_key_is_sent_once(
    gateway_api,
):
    """PayU's docs print the "nothing found" answer about ``131278422`` keyed ``13127842``: a
    retry's look for a refund already made read that as PayU refusing the call, and the refund
    was never sent. Read by its text, as the refund callbacks' confirmation reads it."""

    from payhooks.gateways._refunds import Refund

    api, url = gateway_api
    api.pay(ORDER, MIHPAYID)
    nothing = (
        b'{"status":0,"msg":"0 out of 1 Transactions Fetched Successfully",'
        b'"transaction_details":{"%s":"No action status found"}}'
    ) % MIHPAYID[:-1].encode()
    api.fail_next(Provider.PAYU, Fault(body=nothing))
    refund = Refund(
        provider=Provider.PAYU, idempotency_key="rf-typo-0001", payment_id=TXNID,
        gateway_order_id=None, amount_paise=10_000, currency="INR", captured_paise=49_900,
        reason="customer asked", requested_by="shop", attempts=2, attempt_id=MIHPAYID,
    )  # fmt: skip
    sent = client(url).send_refund(refund)
    assert sent.gateway_refund_id is not None
    again = client(url).send_refund(dataclasses.replace(refund, attempts=3))
    assert again.gateway_refund_id == sent.gateway_refund_id  # found under its token, not made


INVALID_AMOUNT = Fault(
    body=b'{"status":0,"msg":"Refund FAILURE - Invalid amount","error_code":105}'
)


def test_a_refusal_right_after_a_lost_answer_is_looked_up_again_before_it_stands(gateway_api):
    """An attempt after one whose answer was lost may be refused for the refund that attempt
    made (the payment's amount now taken: 105 "Invalid amount") while ``check_action_status``
    does not list it yet: the refund is made, and its intent was closed ``refused``, its amount
    free for a second refund. As at Cashfree, such a refusal is asked again no sooner than
    ``LOOKUP_LAG_S``; refused again with no refund under the token, it stands. A first
    attempt's refusal stands at once."""
    from payhooks.gateways._refunds import LOOKUP_LAG_S, UNCONFIRMED, Refund, RefundRefused

    api, url = gateway_api
    api.pay(ORDER, MIHPAYID)
    refund = Refund(
        provider=Provider.PAYU, idempotency_key="rf-lag-0001", payment_id=TXNID,
        gateway_order_id=None, amount_paise=10_000, currency="INR", captured_paise=49_900,
        reason="customer asked", requested_by="shop", attempts=2, attempt_id=MIHPAYID,
        last_error="PayU API: timed out",
    )  # fmt: skip
    api.fail_next(Provider.PAYU, Fault(), INVALID_AMOUNT)  # the lookup, then the call
    with pytest.raises(GatewayApiError) as held:
        client(url).send_refund(refund)
    assert not isinstance(held.value, RefundRefused)
    assert held.value.retry_after_s == LOOKUP_LAG_S
    assert held.value.reason.startswith(UNCONFIRMED) and "Invalid amount" in held.value.reason
    again = dataclasses.replace(refund, attempts=3, last_error=held.value.reason)
    api.fail_next(Provider.PAYU, Fault(), INVALID_AMOUNT)
    with pytest.raises(RefundRefused, match="Invalid amount"):
        client(url).send_refund(again)
    api.fail_next(Provider.PAYU, INVALID_AMOUNT)
    with pytest.raises(RefundRefused, match="Invalid amount"):
        client(url).send_refund(dataclasses.replace(refund, attempts=1, last_error=None))

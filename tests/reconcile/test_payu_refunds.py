"""PayU's refund callbacks take effect only as PayU's ``check_action_status`` confirms them:
the callback is answered at once and recorded ``confirming``; the confirmation pass asks the
status API (its double, over a loopback socket) about the refund by PayU's request id and
hands the refund the API reports to the merchant's handler, once; a forged callback changes
nothing and is refuted. On real PostgreSQL, in a merchant's own database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
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
from payhooks.reconcile.confirming import confirm
from payhooks.reconcile.passes import Tally
from payhooks.reconcile.running import connecting, delivering
from payhooks.service.reconcile.clients import http_client
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateways import payu as payu_sim
from tests.factories import ADAPTERS, GATEWAY
from tests.reconcile.conftest import API_KEYS

DATA = Path(__file__).resolve().parents[1] / "data" / "payu"
TXNID = "ph_refund0000001"
MIHPAYID = "403993715521937565"
REQUEST_ID = "131278422"
ORDER = Purchase(provider=Provider.PAYU, cart_id="R-1", reference=TXNID, amount_paise=49_900,
                 items={"TEA": 1})  # fmt: skip


def client(url: str, salt: str = API_KEYS.payu_salt) -> PayUClient:
    credentials = ApiCredentials(provider=Provider.PAYU, id=API_KEYS.payu_key, secret=salt,
                                 base_url=url)  # fmt: skip
    return PayUClient(credentials=credentials, http=http_client(5.0))


def refunded_at_gateway(api, *, amount: str = "499.00", state: str = "success") -> None:
    entity = payu_sim.refund_entity(mihpayid=MIHPAYID, request_id=REQUEST_ID, amount=amount,
                                    status=state)  # fmt: skip
    api.refund(ORDER, REQUEST_ID, entity)


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


@pytest.mark.parametrize("state", ["queued", "IN PROGRESS", "requested", "failure"])
def test_a_refund_not_yet_refunded_reports_nothing(gateway_api, state):
    api, url = gateway_api
    refunded_at_gateway(api, state=state)
    report = client(url).refund(REQUEST_ID, TXNID)
    assert (report.received, report.skipped) == ((), (f"{REQUEST_ID}:{state}",))


def test_a_request_id_payu_does_not_know_is_no_refund(gateway_api):
    _, url = gateway_api
    assert client(url).refund("999", TXNID) == Report()


def test_a_wrong_salt_is_a_refusal_not_no_refund(gateway_api):
    _, url = gateway_api
    with pytest.raises(CredentialsRefused, match=r"refused: Invalid Hash\."):
        client(url, "wrong").refund(REQUEST_ID, TXNID)


def test_the_docs_answers_read_as_documented():
    (found,) = status.refund_status(
        "131278422", TXNID, (DATA / "check_action_status_success.json").read_bytes()
    ).received
    assert (found.event.refund_amount_paise, found.event.bank_ref) == (1_000, "527013524405")
    unknown = (DATA / "check_action_status_not_found.json").read_bytes()
    assert status.refund_status("131278422", TXNID, unknown) == Report()


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
    key = f"{REQUEST_ID}:refund.success"
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


def test_the_amount_payu_reports_wins_over_the_callbacks(shop, database_url, gateway_api):
    api, url = gateway_api
    refunds: list[Event] = []
    received_by(shop, noting(refunds), callback(amount="10.00"))
    refunded_at_gateway(api, amount="499.00")
    a_pass(database_url, url, noting(refunds))
    assert [e.refund_amount_paise for e in refunds] == [49_900]


def test_a_forged_refund_callback_changes_nothing_and_is_refuted(shop, database_url, gateway_api):
    """The merchant key is in every checkout form: anyone can write a refund callback."""
    _, url = gateway_api
    refunds: list[Event] = []
    hooks = noting(refunds)
    forged = callback(request_id="777000111")
    assert received_by(shop, hooks, forged) is Outcome.CONFIRMING
    a_pass(database_url, url, hooks)
    assert outcome(shop, "777000111:refund.success") == "confirming"  # PayU knows none yet
    shop.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    tally = a_pass(database_url, url, hooks, at=datetime.now(UTC) + timedelta(hours=1))
    assert refunds == []
    assert tally.refuted[Provider.PAYU] == 1
    assert outcome(shop, "777000111:refund.success") == "refuted"


def test_a_failed_refund_callback_is_recorded_and_asks_nothing(shop, gateway_api):
    api, _ = gateway_api
    refunds: list[Event] = []
    assert received_by(shop, noting(refunds), callback(status="failure")) is Outcome.IGNORED
    assert shop.execute("SELECT count(*) FROM payhooks_confirmations").fetchone() == (0,)
    assert api.asked == {}

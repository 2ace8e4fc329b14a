"""A refund the gateway reports under an intent's own key (Cashfree's ``refund_id``, the
``payhooks_key`` note Razorpay's refund keeps, PayU's token) is that intent's, whether or not
the sender heard the gateway's answer: the report records it (the gateway's refund id
learnt, processed when it says so and for the intent's amount, else sent, for the sender to
ask about), so a person can no longer cancel it and free its amount for a second refund of
the same money. The sender's answer lost (a 5xx after the gateway refunded), then the
gateway's signed refund webhook, against the refund doubles over a loopback socket, on real
PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import payhooks
from payhooks.events import Provider, storable
from payhooks.gateways import credentials
from payhooks.gateways.payu.status import client as payu_client
from payhooks.plumbing.db import run
from payhooks.reconcile.confirming import confirm
from payhooks.reconcile.passes import Tally
from payhooks.reconcile.running import connecting, delivering
from payhooks.refunding import refunds
from payhooks.refunding.refunds import NotCancellable, RefundState, RefundTooLarge
from payhooks.service.reconcile.clients import http_client
from payhooks.sim.gateway_api import Fault
from payhooks.sim.gateways import cashfree as cashfree_sim
from payhooks.sim.gateways import payu as payu_sim
from payhooks.sim.gateways import simulator
from tests.factories import ADAPTERS, GATEWAY
from tests.racing import while_held
from tests.reconcile.conftest import API_KEYS
from tests.refunds import test_sending as sending_tests
from tests.refunds.test_sending import ORDER, PAYMENT, ask, books, due_now, paid, send, settle

RZ, CF, PAYU = Provider.RAZORPAY, Provider.CASHFREE, Provider.PAYU
WEBHOOKS = [RZ, CF]
"""The gateways whose refund webhook is signed, and applied as it came."""
core = sending_tests.core  # its fixtures
gateway_api = sending_tests.gateway_api
PART = 20_000
"""A part of the 499.00 paid: what is left (299.00) would take a second refund of it."""


def answer_lost(conn, api, database_url: str, url: str, provider: Provider, amount: int = PART):
    """An intent sent, the gateway refunding it, its answer lost (a 503 after acting): the
    intent still ``requested``, naming no refund of the gateway's; and the refund the gateway
    made, as its double keeps it."""
    made = ask(conn, provider, amount=amount)
    api.fail_after_acting(provider, Fault(status=503))
    assert send(database_url, url).retried[provider] == 1
    (found,) = refunds.of_payment(conn, provider, PAYMENT[provider])
    assert (found.state, found.gateway_refund_id) == (RefundState.REQUESTED, None)
    assert books(api, provider) == (1, amount)
    (refund,) = api.money.refunds[(provider, PAYMENT[provider])]
    return made, refund


def signed(provider: Provider, refund: dict[str, Any]):
    """The gateway's signed refund webhook about ``refund``, as its simulator builds it."""
    build = simulator(provider).refund_delivery
    assert build is not None
    return build(GATEWAY, refund)


def webhook(conn, provider: Provider, refund: dict[str, Any]) -> None:
    delivery = signed(provider, refund)
    payhooks.ingest(conn, ADAPTERS[provider], delivery.body, delivery.headers, payhooks.Hooks())


def gateway_id(provider: Provider, refund: dict[str, Any]) -> str:
    return str(refund["cf_refund_id"] if provider is CF else refund["id"])


def cancel(conn, made):
    return refunds.cancel(conn, made.provider, made.idempotency_key, reason="no answer",
                          cancelled_by="asha", not_at_gateway=True)  # fmt: skip  # looked


def intent(conn, provider: Provider) -> refunds.Refund:
    (found,) = (r for r in refunds.of_payment(conn, provider, PAYMENT[provider]) if r.requested_by
                != "gateway")  # fmt: skip
    return found


def reported(conn, provider: Provider) -> list[str | None]:
    """The refunds recorded as the gateway reported them, made outside any intent."""
    found = refunds.of_payment(conn, provider, PAYMENT[provider])
    return [r.gateway_refund_id for r in found if r.requested_by == "gateway"]


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_refund_webhook_naming_the_intents_key_closes_it_and_a_cancel_is_refused(
    core, database_url, provider
):
    """The defect: the webhook closed an intent only by the gateway's refund id, which an
    intent whose answer was lost does not know; it stayed ``requested``, a person cancelled
    it, and its amount was free for a second refund of money already given back."""
    conn, api, url = core
    paid(api, provider)
    made, refund = answer_lost(conn, api, database_url, url, provider)
    webhook(conn, provider, refund)
    found = intent(conn, provider)
    assert (found.state, found.gateway_refund_id) == (
        RefundState.PROCESSED, gateway_id(provider, refund),
    )  # fmt: skip
    assert found.sent_at is not None and found.settled_at is not None
    with pytest.raises(NotCancellable, match="processed"):
        cancel(conn, made)
    with pytest.raises(RefundTooLarge):  # 299.00 left, never 499.00 again
        ask(conn, provider, amount=49_900 - PART + 1, key="second try")
    due_now(conn)
    assert send(database_url, url).sent[provider] == 0
    assert books(api, provider) == (1, PART)


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_webhook_of_a_refund_still_pending_records_it_sent_and_the_sender_closes_it(
    core, database_url, provider
):
    """Cashfree's ``PENDING``, Razorpay's ``refund.created``: the gateway has the refund under
    the intent's key, not yet processed. The intent is ``sent`` under the gateway's id (no
    cancel frees it), and the sender's check closes it once the gateway processed it."""
    conn, api, url = core
    paid(api, provider)
    api.money.pending = True
    made, refund = answer_lost(conn, api, database_url, url, provider)
    webhook(conn, provider, refund)
    found = intent(conn, provider)
    assert (found.state, found.gateway_refund_id, found.settled_at) == (
        RefundState.SENT, gateway_id(provider, refund), None,
    )  # fmt: skip
    with pytest.raises(NotCancellable, match="sent"):
        cancel(conn, made)
    api.settle(provider)
    settle(conn, database_url, url)
    assert intent(conn, provider).state is RefundState.PROCESSED
    assert books(api, provider) == (1, PART)


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_an_intent_cancelled_before_its_webhook_came_is_the_gateways_again(
    core, database_url, provider
):
    """The other order: the person cancelled first (the answer lost, the gateway's dashboard
    not checked), then the webhook says the refund was made under the intent's key. The
    intent is processed and counts again, the person's name and reason kept."""
    conn, api, url = core
    paid(api, provider)
    made, refund = answer_lost(conn, api, database_url, url, provider)
    assert cancel(conn, made).state is RefundState.CANCELLED
    webhook(conn, provider, refund)
    found = intent(conn, provider)
    assert (found.state, found.cancelled_by) == (RefundState.PROCESSED, "asha")
    with pytest.raises(RefundTooLarge):
        ask(conn, provider, amount=49_900 - PART + 1, key="second try")


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_refund_reported_failed_under_a_cancelled_intents_key_leaves_it_cancelled(
    core, database_url, provider
):
    """The person cancelled, then the gateway reports the refund under the intent's key as
    failed (Razorpay's ``refund.failed``, Cashfree's ``CANCELLED``): no money went back, so the
    intent stays cancelled and its amount free; it counted again, refusing a refund of the
    money still refundable, until a sender asked the gateway."""
    conn, api, url = core
    paid(api, provider)
    api.money.pending = True
    made, refund = answer_lost(conn, api, database_url, url, provider)
    assert cancel(conn, made).state is RefundState.CANCELLED
    api.settle(provider, failed=True)
    webhook(conn, provider, refund)
    assert intent(conn, provider).state is RefundState.CANCELLED
    ask(conn, provider, amount=49_900, key="after the failure")  # all of it refundable


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_refund_reported_pending_under_a_cancelled_intents_key_is_the_gateways_again(
    core, database_url, provider
):
    """The person cancelled, then the gateway reports the refund under the intent's key as
    pending (Razorpay's ``refund.created``, Cashfree's ``PENDING``) and processes it later, its
    processed webhook lost. The intent is the gateway's again (``sent``) and the sender's check
    closes it processed: left cancelled, no money counted as gone back, a refund of the whole
    payment was accepted on top of it."""
    from tests.refunds.test_sending import settle

    conn, api, url = core
    paid(api, provider)
    api.money.pending = True
    made, refund = answer_lost(conn, api, database_url, url, provider)
    assert cancel(conn, made).state is RefundState.CANCELLED
    webhook(conn, provider, refund)  # pending, under its key
    assert intent(conn, provider).state is RefundState.SENT
    api.settle(provider)  # processed at the gateway; its webhook never comes
    settle(conn, database_url, url)
    assert intent(conn, provider).state is RefundState.PROCESSED
    with pytest.raises(RefundTooLarge):
        ask(conn, provider, amount=49_900, key="the whole payment")


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_refund_webhook_closing_an_intent_leaves_it_no_earlier_error(
    core, database_url, provider
):
    """A sent intent carrying an earlier pass's words (its processed refund not yet taken by
    the app's hooks, a check the gateway failed) closed by the refund's webhook: processed,
    and ``payhooks refunds list`` no longer shows the words of a trouble that is over."""
    conn, api, url = core
    paid(api, provider)
    api.money.pending = True
    ask(conn, provider, amount=PART)
    send(database_url, url)
    assert intent(conn, provider).state is RefundState.SENT
    conn.execute("UPDATE payhooks_refunds SET last_error = 'not yet taken by the app'")
    api.settle(provider)
    (made,) = api.money.refunds[(provider, PAYMENT[provider])]
    webhook(conn, provider, made)
    found = intent(conn, provider)
    assert (found.state, found.last_error) == (RefundState.PROCESSED, None)


def test_a_cancel_waiting_on_the_webhooks_transaction_is_refused_once_it_commits(
    core, database_url
):
    """The webhook's transaction holds the intent's row (its report applied, not committed)
    while a person cancels: the cancel waits for it, then finds the intent processed."""
    conn, api, url = core
    paid(api, CF)
    made, refund = answer_lost(conn, api, database_url, url, CF)
    delivery = signed(CF, refund)
    event = storable(ADAPTERS[CF].parse(delivery.body, delivery.headers))
    tried: list[BaseException] = []

    def person(other) -> None:
        try:
            cancel(other, made)
        except NotCancellable as exc:
            tried.append(exc)

    while_held(database_url, conn, lambda held: run(held, refunds.closing(event)), person)
    assert [type(e) for e in tried] == [NotCancellable]
    assert intent(conn, CF).state is RefundState.PROCESSED


def test_a_webhook_waiting_on_a_cancels_transaction_records_the_intent_after_it(core, database_url):
    """The other order: the cancel's transaction first; the webhook waits for it, then
    records the intent the gateway's, counted again."""
    conn, api, url = core
    paid(api, CF)
    made, refund = answer_lost(conn, api, database_url, url, CF)
    while_held(database_url, conn, lambda held: cancel(held, made),
               lambda other: webhook(other, CF, refund))  # fmt: skip
    found = intent(conn, CF)
    assert (found.state, found.cancelled_by) == (RefundState.PROCESSED, "asha")


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_refund_reported_under_the_key_for_another_amount_is_sent_never_processed(
    core, database_url, provider
):
    """A report under the intent's key naming another amount says nothing of whether the
    intent's refund was processed, but the gateway has something under its key: ``sent``,
    with what was reported as its error for a person, never processed and never
    cancellable."""
    conn, api, url = core
    paid(api, provider)
    made, refund = answer_lost(conn, api, database_url, url, provider)
    other = {**refund, "refund_amount": 100.0} if provider is CF else {**refund, "amount": 10_000}
    webhook(conn, provider, other)
    found = intent(conn, provider)
    assert (found.state, found.gateway_refund_id, found.settled_at) == (
        RefundState.SENT, gateway_id(provider, refund), None,
    )  # fmt: skip
    assert found.last_error is not None and "10000 paise" in found.last_error
    with pytest.raises(NotCancellable):
        cancel(conn, made)


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_refund_webhook_naming_another_key_closes_no_intent(core, database_url, provider):
    """A refund made in the gateway's dashboard (no key of payhooks', or another one) is
    not the intent's: it stays as it was, for the sender."""
    conn, api, url = core
    paid(api, provider)
    _, refund = answer_lost(conn, api, database_url, url, provider)
    elsewhere = (
        {**refund, "refund_id": "dashboard-refund-1"}
        if provider is CF
        else {**refund, "notes": {"payhooks_key": "ph00000000000000000000"}}
    )
    webhook(conn, provider, elsewhere)
    assert intent(conn, provider).state is RefundState.REQUESTED
    assert reported(conn, provider) == [gateway_id(provider, refund)]  # counted meanwhile
    due_now(conn)
    send(database_url, url)  # found under its key by the sender, as before
    assert intent(conn, provider).state is RefundState.PROCESSED
    assert reported(conn, provider) == []  # the intent's now: one refund, one row
    assert books(api, provider) == (1, PART)


def test_a_payu_refund_its_api_confirms_under_the_intents_token_closes_it(core, database_url):
    """PayU's refund callback is confirmed by ``check_action_status``, whose answer names
    the refund's token: the intent sent under it is closed by the confirmed refund, its
    request id learnt, and no cancel frees its amount."""
    conn, api, url = core
    paid(api, PAYU)
    made, refund = answer_lost(conn, api, database_url, url, PAYU)
    assert refund["token"] == made.idempotency_key
    callback = payu_sim.refund_callback(
        GATEWAY, txnid=ORDER[PAYU], mihpayid=PAYMENT[PAYU], request_id=refund["request_id"],
        amount=refund["amt"], token=made.idempotency_key,
    )  # fmt: skip
    payhooks.ingest(conn, ADAPTERS[PAYU], callback.body, callback.headers, payhooks.Hooks())
    connect = connecting(database_url)
    with http_client(5.0) as http:
        asking = {PAYU: payu_client(credentials(API_KEYS.env(url))[PAYU], http)}
        tally = confirm(connect, asking, delivering(connect, payhooks.Hooks()), Tally(),
                        now=lambda: datetime.now(UTC))  # fmt: skip
    assert tally.confirmed[PAYU] == 1
    found = intent(conn, PAYU)
    assert (found.state, found.gateway_refund_id) == (RefundState.PROCESSED, refund["request_id"])
    with pytest.raises(NotCancellable, match="processed"):
        cancel(conn, made)
    assert books(api, PAYU) == (1, PART)


# --- refunds made outside payhooks --------------------------------------------------------------


def dashboard_refund(provider: Provider, amount: int, refund_id: str) -> dict[str, Any]:
    """A refund the merchant made in the gateway's dashboard (no payhooks key with it)."""
    if provider is CF:
        return {"cf_refund_id": refund_id, "cf_payment_id": PAYMENT[CF], "order_id": ORDER[CF],
                "refund_amount": amount / 100, "refund_currency": "INR", "entity": "Refund",
                "refund_type": "MERCHANT_INITIATED", "refund_status": "SUCCESS"}  # fmt: skip
    return {"id": refund_id, "entity": "refund", "amount": amount, "currency": "INR",
            "payment_id": PAYMENT[RZ], "notes": {}, "status": "processed"}  # fmt: skip


def auto_refunded(conn, amount: int = 49_900) -> None:
    """Cashfree's own ``AUTO_REFUND_STATUS_WEBHOOK`` of the payment (its sample's shape)."""
    refund = {"event": "AUTO-REFUND", "cf_refund_id": 1398207645, "cf_payment_id": PAYMENT[CF],
              "order_id": ORDER[CF], "refund_amount": amount / 100, "refund_currency": "INR",
              "refund_type": "PAYMENT_AUTO_REFUND", "refund_status": "SUCCESS", "refund_arn": None,
              "refund_reason": "Multiple payments were performed against same order."}  # fmt: skip
    delivery = cashfree_sim.auto_refund_delivery(GATEWAY, refund)
    payhooks.ingest(conn, ADAPTERS[CF], delivery.body, delivery.headers, payhooks.Hooks())


def test_cashfrees_auto_refund_of_a_payment_leaves_nothing_of_it_to_refund(core, database_url):
    """The defect: Cashfree's auto-refund of a second payment was answered ``ignored``; the
    merchant then asked payhooks to refund that payment, and Cashfree, refunding by order, gave
    it back out of the first payment's money: 499.00 paid, 499.00 kept, 998.00 refunded."""
    conn, api, _ = core
    paid(api, CF)
    auto_refunded(conn)
    with pytest.raises(RefundTooLarge) as refused:
        ask(conn, CF)
    assert refused.value.refundable == 0
    (reported,) = refunds.of_payment(conn, CF, PAYMENT[CF])
    assert (reported.state, reported.gateway_refund_id, reported.amount_paise) == (
        RefundState.PROCESSED, "1398207645", 49_900,
    )  # fmt: skip
    assert reported.requested_by == "gateway"
    assert books(api, CF) == (0, 0)


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_a_dashboard_refund_counts_against_what_may_still_be_refunded(core, database_url, provider):
    """A refund made in the dashboard, its webhook applied (twice: the gateway's retry under
    another key), is money gone back, once: only the rest may still be refunded."""
    conn, api, _ = core
    paid(api, provider)
    made = dashboard_refund(provider, PART, "1919299" if provider is CF else "rfnd_dash00000001")
    webhook(conn, provider, made)
    webhook(conn, provider, made)
    with pytest.raises(RefundTooLarge) as refused:
        ask(conn, provider, amount=49_900 - PART + 1)
    assert refused.value.refundable == 49_900 - PART
    ask(conn, provider, amount=49_900 - PART, key="the rest")
    assert [r.state for r in refunds.of_payment(conn, provider, PAYMENT[provider])] == [
        RefundState.PROCESSED, RefundState.REQUESTED,
    ]  # fmt: skip


def test_a_refund_reported_before_its_intent_learnt_its_id_is_counted_once(core, database_url):
    """The webhook came before the sender heard the gateway's answer (and named no key): the
    report is recorded on its own, then the intent learns the same refund id. One refund."""
    conn, api, _ = core
    paid(api, RZ)
    made = ask(conn, RZ, amount=PART)
    webhook(conn, RZ, dashboard_refund(RZ, PART, "rfnd_sameref00001"))
    refunds.accepted(conn, made, "rfnd_sameref00001", processed=True)
    ask(conn, RZ, amount=49_900 - PART, key="the rest")
    with pytest.raises(RefundTooLarge):
        ask(conn, RZ, amount=1, key="one more paisa")


class WebhookFirst:
    """The gateway's refund client, the refund's signed webhook applied (committed) after the
    gateway made the refund and before the sender heard that its answer was lost."""

    def __init__(self, inner: Any, conn, api, provider: Provider) -> None:
        self.inner, self.conn, self.api, self.provider = inner, conn, api, provider

    def send_refund(self, refund: refunds.Refund) -> Any:
        try:
            return self.inner.send_refund(refund)
        finally:
            (made,) = self.api.money.refunds[(self.provider, PAYMENT[self.provider])]
            webhook(self.conn, self.provider, made)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.mark.parametrize("provider", WEBHOOKS)
def test_an_intent_its_webhook_closed_while_its_answer_was_lost_is_not_counted_to_retry(
    core, database_url, provider
):
    """The webhook closed the intent ``processed`` while the sender's call was answered 503:
    the pass counted it among those to try again, and ``refunds send --once`` and ``worker
    --once`` exited 1 naming a refund nobody would try again."""
    from payhooks.gateways._status import client as status_client
    from payhooks.refunding.sending import send_due

    conn, api, url = core
    paid(api, provider)
    ask(conn, provider, amount=PART)
    api.fail_after_acting(provider, Fault(status=503))
    found = credentials(API_KEYS.env(url))[provider]
    with http_client(5.0) as http:
        client = WebhookFirst(status_client(found, http), conn, api, provider)
        tally = send_due(connecting(database_url), {provider: client})
    assert intent(conn, provider).state is RefundState.PROCESSED
    assert tally.retried[provider] == 0 and tally.trouble() is None, tally.summary()
    assert books(api, provider) == (1, PART)

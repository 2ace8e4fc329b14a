"""PayU's payment statuses as its status API and its posts write them: in PayU's own letter
case ("Success", as its state table writes it; "SUCCESS") they mean what ``success`` does,
and a status none of PayU's is reported unreadable with its words, never skipped in silence.
Answers in the shape of PayU's samples, on real PostgreSQL and the status API double over a
loopback socket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import payu
from payhooks.gateways.payu import status
from payhooks.plumbing.errors import MalformedPayload
from payhooks.sim.gateway import Delivery
from payhooks.sim.gateways import payu as payu_sim
from tests.factories import ADAPTERS, GATEWAY, KEYS, purchase
from tests.reconcile.conftest import count, orders_of, sim

DATA = Path(__file__).resolve().parents[2] / "data" / "payu"
TXNID = "ph_auth000000001"
MIHPAYID = "403993715531207764"
SAMPLE = json.loads((DATA / "verify_payment_auth.json").read_bytes())
ENTRY = {**SAMPLE["transaction_details"][TXNID], "unmappedstatus": "captured"}


def verified(state: str) -> bytes:
    """``verify_payment``'s answer for the txnid, its entry's ``status`` ``state``."""
    entry = {**ENTRY, "status": state}
    return json.dumps({**SAMPLE, "transaction_details": {TXNID: entry}}).encode()


def checked_as(state: str) -> bytes:
    """``check_payment``'s answer for the payment, its ``status`` ``state``."""
    entity = {**ENTRY, "mihpayid": int(MIHPAYID), "status": state}
    return json.dumps({"status": 1, "msg": "Transaction Fetched Successfully",
                       "transaction_details": entity}).encode()  # fmt: skip


CASES = [
    ("Success", EventKind.PAYMENT_CAPTURED, "success"),
    ("SUCCESS", EventKind.PAYMENT_CAPTURED, "success"),
    ("Failure", EventKind.PAYMENT_FAILED, "failure"),
    ("Pending", EventKind.PAYMENT_PENDING, "pending"),
]


@pytest.mark.parametrize(("state", "kind", "word"), CASES)
def test_verify_payment_reads_payus_status_in_any_case(state, kind, word):
    (found,) = status.payments(TXNID, verified(state)).received
    assert found.event.kind is kind
    assert found.event.event_id == f"reconcile:{TXNID}:{word}"  # one key, whatever the case


@pytest.mark.parametrize(("state", "kind", "word"), CASES)
def test_check_payment_reads_payus_status_in_any_case(state, kind, word):
    (found,) = status.checked(MIHPAYID, checked_as(state)).received
    assert found.event.kind is kind
    assert found.event.event_id == f"reconcile:{MIHPAYID}:{word}"


def test_a_txnid_payu_answers_not_found_in_another_case_is_no_payment_yet():
    entry = {TXNID: {"mihpayid": "NOT FOUND", "status": "NOT FOUND"}}
    body = json.dumps({"status": 0, "msg": "0 out of 1", "transaction_details": entry}).encode()
    assert status.payments(TXNID, body) == status.Report()


@pytest.mark.parametrize("entry", ["Not Found", None])
def test_an_entry_of_the_txnid_asked_that_is_no_object_is_not_called_another_txnid(entry):
    body = json.dumps({"status": 1, "transaction_details": {TXNID: entry}}).encode()
    with pytest.raises(MalformedPayload, match="has no transaction_details"):
        status.payments(TXNID, body)


def test_an_answer_about_another_txnid_says_so_not_that_it_has_no_entries():
    """The operator is pointed at the right trouble: the answer named another txnid."""
    body = json.dumps({**SAMPLE, "transaction_details": {"other-txn": ENTRY}}).encode()
    with pytest.raises(MalformedPayload, match=f"another txnid \\(other-txn\\), not {TXNID}"):
        status.payments(TXNID, body)


def test_an_entry_under_the_txnid_asked_naming_another_inside_is_unreadable_not_skipped():
    """Filed under the txnid asked, an entry whose own ``txnid`` is another was skipped: the
    checkout read "no failure", nothing logged (gateway API check). It is PayU's mix-up, told
    as Razorpay's and Cashfree's payment of another order is."""
    body = json.dumps({**SAMPLE, "transaction_details": {TXNID: {**ENTRY, "txnid": "tx_O"}}})
    report = status.payments(TXNID, body.encode())
    assert report.received == () and report.skipped == ()
    (said,) = report.unreadable
    assert TXNID in said and "names another txnid: tx_O" in said, said


@pytest.mark.parametrize("state", ["settled", "userCancelled", "Sucess"])
def test_a_status_none_of_payus_is_reported_unreadable_with_its_words(state):
    report = status.payments(TXNID, verified(state))
    assert report.received == () and report.skipped == ()
    (said,) = report.unreadable
    assert TXNID in said and repr(state) in said


@pytest.mark.parametrize("state", ["settled", "Sucess"])
def test_check_payment_naming_a_status_none_of_payus_is_unreadable_with_its_words(state):
    with pytest.raises(MalformedPayload, match=repr(state)):
        status.checked(MIHPAYID, checked_as(state))


def test_a_post_in_another_letter_case_is_the_payment_it_names(conn):
    buy = purchase(conn, Provider.PAYU)
    fields = {"key": KEYS.payu_key, "txnid": buy.reference, "amount": "499.00",
              "productinfo": "tea", "firstname": "Asha", "email": "a@example.com",
              "status": "Success", "unmappedstatus": "captured", "mihpayid": MIHPAYID}  # fmt: skip
    fields["hash"] = payu.reverse_hash(fields, KEYS.payu_salt)
    event = ADAPTERS[Provider.PAYU].parse(payu.encode(fields), {})
    assert (event.kind, event.event_id) == (EventKind.PAYMENT_CAPTURED, f"{buy.reference}:success")


def test_a_refund_callback_in_another_letter_case_is_the_refund_it_names():
    callback: Delivery = payu_sim.refund_callback(
        GATEWAY, txnid=TXNID, mihpayid=MIHPAYID, request_id="129450317", amount="499.00",
        status="SUCCESS",
    )  # fmt: skip
    event = ADAPTERS[Provider.PAYU].parse(callback.body, callback.headers)
    assert event.kind is EventKind.REFUND_PROCESSED
    assert event.event_id == f"{TXNID}:129450317:refund.success"


SALES = "SELECT coalesce(sum(-delta), 0) FROM inventory_movements WHERE reason = 'sale'"


def reported_as(conn, rig, status: str):
    """A PayU checkout paid, its status API reporting the payment ``status``, and one
    reconciliation pass: the purchase and what the pass did."""
    buy = purchase(conn, Provider.PAYU)
    rig.api.pay(sim(buy), buy.payment_id)
    entity = rig.api.payment_of(Provider.PAYU, buy.payment_id)
    rig.api.book(sim(buy), {**entity, "status": status})
    return buy, rig.run()


def test_a_payment_payu_reports_success_in_its_own_case_is_ordered(conn, rig):
    """PayU's state table writes ``Success``: read as the success it is, the payment was
    skipped in silence, the checkout asked about with no error until its window closed."""
    buy, tally = reported_as(conn, rig, "Success")
    assert tally.recovered[Provider.PAYU] == 1, tally.summary()
    assert len(orders_of(conn, buy.cart_id)) == 1
    assert count(conn, SALES) == 1


def test_a_payment_in_a_status_none_of_payus_is_kept_as_the_checkouts_error(conn, rig):
    buy, tally = reported_as(conn, rig, "settled")
    assert tally.unreadable[Provider.PAYU] == 1, tally.summary()
    assert orders_of(conn, buy.cart_id) == []
    (error,) = conn.execute("SELECT last_error FROM payhooks_reconcile").fetchone()
    assert "'settled'" in error, error

"""The status API double answers as the real APIs do: the gateways' own SDK clients, pointed
at it over loopback, authenticate, parse its answers and raise their own errors on its faults."""

from __future__ import annotations

import json

import pytest
import razorpay
from cashfree_pg.api_client import Cashfree
from cashfree_pg.exceptions import ApiException
from cashfree_pg.models.payment_entity import PaymentEntity
from cashfree_pg.rest import RESTClientObject

from payhooks.events import Provider
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateway_api import Fault
from tests.reconcile.conftest import API_KEYS

ORDER = Purchase(provider=Provider.RAZORPAY, cart_id="c", reference="order_T3st", amount_paise=
                 34_900, items={})  # fmt: skip


def _rzp(url: str) -> razorpay.Client:
    return razorpay.Client(
        auth=(API_KEYS.razorpay_key_id, API_KEYS.razorpay_key_secret), base_url=url
    )


def test_razorpay_sdk_reads_the_doubles_order_payments(gateway_api):
    api, url = gateway_api
    api.pay(ORDER, "pay_T3st1", "failed")
    api.pay(ORDER, "pay_T3st2")
    found = _rzp(url).order.payments("order_T3st")
    assert found["entity"] == "collection" and found["count"] == 2
    assert [(p["id"], p["status"], p["amount"]) for p in found["items"]] == [
        ("pay_T3st1", "failed", 34_900),
        ("pay_T3st2", "captured", 34_900),
    ]


def test_razorpay_sdk_raises_its_own_errors_on_the_doubles_error_shapes(gateway_api):
    api, url = gateway_api
    with pytest.raises(razorpay.errors.BadRequestError, match="does not exist"):
        _rzp(url).order.payments("order_unknown")
    wrong = razorpay.Client(auth=(API_KEYS.razorpay_key_id, "wrong"), base_url=url)
    with pytest.raises(razorpay.errors.BadRequestError, match="API key provided is invalid"):
        wrong.order.payments("order_T3st")
    api.fail_next(Provider.RAZORPAY, Fault(status=500))
    with pytest.raises(razorpay.errors.ServerError):
        _rzp(url).order.payments("order_T3st")


@pytest.fixture
def cashfree(gateway_api, monkeypatch):
    """The SDK's host is fixed (production or sandbox); its REST client is sent to the double
    instead, everything else (headers, version, parsing) is the SDK's own."""
    api, url = gateway_api
    sandbox = "https://sandbox.cashfree.com/pg"
    request = RESTClientObject.request

    def to_double(self, method, target, *args, **kwargs):
        assert target.startswith(sandbox)
        return request(self, method, url + "/pg" + target[len(sandbox) :], *args, **kwargs)

    monkeypatch.setattr(RESTClientObject, "request", to_double)
    client = Cashfree(
        XEnvironment=Cashfree.SANDBOX,
        XClientId=API_KEYS.cashfree_client_id,
        XClientSecret=API_KEYS.cashfree_api_secret,
    )
    return api, client


CF_ORDER = Purchase(provider=Provider.CASHFREE, cart_id="c", reference="ph_T3st",
                    amount_paise=17_000, items={})  # fmt: skip


def test_cashfree_sdk_reads_the_doubles_order_payments(cashfree):
    api, client = cashfree
    api.pay(CF_ORDER, "5114910972393", "USER_DROPPED")
    api.pay(CF_ORDER, "5114910972394")
    found = client.PGOrderFetchPayments("ph_T3st")
    assert found.status_code == 200
    assert all(isinstance(p, PaymentEntity) for p in found.data)
    assert [(p.cf_payment_id, p.payment_status, p.order_amount) for p in found.data] == [
        ("5114910972393", "USER_DROPPED", 170.0),
        ("5114910972394", "SUCCESS", 170.0),
    ]
    assert '"order_amount":170.00' in str(found.raw_data).replace(" ", "")


def test_cashfree_sdk_reads_the_doubles_order(cashfree):
    api, client = cashfree
    api.expire(CF_ORDER)
    found = client.PGFetchOrder("ph_T3st")
    assert (found.data.order_id, found.data.order_status) == ("ph_T3st", "EXPIRED")


@pytest.mark.parametrize(
    ("fault", "status", "kind"),
    [(Fault(status=429, retry_after_s=7), 429, "rate_limit_error"),
     (Fault(status=500), 500, "api_error")],
)  # fmt: skip
def test_cashfree_sdk_raises_on_the_doubles_faults(cashfree, fault, status, kind):
    api, client = cashfree
    api.open_order(CF_ORDER)
    api.fail_next(Provider.CASHFREE, fault)
    with pytest.raises(ApiException) as raised:
        client.PGOrderFetchPayments("ph_T3st")
    assert raised.value.status == status
    assert json.loads(raised.value.body)["type"] == kind


def test_cashfree_sdk_is_refused_with_a_wrong_secret(gateway_api, cashfree):
    api, _ = cashfree
    wrong = Cashfree(XEnvironment=Cashfree.SANDBOX, XClientId=API_KEYS.cashfree_client_id,
                     XClientSecret="wrong")  # fmt: skip
    api.open_order(CF_ORDER)
    with pytest.raises(ApiException) as raised:
        wrong.PGOrderFetchPayments("ph_T3st")
    assert raised.value.status == 401
    assert json.loads(raised.value.body)["type"] == "authentication_error"


PAYU_ORDER = Purchase(provider=Provider.PAYU, cart_id="c", reference="ph_T3stTxn",
                      amount_paise=84_800, items={})  # fmt: skip


def _payu(url: str, salt: str = API_KEYS.payu_salt):
    """PayU's SDK posts to the URL in its credentials; its own setter points it at the double."""
    from base.payubase import Base
    from payu_websdk import Client

    client = Client(API_KEYS.payu_key, salt, "TEST")
    params = Base().get_params()
    Base().set_params({**params, "apiURL": f"{url}/merchant/postservice.php?form=2"})
    return client


def test_payu_sdk_verify_payment_is_answered_with_its_transaction(gateway_api):
    api, url = gateway_api
    api.pay(PAYU_ORDER, "403993715521889530")
    answer = json.loads(_payu(url).verifyPayment("ph_T3stTxn"))
    assert answer["status"] == 1
    assert answer["msg"] == "1 out of 1 Transactions Fetched Successfully"
    details = answer["transaction_details"]["ph_T3stTxn"]
    assert (details["status"], details["amt"], details["mihpayid"]) == (
        "success",
        "848.00",
        "403993715521889530",
    )


def test_payu_sdk_check_payment_is_answered_with_the_payment_of_that_mihpayid(gateway_api):
    api, url = gateway_api
    api.pay(PAYU_ORDER, "403993715521889530")
    answer = json.loads(_payu(url).checkPayment("403993715521889530"))
    assert (answer["status"], answer["msg"]) == (1, "Transaction Fetched Successfully")
    details = answer["transaction_details"]
    assert (details["txnid"], details["status"], details["amt"]) == ("ph_T3stTxn", "success",
                                                                     "848.00")  # fmt: skip
    unknown = json.loads(_payu(url).checkPayment("403993715521000000"))
    assert unknown["status"] == 0


def test_payu_sdk_hash_with_a_wrong_salt_is_refused(gateway_api):
    api, url = gateway_api
    api.pay(PAYU_ORDER, "403993715521889530")
    answer = json.loads(_payu(url, salt="wrong").verifyPayment("ph_T3stTxn"))
    assert answer == {"status": 0, "msg": "Invalid Hash."}


def test_payu_unknown_txnid_is_not_found(gateway_api):
    _, url = gateway_api
    answer = json.loads(_payu(url).verifyPayment("ph_unknown"))
    assert answer["status"] == 0
    assert answer["transaction_details"]["ph_unknown"]["status"] == "Not Found"

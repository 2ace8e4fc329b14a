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


# --- the refund and capture endpoints, through the same SDKs -----------------------------------


def test_razorpay_sdk_refunds_once_under_its_idempotency_header(gateway_api):
    api, url = gateway_api
    api.pay(ORDER, "pay_T3stRf")
    key = {"headers": {"X-Refund-Idempotency": "ph-sdk-refund-1"}}
    first = _rzp(url).payment.refund("pay_T3stRf", {"amount": 10_000}, **key)
    again = _rzp(url).payment.refund("pay_T3stRf", {"amount": 10_000}, **key)  # a retry
    assert (first["entity"], first["payment_id"], first["amount"]) == ("refund", "pay_T3stRf",
                                                                       10_000)  # fmt: skip
    assert again["id"] == first["id"]
    assert api.money.made[(Provider.RAZORPAY, "pay_T3stRf")] == 1
    fetched = _rzp(url).payment.fetch_refund_id("pay_T3stRf", first["id"])
    assert (fetched["id"], fetched["status"]) == (first["id"], "processed")
    other = {"headers": {"X-Refund-Idempotency": "ph-sdk-refund-1"}}
    with pytest.raises(razorpay.errors.BadRequestError):  # the same key, another body
        _rzp(url).payment.refund("pay_T3stRf", {"amount": 20_000}, **other)
    with pytest.raises(razorpay.errors.BadRequestError, match="greater than amount captured"):
        _rzp(url).payment.refund("pay_T3stRf", {"amount": 30_000},
                                 headers={"X-Refund-Idempotency": "ph-sdk-refund-2"})  # fmt: skip
    assert api.money.refunded[(Provider.RAZORPAY, "pay_T3stRf")] == 10_000


def test_razorpay_sdk_captures_an_authorised_payment_once(gateway_api):
    api, url = gateway_api
    api.pay(ORDER, "pay_T3stAu", "authorized")
    captured = _rzp(url).payment.capture("pay_T3stAu", 34_900, {"currency": "INR"})
    seen = (captured["id"], captured["status"], captured["captured"])
    assert seen == ("pay_T3stAu", "captured", True)
    with pytest.raises(razorpay.errors.BadRequestError, match="already been captured"):
        _rzp(url).payment.capture("pay_T3stAu", 34_900, {"currency": "INR"})
    assert api.money.captured[(Provider.RAZORPAY, "pay_T3stAu")] == 1


def test_cashfree_sdk_refunds_an_order_once_per_refund_id(cashfree):
    from cashfree_pg.models.order_create_refund_request import OrderCreateRefundRequest

    api, client = cashfree
    api.pay(CF_ORDER, "5114910972395")
    asked = OrderCreateRefundRequest(refund_amount=50.0, refund_id="ph-sdk-cf-1")
    first = client.PGOrderCreateRefund("ph_T3st", asked)
    again = client.PGOrderCreateRefund("ph_T3st", asked)  # a retry: the same refund
    assert (first.data.refund_id, first.data.refund_amount, first.data.refund_status) == (
        "ph-sdk-cf-1", 50.0, "SUCCESS")  # fmt: skip
    assert again.data.cf_refund_id == first.data.cf_refund_id
    assert api.money.made[(Provider.CASHFREE, "5114910972395")] == 1
    fetched = client.PGOrderFetchRefund("ph_T3st", "ph-sdk-cf-1")
    assert fetched.data.cf_refund_id == first.data.cf_refund_id
    with pytest.raises(ApiException) as raised:  # the same refund id, another amount
        client.PGOrderCreateRefund(
            "ph_T3st", OrderCreateRefundRequest(refund_amount=60.0, refund_id="ph-sdk-cf-1")
        )
    assert json.loads(raised.value.body)["code"] == "refund_id_already_exists"
    with pytest.raises(ApiException) as raised:  # more than is left of 170.00
        client.PGOrderCreateRefund(
            "ph_T3st", OrderCreateRefundRequest(refund_amount=150.0, refund_id="ph-sdk-cf-2")
        )
    assert raised.value.status == 400
    assert api.money.refunded[(Provider.CASHFREE, "5114910972395")] == 5_000


def _payu_post(url: str, command: str, **fields: str) -> dict:
    """A post-service call built as PayU's SDK builds its own (its ``APIHash``, its form
    encoding), with the fields PayU's API reference names."""
    import requests
    from resources.hasher import APIHash

    creds = {"key": API_KEYS.payu_key, "salt": API_KEYS.payu_salt}
    payload = {"key": creds["key"], "command": command, **fields}
    payload["hash"] = APIHash(creds, payload)
    answer = requests.post(f"{url}/merchant/postservice.php?form=2", data=payload, timeout=5)
    return json.loads(answer.text)


def test_payu_cancel_refund_transaction_hashed_as_the_sdk_queues_one_refund_per_token(gateway_api):
    api, url = gateway_api
    api.pay(PAYU_ORDER, "403993715521889531")
    refund = {"var1": "403993715521889531", "var2": "phsdktoken1", "var3": "100.00"}
    first = _payu_post(url, "cancel_refund_transaction", **refund)
    assert (first["status"], first["msg"], first["error_code"]) == (1, "Refund Request Queued", 102)
    again = _payu_post(url, "cancel_refund_transaction", **refund)  # the same token again
    assert (again["status"], again["error_code"]) == (0, 106)  # "Token already exists"
    assert api.money.made[(Provider.PAYU, "403993715521889531")] == 1
    listed = _payu_post(url, "check_action_status", var1="403993715521889531", var2="payuid")
    tokens = [a.get("token") for a in listed["transaction_details"]["403993715521889531"].values()]
    assert tokens == ["phsdktoken1"]  # how a sender finds the refund a lost answer made
    over = {"var1": "403993715521889531", "var2": "phsdktoken2", "var3": "900.00"}
    assert _payu_post(url, "cancel_refund_transaction", **over)["error_code"] == 105
    assert api.money.refunded[(Provider.PAYU, "403993715521889531")] == 10_000


def test_payu_sdks_own_refund_call_names_the_amount_amount_not_var3(gateway_api):
    """PayU's SDK posts the amount as ``amount``; its API reference, which payhooks follows,
    as ``var3`` (docs/providers.md, "Refunds"). The double reads ``var3`` alone, so the SDK's
    own call is refused there as an invalid amount: what the real API does with ``amount``
    is UNCONFIRMED."""
    api, url = gateway_api
    api.pay(PAYU_ORDER, "403993715521889532")
    answer = json.loads(_payu(url).cancelRefundTransaction("403993715521889532", "phsdk3", "1.00"))
    assert (answer["status"], answer["error_code"]) == (0, 105)
    assert api.money.made[(Provider.PAYU, "403993715521889532")] == 0

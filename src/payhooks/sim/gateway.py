"""A simulated gateway: real-format, correctly signed deliveries for tests, the demo and storm.

Bodies follow the shapes in PROVIDERS.md (Razorpay ``payment.*`` / ``order.paid`` /
``refund.processed``, Cashfree webhook versions 2022-09-01 to 2025-01-01, PayU form posts).
A ``Delivery`` is the exact bytes and headers; a retry re-sends the same object.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import dataclass
from decimal import Decimal

from payhooks.events import Provider
from payhooks.providers import cashfree, payu, razorpay, secrets_value


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    provider: Provider
    body: bytes
    headers: dict[str, str]
    label: str

    @property
    def path(self) -> str:
        return f"/webhooks/{self.provider.value}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Purchase:
    """A checked-out cart as the gateway knows it: the reference it echoes back, and the
    amount it charges (what the demo and storm pay for)."""

    provider: Provider
    cart_id: str
    reference: str
    amount_paise: int
    items: dict[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySecrets:
    razorpay: str = "rzp_webhook_demo_secret"
    cashfree: str = "cfsk_demo_client_secret"
    payu_key: str = "gtKFFx"
    payu_salt: str = "eCwWELxi"

    def env(self) -> dict[str, str]:
        """The environment a payhooks server needs to accept these deliveries."""
        return {
            "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": secrets_value(self.razorpay),
            "PAYHOOKS_CASHFREE_CLIENT_SECRETS": secrets_value(self.cashfree),
            "PAYHOOKS_PAYU_MERCHANT_KEY": self.payu_key,
            "PAYHOOKS_PAYU_SALTS": secrets_value(self.payu_salt),
        }


def new_payment_id(provider: Provider) -> str:
    if provider is Provider.RAZORPAY:
        return "pay_" + secrets.token_hex(7)
    return str(10**17 + secrets.randbelow(9 * 10**17))


class Gateway:
    """Builds deliveries; ``now`` is unix seconds, passed in so the module stays pure."""

    def __init__(self, keys: GatewaySecrets, *, now: int = 1_767_225_600) -> None:
        self.keys = keys
        self.now = now

    def razorpay(
        self,
        event: str,
        *,
        payment_id: str,
        order_id: str,
        amount_paise: int,
        currency: str = "INR",
        refund_id: str | None = None,
        refund_amount_paise: int | None = None,
        event_id: str | None = None,
        with_event_id: bool = True,
    ) -> Delivery:
        """A Razorpay event; ``x-razorpay-event-id`` is new per event unless given. A refund
        is of the whole payment unless ``refund_amount_paise`` says otherwise."""
        money = {"amount": amount_paise, "currency": currency, "created_at": self.now}
        payload: dict[str, object] = {
            "payment": {"entity": _payment(event, payment_id, order_id, money)}
        }
        contains = ["payment"]
        if event == "order.paid":
            payload["order"] = {"entity": _order(order_id, money)}
            contains.append("order")
        if refund_id is not None:
            refunded = {**money, "amount": refund_amount_paise or amount_paise}
            payload["refund"] = {"entity": _refund(refund_id, payment_id, refunded)}
            contains.insert(0, "refund")
        envelope = {
            "entity": "event",
            "account_id": "acc_demo",
            "event": event,
            "contains": contains,
            "payload": payload,
            "created_at": self.now,
        }
        body = json.dumps(envelope).encode() + b"\n"
        headers = {
            "content-type": "application/json",
            "x-razorpay-signature": razorpay.sign(body, self.keys.razorpay),
        }
        if with_event_id:
            headers["x-razorpay-event-id"] = event_id or "evt_" + secrets.token_hex(7)
        return Delivery(
            provider=Provider.RAZORPAY,
            body=body,
            headers=headers,
            label=f"razorpay {event} {payment_id}",
        )

    def cashfree(
        self,
        event_type: str,
        *,
        order_id: str,
        cf_payment_id: str,
        order_amount: Decimal,
        payment_status: str = "SUCCESS",
        version: str = "2025-01-01",
        payment_amount: Decimal | None = None,
    ) -> Delivery:
        """A Cashfree payment webhook in the given version's shape, signed with ms timestamp."""
        paid = order_amount if payment_amount is None else payment_amount
        payment_id: object = int(cf_payment_id) if version <= "2022-09-01" else cf_payment_id
        body = _cashfree_body(event_type, order_id, payment_id, payment_status, order_amount, paid)
        timestamp = str(self.now * 1000)
        headers = {
            "content-type": "application/json",
            "x-webhook-timestamp": timestamp,
            "x-webhook-signature": cashfree.sign(body, timestamp, self.keys.cashfree),
            "x-webhook-version": version,
            "x-webhook-attempt": "1",
        }
        if version >= "2025-01-01":
            headers["x-idempotency-key"] = base64.b64encode(hashlib.sha256(body).digest()).decode()
        return Delivery(
            provider=Provider.CASHFREE,
            body=body,
            headers=headers,
            label=f"cashfree {event_type} {cf_payment_id}",
        )

    def payu(self, *, txnid: str, mihpayid: str, amount: str, status: str = "success") -> Delivery:
        """A PayU payment post (form-encoded) with its reverse hash."""
        fields = {
            "mihpayid": mihpayid,
            "mode": "UPI",
            "status": status,
            "unmappedstatus": "captured" if status == "success" else status,
            "key": self.keys.payu_key,
            "txnid": txnid,
            "amount": amount,
            "addedon": "2026-03-04 14:46:14",
            "productinfo": "payhooks demo",
            "firstname": "Asha",
            "email": "buyer@example.com",
            "phone": "9999999999",
            **{f"udf{n}": "" for n in range(1, 11)},
            "error": "E000",
            "error_Message": "No Error",
            "bank_ref_num": bank_reference(mihpayid),
        }
        fields["hash"] = payu.reverse_hash(fields, self.keys.payu_salt)
        return Delivery(
            provider=Provider.PAYU,
            body=payu.encode(fields),
            headers={"content-type": "application/x-www-form-urlencoded"},
            label=f"payu {status} {mihpayid}",
        )


def bank_reference(payment_id: str) -> str:
    """The 12-digit reference (UPI RRN / UTR) the customer's bank shows for this payment."""
    return str(int(hashlib.sha256(payment_id.encode()).hexdigest(), 16))[-12:]


def _payment(
    event: str, payment_id: str, order_id: str, money: dict[str, object]
) -> dict[str, object]:
    status = {"payment.authorized": "authorized", "payment.failed": "failed"}.get(event, "captured")
    return {
        "id": payment_id,
        "entity": "payment",
        **money,
        "status": status,
        "order_id": order_id,
        "international": False,
        "method": "upi",
        "amount_refunded": 0,
        "refund_status": None,
        "captured": status == "captured",
        "acquirer_data": {"rrn": bank_reference(payment_id)},
        "email": "buyer@example.com",
        "contact": "+919999999999",
        "notes": [],
        "fee": 2,
        "tax": 0,
        "error_code": None,
    }


def _order(order_id: str, money: dict[str, object]) -> dict[str, object]:
    return {
        "id": order_id,
        "entity": "order",
        **money,
        "amount_paid": money["amount"],
        "amount_due": 0,
        "receipt": None,
        "status": "paid",
        "attempts": 1,
        "notes": [],
    }


def _refund(refund_id: str, payment_id: str, money: dict[str, object]) -> dict[str, object]:
    return {
        "id": refund_id,
        "entity": "refund",
        **money,
        "payment_id": payment_id,
        "notes": [],
        "receipt": None,
        "status": "processed",
        "speed_processed": "normal",
        "speed_requested": "normal",
        "acquirer_data": {"arn": "7" + bank_reference(refund_id) + "0" * 10},
    }


def _cashfree_body(
    event_type: str,
    order_id: str,
    payment_id: object,
    status: str,
    ordered: Decimal,
    paid: Decimal,
) -> bytes:
    """Amounts as Cashfree writes them (``170.00``): placed as text, never through float."""
    data = {
        "order": {
            "order_id": order_id,
            "order_amount": "@ORDER@",
            "order_currency": "INR",
            "order_tags": None,
        },
        "payment": {
            "cf_payment_id": payment_id,
            "payment_status": status,
            "payment_amount": "@PAID@",
            "payment_currency": "INR",
            "payment_message": "00::Transaction success",
            "payment_time": "2025-01-15T12:20:29+05:30",
            "bank_reference": bank_reference(str(payment_id)),
            "auth_id": None,
            "payment_method": {"upi": {"channel": "collect", "upi_id": "buyer@ybl"}},
            "payment_group": "upi",
        },
        "customer_details": {
            "customer_name": None,
            "customer_id": "c1",
            "customer_email": "buyer@example.com",
            "customer_phone": "9999999999",
        },
    }
    text = json.dumps({"data": data, "event_time": "2025-01-15T11:16:10+05:30", "type": event_type})
    return text.replace('"@ORDER@"', f"{ordered:.2f}").replace('"@PAID@"', f"{paid:.2f}").encode()

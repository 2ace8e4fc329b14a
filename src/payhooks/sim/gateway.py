"""A simulated gateway: real-format, correctly signed deliveries for tests, the demo and storm.

Bodies follow the shapes in PROVIDERS.md (Razorpay ``payment.*`` / ``order.paid`` /
``refund.processed``, Cashfree webhook versions 2022-09-01 to 2025-01-01, PayU form posts),
each built by its gateway's module in ``sim/gateways/``. A ``Delivery`` is the exact bytes and
headers; a retry re-sends the same object.
"""

from __future__ import annotations

from decimal import Decimal

from payhooks.events import Provider
from payhooks.sim.deliveries import Delivery, Purchase, bank_reference
from payhooks.sim.gateways import cashfree, payu, razorpay, simulator
from payhooks.sim.keys import GatewaySecrets


def new_payment_id(provider: Provider) -> str:
    return simulator(provider).new_payment_id()


class Gateway:
    """Builds deliveries; ``now`` is unix seconds, passed in so the module stays pure. The
    methods name the gateways' own builders (``sim.gateways.<name>.delivery``)."""

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
        return razorpay.delivery(
            self, event, payment_id=payment_id, order_id=order_id, amount_paise=amount_paise,
            currency=currency, refund_id=refund_id, refund_amount_paise=refund_amount_paise,
            event_id=event_id, with_event_id=with_event_id,
        )  # fmt: skip

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
        return cashfree.delivery(
            self, event_type, order_id=order_id, cf_payment_id=cf_payment_id,
            order_amount=order_amount, payment_status=payment_status, version=version,
            payment_amount=payment_amount,
        )  # fmt: skip

    def payu(self, *, txnid: str, mihpayid: str, amount: str, status: str = "success") -> Delivery:
        """A PayU payment post (form-encoded) with its reverse hash."""
        return payu.delivery(self, txnid=txnid, mihpayid=mihpayid, amount=amount, status=status)


__all__ = [
    "Delivery",
    "Gateway",
    "GatewaySecrets",
    "Purchase",
    "bank_reference",
    "new_payment_id",
]

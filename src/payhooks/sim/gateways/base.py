"""What the simulators need of one gateway, as one value: its deliveries' story in the storm,
its status-API double's routes and answers, its test credentials' environment, and the demo
scenarios of its own. Each module beside this one builds one ``Simulator``."""

from __future__ import annotations

import email.utils
import functools
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from payhooks.events import Provider
from payhooks.gateways import gateway, secrets_value
from payhooks.plumbing.errors import PayhooksError
from payhooks.sim import parts
from payhooks.sim.deliveries import Delivery, Disputed, Paid, Purchase
from payhooks.sim.stage import Result, Stage

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route


def numeric_payment_id() -> str:
    """An 18-digit payment id, as Cashfree's ``cf_payment_id`` and PayU's ``mihpayid`` are."""
    return str(10**17 + secrets.randbelow(9 * 10**17))


def same_payment_id(purchase: Purchase, payment_id: str) -> str:
    """The payment id payhooks records is the gateway's own (Razorpay's, Cashfree's)."""
    return payment_id


def retry_after(response: Response, scripted: parts.Fault) -> Response:
    """The scripted fault's wait, in the standard ``retry-after`` header when it has one."""
    if scripted.retry_after_s is not None:
        response.headers["retry-after"] = _wait(scripted)
    return response


def _wait(scripted: parts.Fault) -> str:
    """Seconds, or the HTTP date that many seconds from now (RFC 9110, 10.2.3)."""
    assert scripted.retry_after_s is not None
    if not scripted.retry_after_date:
        return str(scripted.retry_after_s)
    return email.utils.formatdate(time.time() + scripted.retry_after_s, usegmt=True)


def guarded(
    api: parts.GatewayBooks,
    provider: Provider,
    refusal: Callable[[Request], Response | None],
    answer: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """``answer`` behind what a status-API route checks first, so each gateway says only how
    it refuses wrong credentials (``refusal``'s answer, None when right): then the next
    scripted fault plays, and only then the route answers."""

    @functools.wraps(answer)
    async def route(request: Request) -> Response:
        refused = refusal(request)
        if refused is None:
            refused = await api.fault(provider)
        return refused if refused is not None else await answer(request)

    return route


class NoSimulator(PayhooksError):
    """A gateway the simulators have no entry for: never played as another one."""

    def __init__(self, provider: str) -> None:
        super().__init__(f"no simulator for the gateway {provider!r}")
        self.provider = provider


@dataclass(frozen=True, slots=True, kw_only=True)
class Booked:
    """A payment the gateway's books record, as its status API is asked about it.
    ``paid_paise``: what the gateway reports paid when it is not the order's amount (an
    offer, a service fee); a gateway that reports no such thing leaves it out."""

    order: parts.Order
    payment_id: str
    status: str | None
    paid_paise: int | None
    now: int


PaymentDelivery = Callable[[parts.Signer, Paid], Delivery]
"""A gateway's signed delivery saying what ``Paid`` says: what the tests' factories build a
gateway's deliveries with."""

DisputeDelivery = Callable[[parts.Signer, Disputed], Delivery]
"""A gateway's signed delivery saying what ``Disputed`` says, in the shape of the dispute
webhooks its documentation publishes (docs/providers.md, "Disputes")."""

RefundDelivery = Callable[[parts.Signer, dict[str, Any]], Delivery]
"""A gateway's signed refund webhook about a refund its refund API made: the entity the
double keeps for it (``Books.refunds``), as the refund call answered it, its status the one
the webhook reports."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Simulator:
    """One gateway's simulated side. ``payment_key`` names the payment's id in its status
    API's entity; ``recorded_id`` is the payment id payhooks records for a payment the
    gateway made (PayU's is the cart's txnid); ``retry_schedule`` is in simulated seconds.
    ``webhook_secrets`` and ``api_keys`` pick the test credentials; which variables a
    deployment reads them from is the core gateway's to say (``payhooks.gateways``)."""

    provider: Provider
    new_payment_id: Callable[[], str]
    recorded_id: Callable[[Purchase, str], str] = same_payment_id
    webhook_secrets: Callable[[parts.SecretValues], tuple[str, ...]]
    """One test value for each of the gateway's webhook settings, in their order."""
    api_keys: Callable[[parts.ApiKeyValues], tuple[str, str]]
    """The API id and its secret the status-API double accepts."""
    routes: Callable[[parts.GatewayBooks], list[Route]]
    entity: Callable[[Booked], dict[str, Any]]
    payment_key: str
    fault: Callable[[parts.Fault], Response]
    retry_schedule: tuple[float, ...]
    story: Callable[[parts.Story, parts.Signer, parts.StormOptions, random.Random], list[Delivery]]
    payment_delivery: PaymentDelivery
    dispute_delivery: DisputeDelivery | None = None
    """Its dispute webhooks; None for a gateway whose documentation publishes none payhooks
    can take (docs/providers.md, "Disputes")."""
    refund_words: parts.RefundWords | None = None
    """Its refund API's status words; None for a gateway payhooks sends no refunds to."""
    refund_delivery: RefundDelivery | None = None
    """Its signed refund webhook; None for a gateway whose refund reports are callbacks only
    its API confirms (PayU's ``refund_callback``) or that payhooks sends no refunds to."""
    told_order: Callable[[list[Delivery]], dict[str, Any] | None] | None = None
    """The order as its status API answers it, when its callbacks carry it whole (Juspay's
    ``content.order``): what a story's callbacks leave it as, for the double's books."""
    scenarios: tuple[Callable[[Stage], Result], ...] = ()
    captured: Callable[[dict[str, Any]], int | None] | None = None
    """The paise a status-API entity of a captured payment says it captured; None for any
    other entity. A gateway without it pays out no settlements (``GatewayApi.pay_out``)."""
    refund_id: Callable[[dict[str, Any]], str] | None = None
    """A refund entity's id, for the refunds a payout debits."""
    new_settlement_id: Callable[[], str] = lambda: "setl_" + secrets.token_hex(7)
    settlement_delivery: Callable[[parts.Signer, parts.Payout], Delivery] | None = None
    """The gateway's signed settlement webhook for a payout it made."""

    def webhook_env(self, keys: parts.SecretValues) -> dict[str, str]:
        """The environment a payhooks server reads these webhook secrets from."""
        settings = gateway(self.provider).secrets
        return {
            setting.variable: secrets_value(value) if setting.several else value
            for setting, value in zip(settings, self.webhook_secrets(keys), strict=True)
        }

    def api_env(self, keys: parts.ApiKeyValues, base_url: str) -> dict[str, str]:
        """The environment a payhooks worker reads to ask the double at ``base_url``."""
        api = gateway(self.provider).status_api
        ident, secret = self.api_keys(keys)
        return {api.id_variable: ident, api.secret_variable: secret, api.url_variable: base_url}

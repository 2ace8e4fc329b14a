"""What the simulators share, below every one of them: the values they hand one another (a
gateway's order and a scripted fault in the status-API double's books, the storm's options
and a cart's story, the test credentials' values) and the roles of the higher objects they
work with, as protocols: what signs a delivery (``sim.gateway.Gateway``) and the books
a gateway's routes keep (``sim.gateway_api.GatewayApi``). Nothing here reads the simulators'
registry, so each gateway's simulator imports this at runtime and no import runs back up."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.responses import Response

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.sim.deliveries import Delivery, Purchase

# --- the test credentials' values ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretValues:
    """The webhook secrets deliveries are signed with; ``sim.keys.GatewaySecrets`` adds the
    environment a payhooks server reads them from."""

    razorpay: str = "rzp_webhook_demo_secret"
    cashfree: str = "cfsk_demo_client_secret"
    payu_key: str = "gtKFFx"
    payu_salt: str = "eCwWELxi"
    phonepe: str = "payhooks_demo:demo1234pass"
    juspay: str = "payhooks_demo:juspay-demo-webhook-password"


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiKeyValues:
    """The API credentials the double accepts (never webhook secrets); ``sim.keys.ApiKeys``
    adds the environment a payhooks worker reads them from."""

    razorpay_key_id: str = "rzp_test_demo_key"
    razorpay_key_secret: str = "rzp_demo_key_secret"
    cashfree_client_id: str = "cf_demo_client_id"
    cashfree_api_secret: str = "cfsk_demo_api_secret"
    payu_key: str = "gtKFFx"
    payu_salt: str = "eCwWELxi"
    phonepe_client_id: str = "PAYHOOKS_DEMO_CLIENT"
    phonepe_client_secret: str = "phonepe_demo_client_secret"
    juspay_merchant_id: str = "payhooks_demo"
    juspay_api_key: str = "juspay_demo_api_key"


# --- the status-API double's books -----------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Order:
    provider: Provider
    reference: str
    amount_paise: int
    expired: bool = False
    payments: list[dict[str, Any]] = field(default_factory=list)
    refunds: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Refunds by the gateway's own refund id, for a status API that answers by it (PayU's
    ``check_action_status``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """One scripted answer: an HTTP status (429, 500, 503...) or a delay before answering;
    with ``body``, that body under ``status`` (200 by default): an error in a gateway's
    documented shape under HTTP 200 (PayU's ``{"status":0,"msg":...}``), an HTML page from a
    proxy, a truncated answer. A fault with neither status nor body answers as usual."""

    status: int | None = None
    delay_s: float = 0.0
    retry_after_s: int | None = None
    retry_after_date: bool = False
    """``retry_after_s`` as an HTTP date (``Retry-After``'s other form), not seconds."""
    body: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True, kw_only=True)
class RefundWords:
    """A refunding gateway's refund status in its refund API's answers: the field, and its
    words for pending, processed and failed (docs/providers.md, "Refunds")."""

    name: str
    pending: str
    processed: str
    failed: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RefundAsked:
    """A refund asked of a gateway's refund endpoint: ``amount_paise`` of ``payment_id``
    (which captured ``captured_paise``) under the idempotency ``key``, with the request's
    ``body``; ``token`` is the name the gateway counts it under when not the key (Cashfree's
    ``refund_id``)."""

    provider: Provider
    payment_id: str
    key: str
    body: dict[str, Any]
    amount_paise: int
    captured_paise: int
    token: str | None = None


@dataclass(slots=True, kw_only=True)
class Books:
    """The money a gateway gave back, as its refund endpoints recorded it: each refund by the
    idempotency key it was made under (with the body it was asked with), and the paise
    refunded per payment. What the tests count: one refund per key, never past captured."""

    by_key: dict[tuple[Provider, str], tuple[dict[str, Any], dict[str, Any]]] = field(
        default_factory=dict
    )
    refunded: Counter[tuple[Provider, str]] = field(default_factory=Counter)
    refunds: dict[tuple[Provider, str], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    made: Counter[tuple[Provider, str]] = field(default_factory=Counter)
    """Refunds made per payment: more than one per key would be a double refund."""
    amounts: dict[tuple[Provider, str], list[int]] = field(
        default_factory=lambda: defaultdict(list)
    )
    """The paise of each of ``refunds``, in their order."""
    captured: Counter[tuple[Provider, str]] = field(default_factory=Counter)
    """Captures made per authorised payment: more than one would be a double capture."""
    under: Counter[tuple[Provider, str]] = field(default_factory=Counter)
    """Refunds made per merchant's key as sent (Razorpay's header, Cashfree's ``refund_id``,
    PayU's token), whatever the gateway scopes it by: what a storm counts per intent."""
    pending: bool = False
    """Refunds are made pending (Razorpay's normal speed, PayU's queue) until ``settle``."""
    failing: bool = False
    """Refunds are made failed: the gateway takes the call, makes the refund under its id and
    fails it in the same answer (Razorpay's ``failed``, Cashfree's ``FAILED``; PayU's when
    asked about), its money never taken."""
    lagging: bool = False
    """Refunds made are not readable yet: Cashfree's Get Refund answers ``refund_not_found``
    for each while this holds (its read side lags its write side by seconds:
    docs/providers.md, source [C4])."""
    reuse_refused: bool = False
    """A refund's key asked again with the same body is answered 400
    ``refund_id_already_exists``, the other answer Cashfree documents for a ``refund_id`` used
    before (the same reference, sections 2 and 8), not with the refund made under it."""


# --- what a gateway paid out ------------------------------------------------------------------

FEE_BPS = 200
"""The double's fee on a payment: 2% of it, and 18% GST on the fee (the rates Razorpay and
Cashfree publish for UPI and cards)."""
TAX_BPS = 1800


@dataclass(frozen=True, slots=True, kw_only=True)
class PaidOut:
    """One entry of a payout the double made: a payment it captured (a credit, less its fee
    and the tax on the fee) or a refund it made (a debit of the refund)."""

    entry_id: str
    kind: str
    """``payment`` or ``refund``."""
    payment_id: str
    order_id: str
    amount_paise: int
    at: int

    @property
    def fee_paise(self) -> int:
        """The gateway's fee, its tax not included."""
        return self.amount_paise * FEE_BPS // 10_000 if self.kind == "payment" else 0

    @property
    def tax_paise(self) -> int:
        return self.fee_paise * TAX_BPS // 10_000

    @property
    def net_paise(self) -> int:
        """What the entry adds to the payout."""
        if self.kind == "refund":
            return -self.amount_paise
        return self.amount_paise - self.fee_paise - self.tax_paise


@dataclass(frozen=True, slots=True, kw_only=True)
class Payout:
    """One settlement the double made: its id and UTR, when, and what it covered."""

    provider: Provider
    settlement_id: str
    utr: str
    at: int
    entries: tuple[PaidOut, ...]

    @property
    def amount_paise(self) -> int:
        """What reached the merchant's bank: the entries added up."""
        return sum(entry.net_paise for entry in self.entries)

    @property
    def fees_paise(self) -> int:
        return sum(entry.fee_paise for entry in self.entries)

    @property
    def tax_paise(self) -> int:
        return sum(entry.tax_paise for entry in self.entries)


class GatewayBooks(Protocol):
    """What a gateway's routes, a scenario's stage and the shop at the gateway ask of the
    status-API double's books (``sim.gateway_api.GatewayApi``)."""

    @property
    def keys(self) -> ApiKeyValues: ...

    @property
    def now(self) -> int: ...

    @property
    def money(self) -> Books: ...

    @property
    def replayed(self) -> dict[tuple[Provider, str], tuple[int, bytes]]: ...

    def open_order(self, purchase: Purchase) -> Order: ...

    def pay(
        self,
        purchase: Purchase,
        payment_id: str,
        status: str | None = None,
        *,
        payment_amount_paise: int | None = None,
    ) -> None: ...

    def order(self, provider: Provider, reference: str) -> Order | None: ...

    def payment_of(self, provider: Provider, payment_id: str) -> dict[str, Any] | None: ...

    def refund_of(self, provider: Provider, refund_id: str) -> dict[str, Any] | None: ...

    def refund_booked(
        self, provider: Provider, reference: str, refund_id: str, entity: dict[str, Any]
    ) -> None: ...

    def refund_status(self, provider: Provider) -> str: ...

    def payouts_of(self, provider: Provider) -> list[Payout]: ...

    def day_of(self, payout: Payout) -> str: ...

    def payout(self, provider: Provider, settlement_id: str) -> Payout | None: ...

    def refund_once(
        self, asked: RefundAsked, make: Callable[[int], dict[str, Any] | str]
    ) -> tuple[dict[str, Any] | None, str | None]: ...

    def capture_once(
        self, provider: Provider, payment_id: str, amount: object
    ) -> tuple[dict[str, Any] | None, str | None]: ...

    async def after_acting(self, provider: Provider) -> Response | None: ...

    async def fault(self, provider: Provider) -> Response | None: ...


# --- what signs a delivery -------------------------------------------------------------------


class Signer(Protocol):
    """What a gateway's deliveries are built and signed with (``sim.gateway.Gateway``): the
    webhook secrets and the clock."""

    @property
    def keys(self) -> SecretValues: ...

    @property
    def now(self) -> int: ...


# --- the storm's options and a cart's story ----------------------------------------------------

SIGNED = tuple(p for p, found in GATEWAYS.items() if not found.confirmed_by_api)
"""The gateways whose webhooks take effect as they come, with no status API to confirm them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StormOptions:
    carts: int = 200
    providers: tuple[Provider, ...] = SIGNED
    """Whose shoppers the storm plays. Gateways whose callbacks the status API must confirm
    (PhonePe, Juspay) settle only with ``books`` and a ``reconcile`` that confirms them
    (tests/reconcile/test_storm_silent.py): name them here to storm them."""
    skus: int = 10
    stock_per_sku: int = 1_000_000
    duplicate_rate: float = 0.3
    reorder_rate: float = 0.3
    failed_attempt_rate: float = 0.2
    double_payment_rate: float = 0.05
    refund_rate: float = 0.1
    concurrency: int = 16
    time_scale: float = 3600.0
    spread_s: float = 600.0
    request_timeout_s: float = 10.0
    seed: int | None = None
    silent_rate: float = 0.0
    """Share of carts paid at the gateway whose webhooks are never sent: only reconciliation,
    asking the gateway's status API (``books``), can give them their order."""
    reconcile_wait_s: float = 120.0
    refunds_doubles: bool = False
    """The deployment refunds double payments itself (``PAYHOOKS_REFUND_DOUBLE_PAYMENTS``)
    through ``books``: wait for those refunds too, and check that every double payment was
    refunded once and no other payment at all (``double_payments_refunded_once``)."""
    dispute_rate: float = 0.05
    """Share of the carts paid at a gateway with dispute webhooks (Razorpay, Cashfree) whose
    payment is then disputed: a few reports of one dispute, sent after the payment's own
    deliveries, reordered and duplicated like them (``storm.dispute_story``)."""
    recovers_lost: bool = False
    """The deployment may have lost deliveries it acknowledged (its database failed over onto
    an asynchronous standby that had not received them; tests/failover): wait, reconciling,
    until every cart the story paid for is paid, not only the silent ones."""
    held_rate: float = 0.0
    """With a ``settle`` step (in-process storms): the share of captured payments the
    gateways keep out of their payout (``sim.settling``): each must end flagged unsettled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Planned:
    """One logical delivery of a story, with when (simulated) and how many copies go out."""

    delivery: Delivery
    purchase: Purchase
    at_s: float
    copies: int = 1


@dataclass(slots=True, kw_only=True)
class Story:
    """What the gateway does for one cart, and what it knows happened (for verification)."""

    purchase: Purchase
    planned: list[Planned] = field(default_factory=list)
    captured: list[str] = field(default_factory=list)
    refunded: list[str] = field(default_factory=list)
    """Refunded in full: the cart is owed no order."""
    partly_refunded: list[str] = field(default_factory=list)
    refunded_paise: Counter[str] = field(default_factory=Counter)
    """What the story's own refunds (made at the gateway's dashboard) gave back, per payment."""
    silent: bool = False
    disputes: list[Disputing] = field(default_factory=list)
    """The disputes the gateway raised against its payments, each with where it must end."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Disputing:
    """A dispute a story raised against one of its payments: where payhooks must hold it in
    the end (payhooks' word: ``won``, ``lost``), whatever order its reports came in."""

    dispute_id: str
    payment_id: str
    amount_paise: int
    ends: str

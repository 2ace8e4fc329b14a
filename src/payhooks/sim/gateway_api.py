"""A local double of each gateway's status API, answering as the documented API does
(docs/providers.md, "Status APIs used by reconciliation"): Razorpay's order payments, Cashfree's
order payments and order, PayU's ``verify_payment``, each with its own authentication, its own
error shapes, and, on demand, 429s, 5xx and slow answers. It serves over HTTP on a loopback
port, so reconciliation and the gateways' own SDK clients talk to it as to the real thing.
Each gateway's routes and answers are in its module in ``sim/gateways/``; this is the books
and the server they share.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.responses import Response

from payhooks.events import Provider
from payhooks.gateways._settlements import INDIA
from payhooks.sim import loopback
from payhooks.sim.deliveries import Purchase
from payhooks.sim.gateways import SIMULATORS, Booked, simulator
from payhooks.sim.keys import ApiKeys
from payhooks.sim.parts import Books, Fault, Order, PaidOut, Payout, RefundAsked, RefundWords

REFUND_WORDS: Mapping[Provider, RefundWords] = {
    provider: sim.refund_words for provider, sim in SIMULATORS.items() if sim.refund_words
}
"""Each refunding gateway's refund status: its field, and its words for pending, processed
and failed (docs/providers.md, "Refunds"), as its simulator says them."""


class GatewayApi:
    """The gateways' books: orders and their payments, and the faults to play next."""

    def __init__(self, keys: ApiKeys | None = None, *, now: int = 1_767_225_600) -> None:
        self.keys = keys or ApiKeys()
        self.now = now
        self._orders: dict[tuple[Provider, str], Order] = {}
        self._faults: dict[Provider, deque[Fault]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.asked: Counter[tuple[Provider, str]] = Counter()
        self.money = Books()
        self._after: dict[Provider, deque[Fault]] = defaultdict(deque)
        self.replayed: dict[tuple[Provider, str], tuple[int, bytes]] = {}
        """The first answer under each idempotency header, replayed for every later request
        with it (Cashfree's ``x-idempotency-key``)."""
        self.payouts: list[Payout] = []
        """Every settlement the double made (``pay_out``), in order."""
        self._paid_out: set[tuple[Provider, str]] = set()

    # --- the merchant's and the customer's side -------------------------------------------

    def open_order(self, purchase: Purchase) -> Order:
        """The merchant created this order at the gateway (Razorpay's create-order call,
        Cashfree's order, PayU's txnid)."""
        key = (purchase.provider, purchase.reference)
        with self._lock:
            if key not in self._orders:
                self._orders[key] = Order(
                    provider=purchase.provider,
                    reference=purchase.reference,
                    amount_paise=purchase.amount_paise,
                )
            return self._orders[key]

    def pay(
        self,
        purchase: Purchase,
        payment_id: str,
        status: str | None = None,
        *,
        payment_amount_paise: int | None = None,
    ) -> None:
        """A payment the gateway records for the order, in the gateway's own status words
        (default: the captured or successful one). ``payment_amount_paise``: what Cashfree
        reports paid, when it is not the order amount (an offer, a service fee)."""
        sim = simulator(purchase.provider)
        order = self.open_order(purchase)
        booked = Booked(order=order, payment_id=payment_id, status=status,
                        paid_paise=payment_amount_paise, now=self.now)  # fmt: skip
        entity = sim.entity(booked)
        with self._lock:
            kept = [p for p in order.payments if str(p.get(sim.payment_key)) != payment_id]
            order.payments = [*kept, entity]

    def refund(self, purchase: Purchase, refund_id: str, entity: dict[str, Any]) -> None:
        """A refund the gateway records for the order, as its status API answers about it."""
        order = self.open_order(purchase)
        with self._lock:
            order.refunds[refund_id] = entity

    def refunded_elsewhere(self, provider: Provider, payment_id: str, paise: int) -> None:
        """A refund made outside the refund endpoints (the merchant's dashboard): it counts
        against what the payment can still refund, and not as a refund a caller made."""
        with self._lock:
            self.money.refunded[(provider, payment_id)] += paise

    def refund_booked(
        self, provider: Provider, reference: str, refund_id: str, entity: dict[str, Any]
    ) -> None:
        """A refund a refund call made, kept with its order too, for a status API that
        answers by the gateway's refund id: the same entity, so ``settle`` changes both."""
        with self._lock:
            order = self._orders.get((provider, reference))
            if order is not None:
                order.refunds[refund_id] = entity

    def refund_of(self, provider: Provider, refund_id: str) -> dict[str, Any] | None:
        """The refund a status call asks about by its id (counted in ``asked``), or None."""
        with self._lock:
            self.asked[(provider, refund_id)] += 1
            for (kept, _), order in self._orders.items():
                if kept is provider and refund_id in order.refunds:
                    return order.refunds[refund_id]
        return None

    def payment_of(self, provider: Provider, payment_id: str) -> dict[str, Any] | None:
        """The payment a status call asks about by the gateway's own id (PayU's
        ``check_payment`` by ``mihpayid``; counted in ``asked``), or None."""
        key = simulator(provider).payment_key
        with self._lock:
            self.asked[(provider, payment_id)] += 1
            for (kept, _), order in self._orders.items():
                found = [p for p in order.payments if str(p.get(key)) == payment_id]
                if kept is provider and found:
                    return found[-1]
        return None

    def book(self, purchase: Purchase, entity: dict[str, Any]) -> None:
        """The payment the gateway records for the order, as its status API answers it,
        written whole (Juspay's order with its refunds): in place of the one of its id."""
        sim = simulator(purchase.provider)
        order = self.open_order(purchase)
        with self._lock:
            kept = [
                p for p in order.payments if p.get(sim.payment_key) != entity.get(sim.payment_key)
            ]
            order.payments = [*kept, entity]

    def expire(self, purchase: Purchase) -> None:
        self.open_order(purchase).expired = True

    def fail_next(self, provider: Provider, *faults: Fault) -> None:
        """Answer the next calls for ``provider`` with these faults, in order."""
        with self._lock:
            self._faults[provider].extend(faults)

    def fail_after_acting(self, provider: Provider, *faults: Fault) -> None:
        """The next refunds (Razorpay: and captures) of ``provider`` are made, then answered
        with these faults (a 5xx, or a delay past the caller's timeout): the gateway acted,
        the caller never heard."""
        with self._lock:
            self._after[provider].extend(faults)

    def refund_status(self, provider: Provider) -> str:
        """The status a refund is made with: failed while ``money.failing``, pending while
        ``money.pending``, else processed."""
        words = REFUND_WORDS[provider]
        if self.money.failing:
            return words.failed
        return words.pending if self.money.pending else words.processed

    def settle(self, provider: Provider, *, failed: bool = False) -> int:
        """Every pending refund of ``provider`` processed (or failed: its money back in the
        payment, refundable again); how many."""
        words = REFUND_WORDS[provider]
        name, pending = words.name, words.pending
        settled = 0
        with self._lock:
            for (kept, payment_id), made in self.money.refunds.items():
                amounts = self.money.amounts[(kept, payment_id)]
                for refund, paise in zip(made, amounts, strict=True):
                    if kept is not provider or refund.get(name) != pending:
                        continue
                    refund[name] = words.failed if failed else words.processed
                    settled += 1
                    if failed:
                        self.money.refunded[(kept, payment_id)] -= paise
        return settled

    def refund_once(
        self, asked: RefundAsked, make: Callable[[int], dict[str, Any] | str]
    ) -> tuple[dict[str, Any] | None, str | None]:
        """A refund under its key, as an idempotent gateway makes it: the same key and body,
        the refund made before; the same key, another body, refused; else made once, within
        what the payment captured. Returns the refund, or what the gateway refuses with."""
        payment = (asked.provider, asked.payment_id)
        with self._lock:
            known = self.money.by_key.get((asked.provider, asked.key))
            if known is not None:
                body, refund = known
                return (refund, None) if body == asked.body else (None, "another body")
            refundable = asked.captured_paise - self.money.refunded[payment]
            if refundable <= 0:
                return None, "fully refunded"
            if asked.amount_paise > refundable:
                return None, "more than captured"
            made = make(len(self.money.refunds[payment]) + 1)
            if isinstance(made, str):
                return None, made
            refund = made
            self.money.by_key[(asked.provider, asked.key)] = (asked.body, refund)
            self.money.refunded[payment] += 0 if self.money.failing else asked.amount_paise
            self.money.refunds[payment].append(refund)
            self.money.amounts[payment].append(asked.amount_paise)
            self.money.made[payment] += 1
            self.money.under[(asked.provider, asked.token or asked.key)] += 1
            return refund, None

    def capture_once(
        self, provider: Provider, payment_id: str, amount: object
    ) -> tuple[dict[str, Any] | None, str | None]:
        """An authorised payment captured for its whole amount, once: the captured entity, or
        why not (``captured`` already, refunded since included; another ``amount``,
        ``unknown``, ``not authorized``)."""
        key = simulator(provider).payment_key
        with self._lock:
            for order in self._orders.values():
                for n, entity in enumerate(order.payments):
                    if str(entity.get(key)) != payment_id:
                        continue
                    if entity.get("status") == "captured" or entity.get("captured") is True:
                        return None, "captured"
                    if entity.get("status") != "authorized":
                        return None, "not authorized"
                    if amount != entity.get("amount"):
                        return None, "amount"
                    captured = {**entity, "status": "captured", "captured": True}
                    order.payments[n] = captured
                    self.money.captured[(provider, payment_id)] += 1
                    return captured, None
        return None, "unknown"

    async def after_acting(self, provider: Provider) -> Response | None:
        """The scripted fault a refund or a capture made is answered with, after its delay,
        or None."""
        return await self._play(self._after, provider)

    def pay_out(
        self, provider: Provider, *, at: int | None = None, held: Collection[str] = ()
    ) -> Payout | None:
        """A settlement of ``provider``, as the gateway makes one each cycle: every payment
        it captured and every refund it processed that no payout covered yet, but the
        payments in ``held`` (a gateway that keeps one back); None when there is nothing to
        pay out. ``at``: when, in Unix seconds (default now)."""
        sim = simulator(provider)
        if sim.captured is None:
            raise ValueError(f"the {provider.value} double pays out no settlements")
        when = int(time.time()) if at is None else at
        with self._lock:
            entries = [*self._captures(provider, held, when), *self._refunds(provider, when)]
            if not entries:
                return None
            made = Payout(provider=provider, settlement_id=sim.new_settlement_id(),
                          utr="UTR" + secrets.token_hex(6).upper(), at=when,
                          entries=tuple(entries))  # fmt: skip
            self._paid_out.update((provider, e.entry_id) for e in entries)
            self.payouts.append(made)
            return made

    def _captures(self, provider: Provider, held: Collection[str], at: int) -> list[PaidOut]:
        sim = simulator(provider)
        assert sim.captured is not None
        found = []
        for (kept, reference), order in self._orders.items():
            for entity in order.payments if kept is provider else ():
                payment_id, paise = str(entity.get(sim.payment_key)), sim.captured(entity)
                if paise is None or payment_id in held or (provider, payment_id) in self._paid_out:
                    continue
                found.append(PaidOut(entry_id=payment_id, kind="payment", payment_id=payment_id,
                                     order_id=reference, amount_paise=paise, at=at))  # fmt: skip
        return found

    def _refunds(self, provider: Provider, at: int) -> list[PaidOut]:
        words, sim = REFUND_WORDS.get(provider), simulator(provider)
        if words is None or sim.refund_id is None:
            return []
        orders = {str(p.get(sim.payment_key)): ref for (kept, ref), order in self._orders.items()
                  if kept is provider for p in order.payments}  # fmt: skip
        found = []
        for (kept, payment_id), made in self.money.refunds.items():
            amounts = self.money.amounts[(kept, payment_id)]
            for refund, paise in zip(made, amounts, strict=True):
                refund_id = sim.refund_id(refund)
                if kept is not provider or refund.get(words.name) != words.processed:
                    continue
                if (provider, refund_id) in self._paid_out:
                    continue
                found.append(PaidOut(entry_id=refund_id, kind="refund", payment_id=payment_id,
                                     order_id=orders.get(payment_id, ""), amount_paise=paise,
                                     at=at))  # fmt: skip
        return found

    def payouts_of(self, provider: Provider) -> list[Payout]:
        """The settlements of ``provider``, in the order they were made."""
        with self._lock:
            return [p for p in self.payouts if p.provider is provider]

    @staticmethod
    def day_of(payout: Payout) -> str:
        """The day a payout was made (``2026-01-05``): India's, as the reports count days."""
        return datetime.fromtimestamp(payout.at, UTC).astimezone(INDIA).date().isoformat()

    def payout(self, provider: Provider, settlement_id: str) -> Payout | None:
        """One settlement by its id, or None."""
        found = [
            p for p in self.payouts if p.provider is provider and p.settlement_id == settlement_id
        ]
        return found[0] if found else None

    # --- the API side, for the gateways' routes ---------------------------------------------

    def order(self, provider: Provider, reference: str) -> Order | None:
        """The order a status call asks about (counted in ``asked``), or None."""
        with self._lock:
            self.asked[(provider, reference)] += 1
            return self._orders.get((provider, reference))

    async def fault(self, provider: Provider) -> Response | None:
        """The next scripted fault's answer in the gateway's own shape, after its delay."""
        return await self._play(self._faults, provider)

    async def _play(
        self, faults: dict[Provider, deque[Fault]], provider: Provider
    ) -> Response | None:
        """The first of ``provider``'s ``faults`` taken off and answered, after its delay; None
        when none is left."""
        with self._lock:
            fault = faults[provider].popleft() if faults[provider] else None
        if fault is None:
            return None
        if fault.delay_s:
            await anyio.sleep(fault.delay_s)
        return _answer(provider, fault)

    def app(self) -> Starlette:
        return Starlette(routes=[r for sim in SIMULATORS.values() for r in sim.routes(self)])


def _answer(provider: Provider, fault: Fault) -> Response | None:
    """A scripted fault's answer: its own body, the gateway's error shape, or none."""
    if fault.body is not None:
        return Response(fault.body, status_code=fault.status or 200, media_type=fault.content_type)
    return None if fault.status is None else simulator(provider).fault(fault)


@contextlib.contextmanager
def serving(api: GatewayApi, *, port: int = 0) -> Iterator[str]:
    """The double under uvicorn on a loopback port (a free one by default), until the block
    ends. Loopback only: it holds test credentials and answers anyone who asks. An answer a
    fault still holds back when the block ends (a sender killed mid-call) is cut after a
    second, not waited for."""
    failed = RuntimeError("the gateway API double did not start")
    with loopback.served(
        api.app(), name="payhooks-gateway-api", grace_s=1, not_started=failed, port=port
    ) as url:
        yield url


__all__ = ["ApiKeys", "Books", "Fault", "GatewayApi", "Order", "serving"]

"""The stage every demo scenario plays on, and how a scenario is judged: what the gateway
sent and the shop's books, so a gateway's own scenarios live beside its simulator."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from payhooks.events import Provider
from payhooks.refunding import sending
from payhooks.service import reconcile
from payhooks.sim.client import Answer, Shop, post
from payhooks.sim.deliveries import Delivery, Purchase
from payhooks.sim.parts import GatewayBooks, Signer

CUSTOMER = "asha@example.com"
GATEWAY_TIMEOUT_S = 5.0  # Razorpay's ack deadline


class Courier:
    """Posts a delivery's exact bytes and headers; retries with a short exponential backoff."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.sent: list[Answer] = []
        self._lock = threading.Lock()

    def deliver(
        self, delivery: Delivery, *, timeout: float = GATEWAY_TIMEOUT_S, attempts: int = 6
    ) -> list[Answer]:
        answers: list[Answer] = []
        for attempt in range(attempts):
            answers.append(self._post(delivery, timeout))
            if not answers[-1].retryable:
                break
            time.sleep(0.1 * 2**attempt)
        return answers

    def _post(self, delivery: Delivery, timeout: float) -> Answer:
        answer = post(self.client, delivery, timeout=timeout)
        with self._lock:
            self.sent.append(answer)
        return answer


@dataclass(slots=True, kw_only=True)
class Stage:
    merchant: Shop
    courier: Courier
    gateway: Signer
    database_url: str
    books: GatewayBooks
    reconcile: Callable[[], reconcile.Tally] = reconcile.Tally
    refund: Callable[[], sending.Tally] = sending.Tally
    """One pass of the refund sender, the double-payment policy on (as the demo's worker)."""
    captured: list[tuple[Provider, str]] = field(default_factory=list)

    def vouch(self, buy: Purchase, payment_id: str) -> str:
        """The gateway took this customer's money: the shop must never lose the payment."""
        self.captured.append((buy.provider, payment_id))
        return payment_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    name: str
    answers: tuple[Answer, ...]
    ok: bool
    detail: str


def result(
    name: str, runs: Sequence[Sequence[Answer]], checks: Sequence[tuple[bool, str]]
) -> Result:
    answers = tuple(a for run in runs for a in run)
    failed = [text for ok, text in checks if not ok]
    detail = "; ".join(failed) if failed else checks[-1][1]
    return Result(name=name, answers=answers, ok=not failed, detail=detail)


def finals(*runs: Sequence[Answer]) -> list[str]:
    return [run[-1].outcome for run in runs]


def one_order(stage: Stage, buy: Purchase, payment_id: str | None = None) -> tuple[bool, str]:
    found = stage.merchant.orders(buy.cart_id)
    if len(found) != 1:
        return False, f"{len(found)} orders for cart {buy.cart_id}"
    if payment_id is not None and found[0]["payment_id"] != payment_id:
        return False, f"order paid by {found[0]['payment_id']}, expected {payment_id}"
    return True, "1 order"


def status(stage: Stage, provider: Provider, payment_id: str, expected: str) -> tuple[bool, str]:
    found = stage.merchant.payment(provider, payment_id)
    state = found["status"] if found else "missing"
    return state == expected, f"{payment_id} is {state}, expected {expected}"


def expect(got: list[str], expected: list[str]) -> tuple[bool, str]:
    return got == expected, f"answers {got}, expected {expected}"

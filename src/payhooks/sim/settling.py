"""The storm's settlements: once every story is delivered, each gateway that documents
settlements pays out what it captured (``GatewayApi.pay_out``), but a share it keeps back
(``StormOptions.held_rate``); its settlement webhooks go to the deployment, twice each (a
gateway's retry); then the deployment fetches the reports and reviews (the storm's ``settle``
step, which reads back what it recorded) and two invariants are checked: every captured
payment is settled or flagged (a kept-back one flagged, never settled), and each payout's
total, as recorded, equals the sum of its recorded lines and what the gateway paid out."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import httpx

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.sim.client import Answer, post
from payhooks.sim.deliveries import Delivery
from payhooks.sim.gateway_api import GatewayApi
from payhooks.sim.gateways import simulator
from payhooks.sim.parts import Payout, Signer, StormOptions, Story


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """What the deployment recorded, as the storm checks it: the payments a settled payout's
    line names, those flagged unsettled, and each payout's total as recorded (None: not
    stated) beside what its recorded lines add up to."""

    settled: frozenset[str]
    flagged: frozenset[str]
    payouts: Mapping[str, tuple[int | None, int]]


Settle = Callable[[], Recorded]
"""The deployment's fetch and review, and what it then holds (an in-process storm's)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PaidOut:
    """What the gateways did: their payouts, the payments they kept back, and how the
    deployment answered each settlement webhook."""

    payouts: list[Payout]
    held: frozenset[str]
    answers: list[Answer]


def pay_out(
    books: GatewayApi,
    stories: Sequence[Story],
    options: StormOptions,
    rng: random.Random,
    gateway: Signer,
    client: httpx.Client,
) -> PaidOut:
    """Each settling gateway's payout, its webhook delivered twice to the deployment."""
    held = frozenset(
        payment for story in _settling(stories) for payment in story.captured
        if rng.random() < options.held_rate
    )  # fmt: skip
    payouts = [
        made for provider in settling_gateways()
        if (made := books.pay_out(provider, held=held)) is not None
    ]  # fmt: skip
    answers = [post(client, _webhook(gateway, made)) for made in payouts for _ in range(2)]
    return PaidOut(payouts=payouts, held=held, answers=answers)


def _webhook(gateway: Signer, made: Payout) -> Delivery:
    deliver = simulator(made.provider).settlement_delivery
    assert deliver is not None  # a settling gateway's (``settling_gateways``)
    return deliver(gateway, made)


def settling_gateways() -> list[Provider]:
    """The gateways that document settlements and whose double pays them out."""
    return [
        p for p, found in GATEWAYS.items()
        if found.settles is not None and simulator(p).settlement_delivery is not None
    ]  # fmt: skip


def _settling(stories: Iterable[Story]) -> list[Story]:
    gateways = set(settling_gateways())
    return [story for story in stories if story.purchase.provider in gateways]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One invariant's verdict: its name, what broke it, and how many things it checked."""

    name: str
    violations: list[str]
    checked: int


def verdicts(stories: Sequence[Story], paid: PaidOut, recorded: Recorded) -> list[Verdict]:
    """The settlement invariants, over what the gateways did and the deployment recorded."""
    return [
        _every_capture_settled_or_flagged(stories, paid, recorded),
        _payouts_add_up(paid, recorded),
    ]


def _every_capture_settled_or_flagged(
    stories: Sequence[Story], paid: PaidOut, recorded: Recorded
) -> Verdict:
    found: list[str] = []
    captured = [(s, p) for s in _settling(stories) for p in s.captured]
    for story, payment in captured:
        where = f"{story.purchase.provider.value} payment {payment}"
        if payment in paid.held and payment in recorded.settled:
            found.append(f"{where} was kept back, yet is recorded settled")
        elif payment in paid.held and payment not in recorded.flagged:
            found.append(f"{where} was kept back and is not flagged unsettled")
        elif payment not in paid.held and payment not in recorded.settled:
            found.append(f"{where} was paid out and is not recorded settled")
    found += [f"a settlement webhook answered {a.outcome}" for a in paid.answers
              if a.outcome not in ("processed", "duplicate")]  # fmt: skip
    return Verdict(
        name="every captured payment settled or flagged", violations=found, checked=len(captured)
    )


def _payouts_add_up(paid: PaidOut, recorded: Recorded) -> Verdict:
    found = []
    for made in paid.payouts:
        stated, lines = recorded.payouts.get(made.settlement_id, (None, 0))
        if stated != made.amount_paise or lines != made.amount_paise:
            found.append(
                f"{made.provider.value} payout {made.settlement_id} of {made.amount_paise} paise"
                f" recorded as {stated}, its lines adding up to {lines}"
            )
    return Verdict(
        name="settlement totals equal the sum of their lines",
        violations=found,
        checked=len(paid.payouts),
    )


__all__ = ["PaidOut", "Recorded", "Settle", "Verdict", "pay_out", "settling_gateways", "verdicts"]

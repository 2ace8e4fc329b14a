"""``payhooks storm``: a gateway simulator that proves the exactly-once promise on any deployment.

It sets up its own products, carts and checkouts through the API, then plays every cart's
payment story the way real gateways deliver it: correctly signed, in each gateway's format,
duplicated, reordered, with failed attempts, double payments and refunds, retrying every
answer that is not 2xx on the gateway's own schedule (time-compressed). At the end it checks
every invariant through the API and exits non-zero if any does not hold.
"""

from __future__ import annotations

import heapq
import itertools
import random
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import httpx
from rich import box
from rich.table import Table

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.service.shop.double_refunds import TAKEN_BACK
from payhooks.sim import settling
from payhooks.sim.client import Answer, Shop, ShopAtGateway, post
from payhooks.sim.consumers import Brokers, Consumed
from payhooks.sim.deliveries import Disputed
from payhooks.sim.errors import StormError
from payhooks.sim.gateway import Delivery, Gateway, Purchase, new_payment_id
from payhooks.sim.gateway_api import GatewayApi
from payhooks.sim.gateways import simulator

# defined below the simulators (sim/parts.py), named here as before
from payhooks.sim.parts import SIGNED as SIGNED
from payhooks.sim.parts import Disputing
from payhooks.sim.parts import Planned as Planned
from payhooks.sim.parts import StormOptions as StormOptions
from payhooks.sim.parts import Story as Story

STORY_SPACING_S = 30.0  # simulated seconds between the events of one story
DISPUTE_AFTER_S = 2_700.0
"""A dispute's reports start this long after the payment's last delivery (simulated): past a
gateway's first three retries of it (Razorpay's 5, 10 and 20 minutes; Cashfree's 2, 10 and 30),
as a real dispute comes days after its capture, so the order it marks exists."""
DISPUTE_LIVES = (
    ("opened", "under_review", "won"),
    ("opened", "action_required", "under_review", "lost"),
    ("opened", "lost"),
)
"""The lives a storm's disputes lead, each report in payhooks' words, the last where it ends."""


# --- planning: pure, seeded ----------------------------------------------------------------


def silent_story(purchase: Purchase, books: GatewayApi) -> Story:
    """Paid at the gateway, never a webhook: the gateway's books are all there is."""
    paid = new_payment_id(purchase.provider)
    books.pay(purchase, paid)
    captured = simulator(purchase.provider).recorded_id(purchase, paid)
    return Story(purchase=purchase, captured=[captured], silent=True)


def plan_story(
    purchase: Purchase,
    gateway: Gateway,
    options: StormOptions,
    rng: random.Random,
    books: GatewayApi | None = None,
) -> Story:
    story = Story(purchase=purchase)
    deliveries = simulator(purchase.provider).story(story, gateway, options, rng)
    if books is not None:
        _booked(books, purchase, story, deliveries)
    offsets = [n * STORY_SPACING_S for n in range(len(deliveries))]
    if rng.random() < options.reorder_rate:
        rng.shuffle(offsets)
    start = rng.uniform(0, options.spread_s)
    disputed = dispute_story(story, gateway, options, rng)
    last = max(offsets, default=0.0) + DISPUTE_AFTER_S
    later = [last + n * STORY_SPACING_S for n in range(len(disputed))]
    if rng.random() < options.reorder_rate:
        rng.shuffle(later)
    for delivery, offset in zip([*deliveries, *disputed], [*offsets, *later], strict=True):
        copies = (
            1
            + (rng.random() < options.duplicate_rate)
            + (rng.random() < options.duplicate_rate / 3)
        )
        story.planned.append(
            Planned(delivery=delivery, purchase=purchase, at_s=start + offset, copies=copies)
        )
    return story


def dispute_story(
    story: Story, gateway: Gateway, options: StormOptions, rng: random.Random
) -> list[Delivery]:
    """Now and then (``dispute_rate``), a dispute of the story's first captured payment, at a
    gateway whose simulator sends disputes: its reports in the order the gateway made them,
    each one's time later than the last's; where it must end is noted on the story."""
    build = simulator(story.purchase.provider).dispute_delivery
    if build is None or not story.captured or rng.random() >= options.dispute_rate:
        return []
    buy = story.purchase
    life = rng.choice(DISPUTE_LIVES)
    dispute_id = _dispute_id(buy.provider)
    told = [
        Disputed(what=what, dispute_id=dispute_id, payment_id=story.captured[0],
                 reference=buy.reference, amount_paise=buy.amount_paise,
                 respond_by=gateway.now + 7 * 86_400, reported_at=gateway.now + 3_600 * (n + 1))
        for n, what in enumerate(life)
    ]  # fmt: skip
    reports = [build(gateway, report) for report in told]
    story.disputes.append(Disputing(dispute_id=dispute_id, payment_id=story.captured[0],
                                    amount_paise=buy.amount_paise, ends=life[-1]))  # fmt: skip
    return reports


def _dispute_id(provider: Provider) -> str:
    """An id shaped as the gateway's: Razorpay's ``disp_…``, Cashfree's a number."""
    if provider is Provider.RAZORPAY:
        return "disp_" + secrets.token_hex(7)
    return str(400_000_000 + secrets.randbelow(10**9))


def _booked(books: GatewayApi, purchase: Purchase, story: Story, told: list[Delivery]) -> None:
    """What the gateway knows of the story, in its books: each payment captured, less what
    the story refunded (so a refund asked of the gateway later is held to what is left); and
    where the callbacks carry the order as its status API answers it, the one its simulator
    says they leave it as (``Simulator.told_order``)."""
    for payment_id in story.captured:
        books.pay(purchase, payment_id)
    for payment_id, paise in story.refunded_paise.items():
        books.refunded_elsewhere(purchase.provider, payment_id, paise)
    told_order = simulator(purchase.provider).told_order
    if told_order is not None and (order := told_order(told)) is not None:
        books.book(purchase, order)


# --- sending: a time-compressed gateway with its retry schedules ---------------------------


@dataclass(slots=True)
class Tally:
    """What the gateway saw: every HTTP attempt and its answer."""

    attempts: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    gave_up: list[str] = field(default_factory=list)
    parked: list[str] = field(default_factory=list)
    acknowledged: set[tuple[str, str]] = field(default_factory=set)
    by_url: Counter[str] = field(default_factory=Counter)
    """HTTP attempts per deployment URL."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, answer: Answer, delivery: Delivery, url: str = "") -> None:
        with self.lock:
            self.attempts += 1
            self.answers[answer.outcome] += 1
            self.by_url[url] += 1
            if answer.outcome == "parked":
                self.parked.append(delivery.label)
            if answer.event_id and answer.acknowledged:
                self.acknowledged.add((delivery.provider.value, answer.event_id))


@dataclass(order=True, slots=True)
class _Send:
    due: float
    seq: int
    attempt: int = field(compare=False)
    delivery: Delivery = field(compare=False)
    lane: int = field(default=0, compare=False)
    """Where the first attempt goes among the URLs; each retry goes to the next one."""


def base_urls(url: str | Sequence[str]) -> tuple[str, ...]:
    """One deployment URL, or several (hosts behind no balancer): at least one."""
    urls = (url,) if isinstance(url, str) else tuple(url)
    if not urls:
        raise ValueError("the storm needs at least one URL")
    return urls


class Gatekeeper:
    """Sends due deliveries from several threads; a failed attempt is re-queued on the
    provider's schedule (its simulator's ``retry_schedule``), scaled by ``time_scale``
    (simulated seconds per real second).

    Given several URLs, first attempts go round-robin and each retry goes to the next URL,
    as a balancer without health checks would: a host that is down is never tried twice in
    a row for one delivery."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        options: StormOptions,
        on_attempt: Callable[[bool], None] = lambda _: None,
    ) -> None:
        self.urls = base_urls(base_url)
        self.options = options
        self.on_attempt = on_attempt
        self.tally = Tally()
        self._heap: list[_Send] = []
        self._seq = itertools.count()
        self._busy = 0
        self._cond = threading.Condition()

    def run(self, planned: list[Planned]) -> Tally:
        start = time.monotonic()
        for item in planned:
            for _ in range(item.copies):
                due = start + item.at_s / self.options.time_scale
                seq = next(self._seq)
                heapq.heappush(self._heap, _Send(due, seq, 0, item.delivery, seq % len(self.urls)))
        threads = [threading.Thread(target=self._work) for _ in range(self.options.concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return self.tally

    def _work(self) -> None:
        timeout = self.options.request_timeout_s
        clients = [httpx.Client(base_url=url, timeout=timeout) for url in self.urls]
        try:
            while (send := self._next()) is not None:
                answer = Answer(outcome="error")
                lane = (send.lane + send.attempt) % len(self.urls)
                try:
                    answer = post(clients[lane], send.delivery)
                    self.tally.record(answer, send.delivery, self.urls[lane])
                    self.on_attempt(False)
                finally:
                    self._done(send, answer)
        finally:
            for client in clients:
                client.close()

    def _next(self) -> _Send | None:
        with self._cond:
            while True:
                if not self._heap:
                    if self._busy == 0:
                        return None
                    self._cond.wait()
                    continue
                wait = self._heap[0].due - time.monotonic()
                if wait <= 0:
                    self._busy += 1
                    return heapq.heappop(self._heap)
                self._cond.wait(timeout=wait)

    def _done(self, send: _Send, answer: Answer) -> None:
        schedule = simulator(send.delivery.provider).retry_schedule
        with self._cond:
            self._busy -= 1
            if not answer.acknowledged:
                if send.attempt < len(schedule):
                    due = time.monotonic() + schedule[send.attempt] / self.options.time_scale
                    retry = _Send(due, next(self._seq), send.attempt + 1, send.delivery, send.lane)
                    heapq.heappush(self._heap, retry)
                    self.tally.retries += 1
                    self.on_attempt(True)
                else:
                    self.tally.gave_up.append(f"{send.delivery.label}: last answer {answer}")
            self._cond.notify_all()


# --- the merchant's side: setup and verification through the API ---------------------------


def stock_up(shop: Shop, run: str, options: StormOptions) -> list[str]:
    skus = [f"STORM-{run}-{n}" for n in range(options.skus)]
    for sku in skus:
        shop.add_product(sku, f"storm {sku}", 10_000 + 100 * len(sku), options.stock_per_sku)
    return skus


def open_cart(shop: Shop, skus: list[str], provider: Provider, rng: random.Random) -> Purchase:
    items = {
        sku: rng.randint(1, 2) for sku in rng.sample(skus, k=min(len(skus), rng.randint(1, 2)))
    }
    return shop.buy(provider, items, "storm@example.com")


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    name: str
    violations: list[str]
    checked: int

    @property
    def held(self) -> bool:
        return not self.violations


@dataclass(frozen=True, slots=True, kw_only=True)
class CartState:
    story: Story
    status: str
    orders: list[dict[str, object]]
    payments: dict[str, dict[str, object] | None]
    disputes: dict[str, dict[str, object]] = field(default_factory=dict)
    """Each of the story's disputes as the deployment holds it (``/api/disputes``)."""


def read_cart(shop: Shop, story: Story) -> CartState:
    buy = story.purchase
    cart = shop.get(f"/api/carts/{buy.cart_id}")
    orders = shop.get("/api/orders", cart_id=buy.cart_id)["orders"]
    payments: dict[str, dict[str, object] | None] = {}
    for payment_id in story.captured:
        payments[payment_id] = shop.payment(buy.provider, payment_id)
    disputes = {d.dispute_id: shop.dispute(buy.provider, d.dispute_id) or {}
                for d in story.disputes}  # fmt: skip
    return CartState(
        story=story,
        status=str(cart["status"]),
        orders=list(orders),
        payments=payments,
        disputes=disputes,
    )


def one_order_per_paid_cart(states: list[CartState]) -> Check:
    bad = [
        f"cart {s.story.purchase.cart_id}: {s.status} with {len(s.orders)} order(s)"
        for s in states
        if len(s.orders) != (1 if s.status == "paid" else 0)
    ]
    return Check(name="one order per paid cart", violations=bad, checked=len(states))


def every_capture_accounted_for(states: list[CartState]) -> Check:
    """A captured payment pays the cart's order, is refunded, or is flagged for refund
    because another payment of the same story paid the order (or was, until lost disputes
    took it back whole: ``taken_back_by_dispute``, its refund owed no more). A flag with no
    order (an amount mismatch on a correct cart, say) is a violation."""
    bad: list[str] = []
    for state in states:
        paid_by = state.orders[0]["payment_id"] if state.orders else None
        for payment_id, payment in state.payments.items():
            if payment is None:
                bad.append(f"{state.story.purchase.provider} payment {payment_id} is unknown")
            elif not (
                payment_id == paid_by
                or payment["status"] == "refunded"
                or (_owed_once(payment) and paid_by in state.payments)
            ):
                bad.append(
                    f"payment {payment_id} ({payment['status']}, flags "
                    f"{payment['flags']}) neither paid the order nor was refunded"
                )
    return Check(
        name="every captured payment: an order or a refund",
        violations=bad,
        checked=sum(len(s.payments) for s in states),
    )


def every_paid_story_has_its_order(states: list[CartState]) -> Check:
    """A cart the gateway captured a payment for, not refunded, ends paid with one order,
    paid by one of the payments the gateway captured for it."""
    bad: list[str] = []
    owed = [s for s in states if set(s.story.captured) - set(s.story.refunded)]
    for state in owed:
        paid_by = state.orders[0]["payment_id"] if state.orders else None
        if state.status != "paid" or paid_by not in state.story.captured:
            bad.append(
                f"cart {state.story.purchase.cart_id} was paid for but is {state.status} "
                f"(order paid by {paid_by})"
            )
    return Check(name="every cart paid for has its order", violations=bad, checked=len(owed))


def refunds_recorded(states: list[CartState]) -> Check:
    bad = [
        f"payment {pid} refunded by the gateway is {(s.payments.get(pid) or {}).get('status')}"
        for s in states
        for pid in s.story.refunded + s.story.partly_refunded
        if (s.payments.get(pid) or {}).get("status") != "refunded"
    ]
    return Check(
        name="every refund recorded",
        violations=bad,
        checked=sum(len(s.story.refunded) + len(s.story.partly_refunded) for s in states),
    )


def disputes_applied_once_in_order(states: list[CartState]) -> Check:
    """Each dispute ends where its last report put it, whatever order its reports came in and
    however many copies of each: decided as the gateway decided it last, and what a lost one
    took back counted once (its amount, not twice it)."""
    bad: list[str] = []
    for state in states:
        for told in state.story.disputes:
            held = state.disputes.get(told.dispute_id) or {}
            lost = told.amount_paise if told.ends == "lost" else 0
            if (held.get("status"), held.get("lost_paise")) != (told.ends, lost):
                bad.append(
                    f"dispute {told.dispute_id} ended {told.ends} (taken back {lost}) but is "
                    f"{held.get('status')} (taken back {held.get('lost_paise')})"
                )
    return Check(
        name="every dispute applied once and in order",
        violations=bad,
        checked=sum(len(s.story.disputes) for s in states),
    )


def disputed_orders_marked(states: list[CartState]) -> Check:
    """The order a disputed payment paid is marked with where its dispute ended."""
    bad: list[str] = []
    checked = 0
    for state in states:
        for told in state.story.disputes:
            paid = [o for o in state.orders if o["payment_id"] == told.payment_id]
            checked += len(paid)
            bad += [
                f"order {o.get('order_id')} is marked {o.get('dispute')} ({o.get('dispute_id')}), "
                f"its dispute {told.dispute_id} ended {told.ends}"
                for o in paid
                if (o.get("dispute"), o.get("dispute_id")) != (told.ends, told.dispute_id)
            ]
    return Check(name="every disputed order marked as its dispute ended", violations=bad,
                 checked=checked)  # fmt: skip


def stock_moved_once_per_order(
    shop: Shop, skus: list[str], states: list[CartState], options: StormOptions
) -> Check:
    sold: Counter[str] = Counter()
    for state in states:
        if state.orders and state.orders[0]["status"] == "confirmed":
            sold.update(state.story.purchase.items)
    bad = []
    for sku in skus:
        stock = shop.get(f"/api/products/{sku}")["stock"]
        if stock != options.stock_per_sku - sold[sku]:
            bad.append(f"{sku}: stock {stock}, expected {options.stock_per_sku - sold[sku]}")
    return Check(name="stock moved once per order", violations=bad, checked=len(skus))


def delivery_checks(tally: Tally) -> list[Check]:
    return [
        Check(
            name="nothing parked that should not be",
            violations=tally.parked,
            checked=tally.attempts,
        ),
        Check(
            name="every delivery acknowledged within the retry schedule",
            violations=tally.gave_up,
            checked=tally.attempts,
        ),
    ]


def batched(items: list[Story], size: int) -> Iterator[list[Story]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --- the whole storm ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StormResult:
    carts: int
    planned_events: int
    tally: Tally
    checks: list[Check]
    orders: Counter[str]
    seconds: float
    silent: int = 0
    brokers: Brokers | None = None
    consumed: list[Consumed] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(check.held for check in self.checks)


Progress = Callable[[str, int, int | None], None]
"""``progress(phase, advance, total)``: how the storm reports while it runs."""


def run_storm(
    base_url: str | Sequence[str],
    token: str,
    gateway: Gateway,
    options: StormOptions,
    progress: Progress = lambda *_: None,
    *,
    books: GatewayApi | None = None,
    reconcile: Callable[[], object] = lambda: None,
    brokers: Brokers | None = None,
    settle: settling.Settle | None = None,
) -> StormResult:
    """The storm against one deployment URL, or several hosts of one deployment: deliveries
    spread over them (``Gatekeeper``); setup and verification through the first.

    ``books``: the gateways' status API double the deployment reconciles against (needed for
    ``silent_rate``); ``reconcile``: asks for a pass (the deployment's worker runs its own
    anyway), called while waiting for the silent carts; ``settle``: the deployment's fetch of
    the settlement reports from ``books`` and what it then holds: with it, the gateways pay
    out once the stories are delivered, and the settlement invariants are checked
    (``sim.settling``). ``brokers``: the brokers the deployment relays payment events to,
    with a consumer on each and the faults to inject while delivering; every paid cart's
    capture must then be applied once on each."""
    if brokers is None:
        return _storm(base_url, token, gateway, options, progress, books, reconcile, settle, None)
    brokers.start()
    try:
        return _storm(
            base_url, token, gateway, options, progress, books, reconcile, settle, brokers
        )
    finally:
        brokers.stop()


def _storm(
    base_url: str | Sequence[str],
    token: str,
    gateway: Gateway,
    options: StormOptions,
    progress: Progress,
    books: GatewayApi | None,
    reconcile: Callable[[], object],
    settle: settling.Settle | None,
    brokers: Brokers | None,
) -> StormResult:
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(options.seed)
    run = secrets.token_hex(4)  # never from the seed: a replayed storm must not collide
    started = time.monotonic()
    headers = {"authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=base_urls(base_url)[0], headers=headers, timeout=30) as client,
        ThreadPoolExecutor(options.concurrency) as pool,
    ):
        books = books or GatewayApi()
        shop = ShopAtGateway(client, StormError, books)
        skus = stock_up(shop, run, options)
        seeds = [(rng.choice(options.providers), random.Random(rng.getrandbits(64)))
                 for _ in range(options.carts)]  # fmt: skip
        progress("setting up carts", 0, options.carts)
        purchases = list(pool.map(lambda seed: _opened(shop, skus, seed, progress), seeds))
        stories = [
            silent_story(p, books)
            if rng.random() < options.silent_rate
            else plan_story(p, gateway, options, rng, books)
            for p in purchases
        ]
        tally = _deliver(base_url, stories, options, progress)
        if brokers is not None:
            brokers.calm()
        _await_reconciliation(shop, stories, options, reconcile, progress, books)
        progress("verifying", 0, len(stories))
        states = list(pool.map(lambda story: _read(shop, story, progress), stories))
        checks = _checks(shop, skus, states, tally, options)
        if options.refunds_doubles:
            checks.append(double_payments_refunded_once(states, books))
        if settle is not None:
            paid = settling.pay_out(books, stories, options, rng, gateway, client)
            checks += [Check(name=v.name, violations=v.violations, checked=v.checked)
                       for v in settling.verdicts(stories, paid, settle())]  # fmt: skip
    consumed: list[Consumed] = []
    if brokers is not None:
        progress("awaiting the brokers' consumers", 0, None)
        expected = paid_captures(states)
        consumed = brokers.wait_for(set(expected))
        checks += [check for found in consumed for check in consumed_once(found, expected)]
    return StormResult(
        carts=len(stories),
        planned_events=sum(len(story.planned) for story in stories),
        tally=tally,
        checks=checks,
        orders=Counter(str(s.orders[0]["status"]) for s in states if s.orders),
        seconds=time.monotonic() - started,
        silent=sum(story.silent for story in stories),
        brokers=brokers,
        consumed=consumed,
    )


def paid_captures(states: list[CartState]) -> dict[str, str]:
    """Each paid cart's capture as the relay publishes it: its message id (the payment and
    kind, ``payhooks.intake.relaying.message_id``), with the cart's order."""
    return {
        f"{s.story.purchase.provider.value}:{s.orders[0]['payment_id']}:payment_captured": str(
            s.orders[0]["order_id"]
        )
        for s in states
        if s.orders
    }


def consumed_once(found: Consumed, expected: dict[str, str]) -> list[Check]:
    """On one broker: every paid cart's capture applied once, naming the cart's order; and no
    event at all applied twice."""
    missed = [
        f"{found.broker}: {ident} applied {len(found.applied.get(ident, []))} times"
        if len(found.applied.get(ident, [])) != 1
        else f"{found.broker}: {ident} named order {found.applied[ident][0]}, not {order}"
        for ident, order in expected.items()
        if found.applied.get(ident, []) != [order]
    ]
    twice = [f"{found.broker}: {ident} applied {len(orders)} times"
             for ident, orders in found.applied.items() if len(orders) > 1]  # fmt: skip
    return [
        Check(
            name=f"every paid cart's capture applied once via {found.broker}",
            violations=missed,
            checked=len(expected),
        ),
        Check(
            name=f"no event applied twice via {found.broker}",
            violations=twice,
            checked=len(found.applied),
        ),
    ]


def _deliver(
    base_url: str | Sequence[str], stories: list[Story], options: StormOptions, progress: Progress
) -> Tally:
    planned = [item for story in stories for item in story.planned]
    total = [sum(item.copies for item in planned)]
    progress("delivering", 0, total[0])

    def attempted(retry: bool) -> None:
        total[0] += retry
        progress("delivering", 0 if retry else 1, total[0] if retry else None)

    return Gatekeeper(base_url, options, attempted).run(planned)


def _await_reconciliation(
    shop: Shop,
    stories: list[Story],
    options: StormOptions,
    reconcile: Callable[[], object],
    progress: Progress,
    books: GatewayApi,
) -> None:
    """Until every silent cart is paid, and every cart of a gateway whose callbacks its API
    must confirm (of every gateway, ``recovers_lost``), and (``refunds_doubles``) every
    double payment is refunded; or the wait is over (the checks then say which not)."""
    confirmed = {p for p, found in GATEWAYS.items() if found.confirmed_by_api}
    owed = [
        s for s in stories
        if s.silent or (
            (options.recovers_lost or s.purchase.provider in confirmed)
            and set(s.captured) - set(s.refunded))
    ]  # fmt: skip
    paid_for = {id(s) for s in owed}
    doubles = {id(s) for s in stories if options.refunds_doubles and len(s.captured) > 1}
    waiting = [s for s in stories if id(s) in paid_for | doubles]
    deadline = time.monotonic() + options.reconcile_wait_s
    progress("awaiting reconciliation", 0, len(waiting))
    while waiting and time.monotonic() < deadline:
        reconcile()
        done = {
            id(s) for s in waiting
            if (id(s) not in paid_for or _cart_status(shop, s) == "paid")
            and (id(s) not in doubles or _doubles_refunded(read_cart(shop, s), books))
        }  # fmt: skip
        progress("awaiting reconciliation", len(done), None)
        waiting = [s for s in waiting if id(s) not in done]
        if waiting:
            time.sleep(0.5)


def owed_refunds(state: CartState) -> set[str]:
    """The payments of a cart the double-payment policy owes a refund: flagged a double
    payment of the cart, and not refunded, in full or in part, by the story itself (a
    person refunded it at the gateway's dashboard: what is left is theirs to decide)."""
    story = state.story
    own = set(story.refunded) | set(story.partly_refunded)
    return {pid for pid, payment in state.payments.items()
            if pid not in own and "duplicate_payment" in _flags(payment)
            and TAKEN_BACK not in _flags(payment)}  # fmt: skip


def _owed_once(payment: dict[str, object]) -> bool:
    """Flagged for a refund, or flagged once and taken back by lost disputes since."""
    return bool(payment["needs_refund"]) or TAKEN_BACK in _flags(payment)


def _flags(payment: dict[str, object] | None) -> list[object]:
    flags = (payment or {}).get("flags")
    return flags if isinstance(flags, list) else []


def refunds_made(state: CartState, books: GatewayApi) -> int:
    """Refunds a caller made at the gateway for the cart's payments (the story's own are
    not among them). Per cart, not per payment: Cashfree refunds an order, and its double
    counts the refund against the order's first payment."""
    provider = state.story.purchase.provider
    return sum(books.money.made[(provider, pid)] for pid in state.story.captured)


def _unrecorded(state: CartState) -> list[str]:
    """The payments owed a refund the deployment does not yet record refunded."""
    return sorted(
        pid
        for pid in owed_refunds(state)
        if (state.payments[pid] or {}).get("status") != "refunded"
    )


def _doubles_refunded(state: CartState, books: GatewayApi) -> bool:
    known = all(payment is not None for payment in state.payments.values())
    made = refunds_made(state, books) >= len(owed_refunds(state))
    return known and made and not _unrecorded(state)


def double_payments_refunded_once(states: list[CartState], books: GatewayApi) -> Check:
    """Every double payment refunded once by the deployment, and recorded refunded, and no
    other payment at all: per cart, the refunds made equal the payments owed one, and no key
    was used twice."""
    bad = [
        f"cart {s.story.purchase.cart_id}: {refunds_made(s, books)} refund(s) made for "
        f"{sorted(owed_refunds(s))} owed"
        for s in states
        if refunds_made(s, books) != len(owed_refunds(s))
    ]
    bad += [f"payment {pid} refunded at the gateway is not recorded refunded"
            for s in states for pid in _unrecorded(s)]  # fmt: skip
    bad += [f"{provider} key {key} refunded {n} times"
            for (provider, key), n in books.money.under.items() if n != 1]  # fmt: skip
    return Check(
        name="every double payment refunded once, no other",
        violations=bad,
        checked=sum(len(s.payments) for s in states),
    )


def _cart_status(shop: Shop, story: Story) -> str:
    return str(shop.get(f"/api/carts/{story.purchase.cart_id}")["status"])


def _checks(
    shop: Shop, skus: list[str], states: list[CartState], tally: Tally, options: StormOptions
) -> list[Check]:
    return [
        one_order_per_paid_cart(states),
        every_paid_story_has_its_order(states),
        stock_moved_once_per_order(shop, skus, states, options),
        every_capture_accounted_for(states),
        refunds_recorded(states),
        disputes_applied_once_in_order(states),
        disputed_orders_marked(states),
        *delivery_checks(tally),
    ]


def _opened(
    shop: Shop, skus: list[str], seed: tuple[Provider, random.Random], progress: Progress
) -> Purchase:
    purchase = open_cart(shop, skus, seed[0], seed[1])
    progress("setting up carts", 1, None)
    return purchase


def _read(shop: Shop, story: Story, progress: Progress) -> CartState:
    state = read_cart(shop, story)
    progress("verifying", 1, None)
    return state


def _brokers_table(result: StormResult) -> list[Table]:
    """What each broker's consumer received and applied, and the faults the storm injected."""
    if result.brokers is None:
        return []
    table = Table("payment events", "", box=box.SIMPLE, title="Brokers")
    crashes = {c.options.broker: c for c in result.brokers.consumers}
    for found in result.consumed:
        applied = sum(len(orders) for orders in found.applied.values())
        consumer = crashes[found.broker]
        table.add_row(f"{found.broker}: applied", f"{applied:,}")
        table.add_row("  deliveries received", f"{found.received:,}")
        table.add_row("  dropped by the inbox (seen before)", f"{found.received - applied:,}")
        table.add_row("  consumer crashes between commit and ack", f"{consumer.crashes:,}")
        table.add_row("  consumer restarts (broker away)", f"{consumer.restarts:,}")
    for fault in result.brokers.faults:
        table.add_row(fault.name, f"{fault.times:,}")
    return [table]


def report(result: StormResult) -> list[Table]:
    """What was sent, what the deployment did, what reached the brokers' consumers when it
    relays to them, and each invariant."""
    sent = Table("deliveries", "", box=box.SIMPLE, title="Gateway")
    sent.add_row("carts", f"{result.carts:,}")
    sent.add_row("logical events", f"{result.planned_events:,}")
    sent.add_row("HTTP attempts", f"{result.tally.attempts:,}")
    sent.add_row("retries on the gateway's schedule", f"{result.tally.retries:,}")
    for answer, count in result.tally.answers.most_common():
        sent.add_row(f"  answered {answer}", f"{count:,}")
    sent.add_row("duplicates suppressed", f"{result.tally.answers['duplicate']:,}")
    if len(result.tally.by_url) > 1:
        for url, count in sorted(result.tally.by_url.items()):
            sent.add_row(f"  attempts to {url}", f"{count:,}")
    sent.add_row("carts whose webhooks were never sent", f"{result.silent:,}")
    sent.add_row("orders", ", ".join(f"{n:,} {status}" for status, n in result.orders.items()))
    sent.add_row("elapsed", f"{result.seconds:.1f} s")
    checks = Table("invariant", "", "checked", "violations", box=box.SIMPLE, title="Invariants")
    for check in result.checks:
        mark = "[green]✓ held[/]" if check.held else "[red]✗ violated[/]"
        checks.add_row(check.name, mark, f"{check.checked:,}", str(len(check.violations)))
    tables = [sent, *_brokers_table(result), checks]
    violations = [v for check in result.checks for v in check.violations]
    if violations:
        detail = Table("first violations", box=box.SIMPLE)
        for violation in violations[:20]:
            detail.add_row(violation)
        tables.append(detail)
    return tables

"""What an unauthenticated client can grow: metric labels, shared database reads, echoed text."""

from __future__ import annotations

import asyncio
import threading

import pytest

from payhooks.intake.answers import STATUS_OF_ERROR, clipped
from payhooks.intake.ingest import Outcome
from payhooks.plumbing.errors import DatabaseUnavailable
from payhooks.service.metrics import OUTCOME_LABELS, PROVIDER_LABELS, Metrics, Shared
from payhooks.service.web import bearer_matches


def label_values(metrics: Metrics, label: str) -> set[str]:
    return {
        sample.labels[label]
        for family in metrics.registry.collect()
        for sample in family.samples
        if label in sample.labels
    }


def test_a_provider_outside_the_known_set_is_counted_as_unknown():
    metrics = Metrics()
    metrics.answered("x" * 10_000, "provider_not_configured", 0.001)
    assert label_values(metrics, "provider") == {"unknown"}


def test_an_outcome_outside_the_known_set_is_counted_as_other():
    metrics = Metrics()
    metrics.answered("razorpay", "something new", 0.001)
    assert label_values(metrics, "outcome") == {"other"}


def test_every_answer_the_web_layer_gives_has_its_own_outcome_label():
    codes = {code for _, _, code in STATUS_OF_ERROR} | {o.value for o in Outcome}
    assert codes | {"internal_error"} <= OUTCOME_LABELS


def test_the_provider_labels_are_the_known_providers_and_unknown():
    known = ["cashfree", "juspay", "payu", "phonepe", "razorpay", "unknown"]
    assert sorted(PROVIDER_LABELS) == known


class StoppedClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Reads:
    """A database read that counts its calls and can be held until released."""

    def __init__(self, result: object = "fresh", *, held: bool = False) -> None:
        self.calls = 0
        self.result = result
        self.entered = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()

    def __call__(self) -> object:
        self.calls += 1
        self.entered.set()
        self.release.wait(10)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_concurrent_askers_share_one_read():
    read = Reads(held=True)
    shared = Shared(read, ttl_seconds=5, clock=StoppedClock())

    async def ask_together() -> list[object]:
        askers = [asyncio.ensure_future(shared.get()) for _ in range(20)]
        await asyncio.to_thread(read.entered.wait, 10)
        read.release.set()
        return list(await asyncio.gather(*askers))

    answers = asyncio.run(ask_together())
    assert (read.calls, set(answers)) == (1, {"fresh"})


def test_a_read_is_reused_until_it_is_older_than_its_ttl():
    read, clock = Reads(), StoppedClock()
    shared = Shared(read, ttl_seconds=5, clock=clock)

    async def ask_at(*moments: float) -> None:
        for moment in moments:
            clock.now = moment
            await shared.get()

    asyncio.run(ask_at(100, 104.9, 105))
    assert read.calls == 2


def test_a_failed_read_is_remembered_like_a_good_one():
    read = Reads(DatabaseUnavailable("down"))
    shared = Shared(read, ttl_seconds=5, clock=StoppedClock())

    async def ask_twice() -> None:
        for _ in range(2):
            with pytest.raises(DatabaseUnavailable):
                await shared.get()

    asyncio.run(ask_twice())
    assert read.calls == 1


def test_the_read_runs_off_the_event_loop():
    def on_loop() -> bool:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    shared = Shared(on_loop, ttl_seconds=5, clock=StoppedClock())
    assert asyncio.run(shared.get()) is False


def test_long_text_is_clipped_to_the_limit():
    assert len(clipped("x" * 10_000, 200)) == 200


def test_short_text_is_not_clipped():
    assert clipped("provider 'stripe' is not configured", 200) == (
        "provider 'stripe' is not configured"
    )


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("Bearer right", True),
        ("bearer right", True),
        ("Bearer wrong", False),
        ("Bearer ", False),
        ("right", False),
        (None, False),
        ("Bearer righté", False),
    ],
)
def test_bearer_matches_only_the_exact_token(header, expected):
    assert bearer_matches(header, "right") is expected

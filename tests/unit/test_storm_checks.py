"""The storm's verdicts: each check fails on the state it exists to catch."""

from __future__ import annotations

from payhooks.events import Provider
from payhooks.sim.gateway import Purchase
from payhooks.sim.parts import Disputing
from payhooks.sim.storm import (
    CartState,
    Story,
    disputed_orders_marked,
    disputes_applied_once_in_order,
    every_capture_accounted_for,
    every_paid_story_has_its_order,
    one_order_per_paid_cart,
    owed_refunds,
    refunds_recorded,
)

BUY = Purchase(
    provider=Provider.RAZORPAY,
    cart_id="cart_1",
    reference="order_1",
    amount_paise=100,
    items={"SKU": 1},
)


def state(status="paid", orders=("pay_1",), captured=("pay_1",), refunded=(), **payments):
    story = Story(purchase=BUY, captured=list(captured), refunded=list(refunded))
    found = {pid: {"status": "captured", "needs_refund": False, "flags": []} for pid in captured}
    found.update(payments)
    return CartState(
        story=story,
        status=status,
        orders=[{"payment_id": p, "status": "confirmed"} for p in orders],
        payments=found,
    )


def test_sound_cart_passes_every_check():
    states = [state()]
    assert every_capture_accounted_for(states).held
    assert every_paid_story_has_its_order(states).held
    assert one_order_per_paid_cart(states).held


def test_capture_flagged_for_refund_without_any_order_is_a_violation():
    flagged = {"status": "captured", "needs_refund": True, "flags": ["amount_mismatch"]}
    states = [state(status="open", orders=(), pay_1=flagged)]
    assert not every_capture_accounted_for(states).held
    assert not every_paid_story_has_its_order(states).held


def test_second_payment_flagged_while_the_first_paid_the_order_is_accounted_for():
    flagged = {"status": "captured", "needs_refund": True, "flags": ["duplicate_payment"]}
    states = [state(captured=("pay_1", "pay_2"), pay_2=flagged)]
    assert every_capture_accounted_for(states).held


def test_a_second_payment_lost_disputes_took_back_is_accounted_for_and_owed_no_refund():
    """Flagged a double payment, then taken back whole by lost disputes: its flag is cleared
    (docs/console.md: it needs no refund), so neither check may call it unaccounted for, nor
    count a refund owed for it."""
    taken = {"status": "captured", "needs_refund": False,
             "flags": ["duplicate_payment", "taken_back_by_dispute"]}  # fmt: skip
    cart = state(captured=("pay_1", "pay_2"), pay_2=taken)
    assert every_capture_accounted_for([cart]).held
    assert owed_refunds(cart) == set()


def test_unknown_payment_is_a_violation():
    assert not every_capture_accounted_for([state(pay_1=None)]).held


def test_paid_cart_without_order_is_a_violation():
    assert not one_order_per_paid_cart([state(orders=())]).held


def test_cart_whose_only_payment_was_refunded_may_stay_open():
    refunded = {"status": "refunded", "needs_refund": False, "flags": []}
    states = [state(status="open", orders=(), refunded=("pay_1",), pay_1=refunded)]
    assert every_paid_story_has_its_order(states).held
    assert every_capture_accounted_for(states).held


def test_cart_whose_payment_was_partly_refunded_is_still_owed_its_order():
    refunded = {"status": "refunded", "needs_refund": False, "flags": []}
    states = [state(status="open", orders=(), pay_1=refunded)]
    states[0].story.partly_refunded.append("pay_1")
    assert not every_paid_story_has_its_order(states).held


def test_partial_refund_not_recorded_is_a_violation():
    states = [state()]
    states[0].story.partly_refunded.append("pay_1")
    assert not refunds_recorded(states).held


def test_the_storm_command_defaults_are_the_storm_defaults():
    """One default per option: the command's and the library's never drift apart."""
    import inspect
    from dataclasses import fields

    from payhooks.cli.commands import storm
    from payhooks.sim.storm import StormOptions

    defaults = StormOptions()
    parameters = inspect.signature(storm).parameters
    shared = [f.name for f in fields(StormOptions) if f.name in parameters]
    assert len(shared) >= 8
    assert {n: parameters[n].default for n in shared} == {n: getattr(defaults, n) for n in shared}


def disputed(ends: str, held: dict[str, object], order: dict[str, object] | None = None):
    """A cart whose payment's dispute ended ``ends``, held by the deployment as ``held``."""
    found = state()
    found.story.disputes.append(
        Disputing(dispute_id="disp_1", payment_id="pay_1", amount_paise=100, ends=ends)
    )
    found.disputes["disp_1"] = held
    found.orders[0].update(order or {"dispute": ends, "dispute_id": "disp_1"})
    return [found]


def test_a_dispute_held_where_it_ended_passes():
    states = disputed("lost", {"status": "lost", "lost_paise": 100})
    assert disputes_applied_once_in_order(states).held
    assert disputed_orders_marked(states).held


def test_a_dispute_moved_back_by_a_late_report_is_a_violation():
    assert not disputes_applied_once_in_order(disputed("won", {"status": "opened",
                                                               "lost_paise": 0})).held  # fmt: skip


def test_a_loss_counted_twice_is_a_violation():
    states = disputed("lost", {"status": "lost", "lost_paise": 200})
    assert not disputes_applied_once_in_order(states).held


def test_an_order_not_marked_as_its_dispute_ended_is_a_violation():
    states = disputed("won", {"status": "won", "lost_paise": 0}, {"dispute": "under_review"})
    assert not disputed_orders_marked(states).held

"""The admin's "Payment timeline", driven as an operator drives it (a logged-in user, Django's
test client): what they type to the order's story, escaped; its parked deliveries replayed by
the list's action; linked from the records' list and "Webhook health"; guarded like them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from orders.models import Order

import payhooks
from payhooks.django import connection
from payhooks.sim.gateway import bank_reference
from tests.django.conftest import post, records
from tests.django.test_django_admin import CHANGELIST, capture, deliver, shown, viewer  # noqa: F401

TIMELINE = "admin:payhooks_timeline"


@pytest.fixture
def operator(django_db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "unused"))
    return client


def timeline(client: Client, q: str):
    return client.get(reverse(TIMELINE), {"q": q})


def test_a_parked_delivery_is_told_with_its_expectation_and_replayed_from_the_page(
    operator, django_db
):
    payhooks.expect(connection(), "razorpay", "order_tl", 100, "INR", "shop-42")
    assert deliver(capture("order_tl", "evt_tl")) == "parked"  # no such order yet
    page = timeline(operator, "shop-42")
    assert page.status_code == 200
    [item] = page.context["told"]
    story = item["story"]
    assert (story.gateway_order_id, story.expected.amount_paise) == ("order_tl", 100)
    assert [r.event_id for r in story.parked] == ["evt_tl"]
    assert b'value="replay_parked"' in page.content and b"csrfmiddlewaretoken" in page.content
    Order.objects.create(reference="order_tl", amount_paise=100)
    [row] = item["records"]
    replayed = operator.post(
        row["replay_url"],
        {"action": "replay_parked", "_selected_action": "evt_tl", "index": 0},
        follow=True,
    )
    assert shown(replayed) == ["Applied (1): evt_tl"]
    assert records(django_db) == [("razorpay", "evt_tl", "processed")]
    [item] = timeline(operator, "evt_tl").context["told"]
    assert [r.outcome for r in item["story"].records] == ["processed"]
    assert [p.by for p in item["story"].payments] == ["webhook"]


def test_the_page_is_reached_from_the_list_and_from_health(operator, django_db):
    deliver(capture("order_ln", "evt_ln"))
    listed = operator.get(reverse(CHANGELIST)).content.decode()
    assert reverse(TIMELINE) in listed and f"{reverse(TIMELINE)}?q=order_ln" in listed
    assert reverse(TIMELINE) in operator.get(reverse("admin:payhooks_health")).content.decode()


def test_what_the_operator_typed_and_the_stories_text_are_escaped(operator, site):
    typed = "<script>alert(1)</script>"
    page = timeline(operator, typed)
    assert b"<script>alert(1)" not in page.content and b"&lt;script&gt;" in page.content
    assert page.context["told"] == []


def test_viewers_see_the_timeline_without_the_replay_button(viewer, django_db):  # noqa: F811
    deliver(capture("order_vw", "evt_vw"))
    page = timeline(viewer, "order_vw")
    assert page.status_code == 200 and b"evt_vw" in page.content
    assert b'value="replay_parked"' not in page.content


def test_staff_without_the_view_permission_are_refused(django_db):
    user = User.objects.create_user("nobody", is_staff=True)
    client = Client()
    client.force_login(user)
    assert timeline(client, "anything").status_code == 403
    assert Client().get(reverse(TIMELINE)).status_code == 302  # to the login page


def test_a_delivery_over_http_is_found_by_its_payment_id(operator, site, django_db):
    post(site, capture("order_http", "evt_http", payment_id="pay_http0001"))
    [item] = timeline(operator, "pay_http0001").context["told"]
    assert item["found"].matched.value == "payment id"
    assert item["story"].gateway_order_id == "order_http"


def test_a_callback_the_status_api_refuted_says_so_and_why(operator, django_db):
    """A PhonePe callback confirmed by no API: the record and its confirmation as the pass left
    them (``payhooks.confirmations``), told on the page."""
    cursor = connection()
    cursor.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome, merchant_ref,"
        " payload_sha256, body) VALUES ('phonepe', 'cb_forged', 'checkout.order.completed',"
        " 'refuted', 'ph_order_rf', 'x', '\\x00'::bytea)"
    )
    cursor.execute(
        "INSERT INTO payhooks_confirmations (provider, event_id, gateway_order_id, kind, verdict,"
        " detail, attempts) VALUES ('phonepe', 'cb_forged', 'ph_order_rf', 'payment_captured',"
        " 'refuted', 'the status API reports another state', 1)"
    )
    page = timeline(operator, "ph_order_rf")
    assert page.status_code == 200
    text = page.content.decode()
    said = "<strong>refuted\nby the status API</strong>: the status API reports another state"
    assert said in text


def test_a_parked_delivery_settled_by_hand_is_told_with_the_persons_note(operator, django_db):
    """A capture for no order of the shop's, refunded at the gateway: ``payhooks_resolve``
    records it ignored, and the page says so with the note."""
    from payhooks.intake.expectations import resolve

    assert deliver(capture("order_none", "evt_none")) == "parked"  # no such order: never
    resolve(connection(), "razorpay", "evt_none", "not ours: refunded at Razorpay")
    assert records(django_db) == [("razorpay", "evt_none", "ignored")]
    page = timeline(operator, "order_none")
    assert "settled by hand" in page.content.decode()
    assert "not ours: refunded at Razorpay" in page.content.decode()


def test_a_mismatch_settled_by_hand_is_told_after_its_delivery_is_purged(operator, django_db):
    """Its row is all the core has of that payment once the purge took its delivery."""
    from payhooks.django import retention
    from payhooks.intake.expectations import resolve

    payhooks.expect(connection(), "razorpay", "order_mm", 49_900, "INR", "shop-43")
    Order.objects.create(reference="order_mm", amount_paise=49_900)
    assert deliver(capture("order_mm", "evt_mm")) == "parked"  # 1.00 paid
    resolve(connection(), "razorpay", "evt_mm", "refunded in the dashboard")
    cursor = connection()
    for table, column in (("processed_webhooks", "processed_at"),
                          ("payhooks_expectations", "created_at"),
                          ("payhooks_amount_mismatches", "found_at")):  # fmt: skip
        cursor.execute(f"UPDATE {table} SET {column} = {column} - interval '100 days'".encode())
    retention.purge("default", 90)
    assert records(django_db) == []
    page = timeline(operator, "order_mm")
    [item] = page.context["told"]
    [kept] = item["story"].mismatched
    assert (kept.event_id, kept.paid_paise, kept.resolution) == (
        "evt_mm", 100, "refunded in the dashboard")  # fmt: skip
    assert 'id="mismatched"' in page.content.decode()


def paid_then_purged(order: str, reference: str, payment_id: str) -> None:
    """An order expected under ``reference`` and paid, then its delivery and expectation made
    100 days old and purged past a 90-day window: the payment's record alone is left."""
    from payhooks.django import retention

    payhooks.expect(connection(), "razorpay", order, 100, "INR", reference)
    Order.objects.create(reference=order, amount_paise=100)
    assert deliver(capture(order, f"evt_{order}", payment_id=payment_id)) == "processed"
    cursor = connection()
    for table, column in (("processed_webhooks", "processed_at"),
                          ("payhooks_expectations", "created_at")):  # fmt: skip
        cursor.execute(f"UPDATE {table} SET {column} = {column} - interval '100 days'".encode())
    retention.purge("default", 90)


def test_a_paid_order_whose_expectation_was_purged_is_told_its_amount_expected(operator, django_db):
    """The purge takes the expectation after the window; the payment's record keeps the
    amount its order was expected to be paid: never "never registered"."""
    paid_then_purged("order_kp", "shop-44", "pay_kept000001")
    text = timeline(operator, "order_kp").content.decode()
    assert "Never registered" not in text
    assert "100 paise INR:\nthe expectation itself was purged" in text


@pytest.mark.parametrize("q", ["shop-45", bank_reference("pay_kept000002")])
def test_a_paid_order_is_found_by_your_reference_and_its_utr_after_the_purge(operator, q):
    """The payment's record keeps both (core migration 0036): the page finds the order by
    them and shows them, its deliveries and its expectation purged."""
    paid_then_purged("order_k2", "shop-45", "pay_kept000002")
    page = timeline(operator, q)
    [item] = page.context["told"]
    assert (item["story"].gateway_order_id, item["story"].records) == ("order_k2", [])
    text = page.content.decode()
    assert "your reference shop-45" in text
    assert f"UTR/RRN {bank_reference('pay_kept000002')}" in text


@pytest.mark.parametrize("q", ["\x00", "pay_\x00x", "\x01", "\x1b[31m", "\x7f", "\x85"])
def test_a_query_holding_a_control_character_is_refused_400(operator, q):
    answered = timeline(operator, q)
    assert answered.status_code == 400
    assert b"control character" in answered.content


def test_the_timeline_lives_where_the_docs_say(operator):
    """docs/django.md names the page's address under the admin's own."""
    from pathlib import Path

    docs = (Path(__file__).parents[2] / "docs" / "django.md").read_text()
    address = reverse(TIMELINE)
    assert address.endswith("/payhooks/processedwebhook/timeline/")
    assert "`admin/payhooks/processedwebhook/timeline/`" in docs
    assert timeline(operator, "").status_code == 200

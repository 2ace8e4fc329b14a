"""The delivery records in Django's admin, driven as an operator drives it: a logged-in user
over HTTP (Django's test client), replaying parked deliveries, searching and filtering."""

from __future__ import annotations

import psycopg
import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.urls import reverse
from orders.models import Order

from payhooks.django.models import ProcessedWebhook, ReadOnlyRecord
from payhooks.sim.gateway import Delivery, bank_reference
from tests.django.conftest import PAYHOOKS, records
from tests.factories import GATEWAY, KEYS

CHANGELIST = "admin:payhooks_processedwebhook_changelist"


def capture(ref: str, key: str, payment_id: str = "pay_adm00000001") -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured", payment_id=payment_id, order_id=ref, amount_paise=100, event_id=key
    )


def deliver(delivery: Delivery) -> str:
    response = Client().post(
        delivery.path, delivery.body, content_type="application/json", headers=delivery.headers
    )
    return response.json()["status"]


def replay(client: Client, *keys: str):
    return client.post(
        reverse(CHANGELIST),
        {"action": "replay_parked", "_selected_action": list(keys), "index": 0},
        follow=True,
    )


def listed(client: Client, **query: str) -> list[str]:
    response = client.get(reverse(CHANGELIST), query)
    return sorted(record.event_id for record in response.context["cl"].result_list)


def shown(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def operator(django_db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "unused"))
    return client


@pytest.fixture
def viewer(django_db) -> Client:
    """Staff who may read the records, not replay them."""
    user = User.objects.create_user("viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_processedwebhook"))
    client = Client()
    client.force_login(user)
    return client


# --- replay -----------------------------------------------------------------------------------


def test_replaying_a_parked_delivery_whose_order_now_exists_applies_it(
    atomic_requests, operator, django_db
):
    assert deliver(capture("order_late", "evt_late")) == "parked"
    Order.objects.create(reference="order_late", amount_paise=100)
    response = replay(operator, "evt_late")
    assert shown(response) == ["Applied (1): evt_late"]
    assert records(django_db) == [("razorpay", "evt_late", "processed")]
    assert Order.objects.get(reference="order_late").status == "paid"


def test_replaying_a_delivery_that_still_matches_nothing_keeps_it_parked(operator, django_db):
    deliver(capture("order_never", "evt_never"))
    response = replay(operator, "evt_never")
    assert shown(response) == ["Still matching nothing, kept parked (1): evt_never"]
    assert records(django_db) == [("razorpay", "evt_never", "parked")]


def test_replay_tells_a_delivery_parked_for_its_amount_and_one_the_handler_ignores(
    operator, django_db
):
    """The shop expects 500 paise and is paid 100: parked for its amount, and said so on
    replay. The expectation corrected but not the order's own amount, the shop's handler
    ignores it: said so too, and its mismatch closed, not left open."""
    from django.db import connection

    import payhooks

    Order.objects.create(reference="order_short", amount_paise=500)
    payhooks.expect(payhooks.django.connection(), "razorpay", "order_short", 500)
    assert deliver(capture("order_short", "evt_short")) == "parked"
    assert shown(replay(operator, "evt_short")) == [
        "Still another amount than expected, kept parked (correct the expectation, or resolve "
        "it) (1): evt_short"
    ]
    payhooks.expect(payhooks.django.connection(), "razorpay", "order_short", 100)
    response = replay(operator, "evt_short")
    assert shown(response) == ["Ignored by your handler, no longer parked (1): evt_short"]
    assert records(django_db) == [("razorpay", "evt_short", "ignored")]
    with connection.cursor() as cursor:
        cursor.execute("SELECT resolution FROM payhooks_amount_mismatches")
        assert cursor.fetchall() == [
            ("ignored: the expectation was corrected and the handlers ignored it",)
        ]


def test_replay_tells_a_callback_now_waiting_for_its_status_api_apart_from_those_applied(
    operator, django_db
):
    """A Juspay callback parked before payhooks had callbacks confirmed (its record kept from
    an earlier release): replayed now, it waits for Juspay's status API, nothing applied. It
    is reported so, not as applied."""
    juspay = {**PAYHOOKS, "JUSPAY_WEBHOOK_CREDENTIALS": [KEYS.juspay]}
    callback = GATEWAY.juspay(
        "ORDER_SUCCEEDED", order_id="order_old", txn="payhooks_demo-old-1", amount_paise=100
    )
    with override_settings(PAYHOOKS=juspay):
        assert deliver(callback) == "confirming"
        with psycopg.connect(django_db, autocommit=True) as conn:
            conn.execute("DELETE FROM payhooks_confirmations")
            conn.execute("UPDATE processed_webhooks SET outcome = 'parked'")
        [(_, key, _)] = records(django_db)
        response = replay(operator, key)
    assert shown(response) == [
        "Waiting for the gateway's status API, nothing applied yet (the confirmation pass "
        f"applies what it reports) (1): {key}"
    ]
    assert records(django_db) == [("juspay", key, "confirming")]
    assert not Order.objects.filter(reference="order_old").exists()


def test_replay_leaves_deliveries_that_are_not_parked_alone(operator, django_db):
    Order.objects.create(reference="order_paid", amount_paise=100)
    deliver(capture("order_paid", "evt_paid"))
    response = replay(operator, "evt_paid")
    assert shown(response) == ["Not parked, left alone (1): evt_paid"]


def test_replay_reports_each_delivery_whose_handler_failed_and_goes_on(operator, django_db):
    deliver(capture("order_a", "evt_a", payment_id="pay_a"))
    deliver(capture("order_b", "evt_b", payment_id="pay_b"))
    with override_settings(PAYHOOKS={**PAYHOOKS, "HANDLER": "tests.django.handlers.failing"}):
        response = replay(operator, "evt_a", "evt_b")
    assert shown(response) == ["Not replayed (2): evt_a (RuntimeError), evt_b (RuntimeError)"]
    assert [outcome for *_, outcome in records(django_db)] == ["parked", "parked"]


def test_staff_without_the_replay_permission_are_not_offered_the_action(viewer, django_db):
    deliver(capture("order_late", "evt_late"))
    page = viewer.get(reverse(CHANGELIST))
    assert page.status_code == 200 and b"replay_parked" not in page.content
    Order.objects.create(reference="order_late", amount_paise=100)
    replay(viewer, "evt_late")
    assert records(django_db) == [("razorpay", "evt_late", "parked")]


# --- search and filters -----------------------------------------------------------------------


@pytest.fixture
def two_deliveries(django_db) -> None:
    Order.objects.create(reference="order_one", amount_paise=100)
    deliver(capture("order_one", "evt_one", payment_id="pay_one"))
    deliver(capture("order_two", "evt_two", payment_id="pay_two"))


@pytest.mark.parametrize("term", ["evt_one", "pay_one", "order_one"])
def test_search_finds_a_delivery_by_key_payment_or_gateway_order(operator, two_deliveries, term):
    assert listed(operator, q=term) == ["evt_one"]


def test_search_finds_a_delivery_by_the_bank_reference_on_the_statement(operator, two_deliveries):
    assert listed(operator, q=bank_reference("pay_one")) == ["evt_one"]


def test_search_matches_whole_ids_only(operator, two_deliveries):
    assert listed(operator, q="evt_") == []


def test_the_outcome_filter_lists_parked_deliveries(operator, two_deliveries):
    assert listed(operator, outcome__exact="parked") == ["evt_two"]


def test_the_provider_filter_lists_one_gateways_deliveries(operator, two_deliveries):
    assert listed(operator, provider__exact="cashfree") == []
    assert listed(operator, provider__exact="razorpay") == ["evt_one", "evt_two"]


# --- records stay as the claim wrote them -----------------------------------------------------


def test_records_cannot_be_added_or_deleted_in_the_admin(operator, two_deliveries):
    change = reverse("admin:payhooks_processedwebhook_change", args=["evt_one"])
    assert operator.get(reverse("admin:payhooks_processedwebhook_add")).status_code == 403
    assert operator.get(change + "delete/").status_code == 403


def test_a_records_page_is_read_only(operator, two_deliveries):
    page = operator.get(reverse("admin:payhooks_processedwebhook_change", args=["evt_one"]))
    assert page.status_code == 200 and page.context["has_change_permission"] is False


def test_the_orm_cannot_write_a_record(two_deliveries):
    record = ProcessedWebhook.objects.get(event_id="evt_one")
    record.outcome = "ignored"
    with pytest.raises(ReadOnlyRecord):
        record.save()


def test_a_key_shared_by_two_gateways_opens_each_gateways_record(operator, django_db):
    with psycopg.connect(django_db) as conn:
        for provider in ("razorpay", "cashfree"):
            conn.execute(
                "INSERT INTO processed_webhooks (provider, event_id, event_type, outcome,"
                " payload_sha256, body) VALUES (%s, 'shared', 'x', 'ignored', %s, '')",
                (provider, provider),
            )
    links = operator.get(reverse(CHANGELIST)).content.decode()
    assert "shared/change/?provider=cashfree" in links
    page = operator.get(
        reverse("admin:payhooks_processedwebhook_change", args=["shared"]), {"provider": "cashfree"}
    )
    assert page.context["original"].provider == "cashfree"


# --- settlements ------------------------------------------------------------------------------


def test_the_settlements_page_shows_payouts_totals_and_flags(operator, viewer, django_db):
    from payhooks.events import Provider
    from payhooks.gateways._settlements import Line, LineKind
    from payhooks.settlements import records as settled

    Order.objects.create(reference="order_st", amount_paise=100)
    assert deliver(capture("order_st", "evt_st", payment_id="pay_st000000001")) == "processed"
    lines = [
        Line(provider=Provider.RAZORPAY, settlement_id="setl_ADM", entry_id=pid,
             kind=LineKind.PAYMENT, entry_type="payment", payment_id=pid, gateway_order_id=None,
             amount_paise=100, fee_paise=2, tax_paise=0, net_paise=98)
        for pid in ("pay_st000000001", "pay_nobody")
    ]  # fmt: skip
    with psycopg.connect(django_db, autocommit=True) as conn:
        settled.record(conn, [], lines)
    page = operator.get(reverse("admin:payhooks_settlements"))
    assert page.status_code == 200
    assert page.context["totals"].lines_net_paise == 196
    assert [p.settlement_id for p in page.context["payouts"]] == ["setl_ADM"]
    assert [line.payment_id for line in page.context["unmatched"]] == ["pay_nobody"]
    assert "setl_ADM" in page.content.decode()
    assert viewer.get(reverse("admin:payhooks_settlements")).status_code == 200
    told = operator.get(reverse("admin:payhooks_timeline"), {"q": "order_st"})
    assert "setl_ADM" in told.content.decode()


def test_the_settlements_page_shows_the_report_lines_payhooks_could_not_read(operator, django_db):
    import json

    from payhooks.gateways.razorpay import settlements
    from payhooks.settlements import records as settled

    item = {"entity_id": "pay_odd", "type": "payment", "settled": True, "amount": 100,
            "settlement_id": "setl_ODD", "credit": 98, "debit": 0, "fee": 2}  # fmt: skip
    body = json.dumps({"entity": "collection", "count": 1, "items": [item]}).encode()
    with psycopg.connect(django_db, autocommit=True) as conn:
        settled.record(conn, [], [], settlements.recon(body).unreadable)
    page = operator.get(reverse("admin:payhooks_settlements"))
    (kept,) = page.context["unreadable"]
    assert (kept.entry_id, kept.payment_id, kept.reason) == ("pay_odd", "pay_odd", "tax is missing")
    assert "tax is missing" in page.content.decode()


def test_the_settlements_page_names_the_daily_fetch_the_guide_runs(operator, django_db):
    """``--catch-up`` reads each day since the last one read whole; ``--from``/``--to`` run
    daily would leave unread the days a failed or missed run skipped."""
    page = operator.get(reverse("admin:payhooks_settlements")).content.decode()
    assert "daily with <code>manage.py payhooks_settlements --catch-up</code>" in page


def test_the_settlements_page_is_for_staff_who_may_read_the_records(django_db):
    client = Client()
    client.force_login(User.objects.create_user("nobody", is_staff=True))
    assert client.get(reverse("admin:payhooks_settlements")).status_code == 403

"""Disputes in a Django app: posted to its webhook view as Razorpay sends them, recorded by the
core once and in order whatever the app's hooks do, and shown in the admin (the open ones by
deadline, with the gateway's dashboard, and in the payment timeline)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse

from payhooks.django.models import Dispute, ReadOnlyRecord
from payhooks.sim.deliveries import Disputed
from payhooks.sim.gateways import cashfree as cashfree_sim
from payhooks.sim.gateways import razorpay as razorpay_sim
from tests.django.test_django_admin import capture, deliver
from tests.factories import GATEWAY

DISPUTES = "admin:payhooks_dispute_changelist"
NOW = datetime.now(UTC).replace(microsecond=0)


def disputed(what: str, dispute_id: str, due: datetime, minute: int = 0) -> str:
    told = Disputed(what=what, dispute_id=dispute_id, payment_id="pay_adm00000001",
                    reference="order_dj", amount_paise=100, respond_by=int(due.timestamp()),
                    reported_at=int(NOW.timestamp()) + 60 * minute)  # fmt: skip
    return deliver(razorpay_sim.dispute_delivery(GATEWAY, told))


@pytest.fixture
def operator(django_db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("ops", "ops@example.com", "unused"))
    return client


def test_the_model_has_the_tables_columns_and_nullability(django_db):
    with connection.cursor() as cursor:
        described = connection.introspection.get_table_description(cursor, "payhooks_disputes")
    table = {(column.name, bool(column.null_ok)) for column in described}
    model = {(f.column, f.null) for f in Dispute._meta.concrete_fields}
    assert model == table


def test_a_dispute_is_recorded_once_and_in_order_whatever_the_apps_hooks_do(django_db):
    assert disputed("lost", "disp_DJ1", NOW + timedelta(days=2), minute=1) == "ignored"
    assert disputed("opened", "disp_DJ1", NOW + timedelta(days=2)) == "ignored"  # stale
    found = Dispute.objects.get(dispute_id="disp_DJ1")
    assert (found.status, found.lost_paise) == ("lost", 100)
    with pytest.raises(ReadOnlyRecord):
        found.save()


def test_the_admin_lists_open_disputes_first_by_deadline_with_the_dashboard(operator, django_db):
    disputed("opened", "disp_LATER", NOW + timedelta(days=5))
    disputed("opened", "disp_SOON", NOW + timedelta(hours=5))
    disputed("won", "disp_DONE", NOW + timedelta(hours=1))
    page = operator.get(reverse(DISPUTES))
    assert page.status_code == 200
    listed = [d.dispute_id for d in page.context["cl"].result_list]
    assert listed == ["disp_SOON", "disp_LATER", "disp_DONE"]
    open_only = operator.get(reverse(DISPUTES), {"stands": "open"})
    assert [d.dispute_id for d in open_only.context["cl"].result_list] == ["disp_SOON",
                                                                          "disp_LATER"]  # fmt: skip
    assert b'href="https://dashboard.razorpay.com/"' in page.content
    searched = operator.get(reverse(DISPUTES), {"q": "disp_LATER"})
    assert [d.dispute_id for d in searched.context["cl"].result_list] == ["disp_LATER"]


def test_the_payment_timeline_tells_the_dispute(operator, django_db):
    deliver(capture("order_dj", "evt_dj"))
    disputed("action_required", "disp_TL", NOW + timedelta(days=1))
    page = operator.get(reverse("admin:payhooks_timeline"), {"q": "disp_TL"})
    [item] = page.context["told"]
    [dispute] = item["story"].disputes
    assert (dispute.status, dispute.awaiting_response) == ("action_required", True)
    assert b"<h3>Disputes</h3>" in page.content and b"(answer needed)" in page.content


def test_a_dispute_id_two_gateways_use_opens_each_gateways_dispute(operator, django_db):
    """The core keys a dispute by its gateway and id: the admin's links name the gateway, so
    the id Razorpay and Cashfree both sent opens each one's dispute."""
    due = int((NOW + timedelta(days=2)).timestamp())
    for sim, payment in ((razorpay_sim, "pay_adm00000001"), (cashfree_sim, "5114910394461")):
        told = Disputed(what="opened", dispute_id="433475257", payment_id=payment,
                        reference="order_dj", amount_paise=100, respond_by=due,
                        reported_at=int(NOW.timestamp()))  # fmt: skip
        assert deliver(sim.dispute_delivery(GATEWAY, told)) in {"ignored", "processed"}
    assert sorted(
        Dispute.objects.filter(dispute_id="433475257").values_list("provider", flat=True)
    ) == ["cashfree", "razorpay"]
    links = operator.get(reverse(DISPUTES)).content.decode()
    for provider in ("razorpay", "cashfree"):
        assert f"433475257/change/?provider={provider}" in links
        page = operator.get(reverse("admin:payhooks_dispute_change", args=["433475257"]),
                            {"provider": provider})  # fmt: skip
        assert page.status_code == 200 and page.context["original"].provider == provider

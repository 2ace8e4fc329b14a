"""docs/django.md documents every command and setting, and its test delivery works."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from orders.models import Order

from payhooks.django import conf
from tests.django.conftest import PAYHOOKS, records

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "django.md").read_text()
COMMANDS = ROOT / "src" / "payhooks" / "django" / "management" / "commands"


def test_every_management_command_is_documented():
    names = sorted(p.stem for p in COMMANDS.glob("payhooks_*.py"))
    assert names and [n for n in names if f"`manage.py {n}" not in DOC] == []


def test_every_setting_is_documented():
    assert [key for key in sorted(conf._KNOWN) if f"`{key}`" not in DOC] == []


def test_the_documented_delivery_is_answered_as_the_doc_says(site, django_db, capsys):
    section = DOC.split("## 6. A passing delivery", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]
    snippet = snippet.replace("http://127.0.0.1:8000", site)
    code = compile(snippet, "docs/django.md", "exec")
    with override_settings(PAYHOOKS={**PAYHOOKS, "RAZORPAY_WEBHOOK_SECRETS": ["whsec_current"]}):
        exec(code, {})
        Order.objects.create(reference="order_test0001", amount_paise=49_900)
        exec(code, {})
        exec(code, {})
    answers = [line.split('"status": "')[1].split('"')[0] for line in _printed(capsys)]
    assert answers == ["parked", "processed", "duplicate"]
    assert records(django_db) == [("razorpay", "evt_test0001", "processed")]


def _printed(capsys) -> list[str]:
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("200 ") for line in lines)
    return lines


def snippet(first_line: str) -> dict[str, object]:
    """The page's python block starting with ``first_line``, run as written: what it defines."""
    found = [b for b in re.findall(r"```python\n(.*?)```", DOC, re.S) if b.startswith(first_line)]
    assert len(found) == 1, first_line
    scope: dict[str, object] = {"__name__": "docs"}
    exec(compile(found[0], "docs/django.md", "exec", dont_inherit=True), scope)
    return scope


def test_the_documented_checkout_expects_what_razorpay_was_asked(django_db):
    create_order = snippet("# orders/checkout.py")["create_order"]
    order = create_order({"id": "order_doc0001", "amount": 129_900, "currency": "INR"})
    assert (order.reference, order.amount_paise) == ("order_doc0001", 129_900)
    with psycopg.connect(django_db) as conn:
        expected = conn.execute(
            "SELECT provider, gateway_order_id, amount_paise, currency, reference"
            " FROM payhooks_expectations"
        ).fetchall()
    assert expected == [("razorpay", "order_doc0001", 129_900, "INR", "order_doc0001")]


def test_the_documented_refund_asks_for_one_of_the_payment_that_paid_the_order(django_db):
    refund_order = snippet("# orders/refunds.py")["refund_order"]
    order = Order.objects.create(reference="order_doc0002", amount_paise=49_900,
                                 status=Order.Status.PAID, payment_id="pay_doc0002")  # fmt: skip
    refund = refund_order(order, 10_000, User(username="asha"))
    assert (refund.payment_id, refund.amount_paise) == ("pay_doc0002", 10_000)
    with psycopg.connect(django_db) as conn:
        asked = conn.execute(
            "SELECT provider, payment_id, amount_paise, captured_paise, requested_by, state"
            " FROM payhooks_refunds"
        ).fetchall()
    assert asked == [("razorpay", "pay_doc0002", 10_000, 49_900, "asha", "requested")]
    pending = Order.objects.create(reference="order_doc0003", amount_paise=49_900)
    with pytest.raises(ValueError, match="order order_doc0003 is not paid"):
        refund_order(pending, 10_000, User(username="asha"))

"""docs/django.md documents every command and setting, and its test delivery works."""

from __future__ import annotations

import re
from pathlib import Path

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

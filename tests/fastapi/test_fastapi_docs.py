"""docs/fastapi.md runs as written: its setup, its app (async and sync), and its test delivery
give the answers the page shows."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from tests.factories import KEYS
from tests.fastapi.conftest import served

PAGE = (Path(__file__).parents[2] / "docs" / "fastapi.md").read_text()


def block(name: str) -> str:
    """The python block whose first line is ``# <name>``."""
    found = re.search(rf"```python\n# {re.escape(name)}\n(.*?)```", PAGE, re.S)
    assert found, f"docs/fastapi.md has no block for {name}"
    return found.group(1)


def shown_answers() -> list[str]:
    transcript = re.search(r"```\n(\$ python send_test.py\n.*?)```", PAGE, re.S)
    assert transcript
    return [line for line in transcript.group(1).splitlines() if not line.startswith("$")]


def run(source: str, name: str) -> dict[str, object]:
    scope: dict[str, object] = {"__name__": name}
    exec(compile(source, f"docs/fastapi.md:{name}", "exec"), scope)
    return scope


@pytest.fixture
def environment(merchant_url, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", merchant_url)
    monkeypatch.setenv("RAZORPAY_WEBHOOK_SECRET", KEYS.razorpay)
    run(block("setup.py"), "setup")
    checkout = re.search(r'psql "\$DATABASE_URL" -c "(.*?)"', PAGE)
    assert checkout
    with psycopg.connect(merchant_url, autocommit=True) as conn:
        conn.execute(checkout.group(1).encode())
    return merchant_url


def sent_twice(app, capsys) -> list[str]:
    sender = block("send_test.py")
    with served(app) as running:
        for _ in range(2):
            run(sender.replace("http://127.0.0.1:8000", running.base_url), "send_test")
    return capsys.readouterr().out.splitlines()


def paid_orders(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT * FROM paid_orders").fetchall()


@pytest.mark.parametrize("main", ["main.py", "main_sync.py"])
def test_the_pages_app_answers_its_test_delivery_as_shown(environment, capsys, main):
    app = run(block(main), "main")["app"]
    assert sent_twice(app, capsys) == shown_answers()


@pytest.mark.parametrize("main", ["main.py", "main_sync.py"])
def test_the_pages_handler_writes_one_row(environment, capsys, main):
    sent_twice(run(block(main), "main")["app"], capsys)
    assert paid_orders(environment) == [("order_test0001", "pay_test000000001", 49_900)]


@pytest.mark.parametrize("main", ["main.py", "main_sync.py"])
def test_the_pages_handler_pays_nothing_for_an_underpaid_capture(environment, capsys, main):
    with psycopg.connect(environment, autocommit=True) as conn:
        conn.execute("UPDATE orders SET amount_paise = 99900")
    answers = sent_twice(run(block(main), "main")["app"], capsys)
    assert answers[0].startswith('200 {"status":"ignored"') and paid_orders(environment) == []

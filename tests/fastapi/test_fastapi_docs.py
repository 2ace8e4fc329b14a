"""docs/fastapi.md runs as written: its setup, its app (async and sync), and its test delivery
give the answers the page shows."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tests.factories import GATEWAY, KEYS, payu_authorised_post
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


@pytest.mark.parametrize("main", ["main.py", "main_sync.py"])
def test_the_pages_handler_tells_of_a_second_payment_of_a_paid_order(
    environment, capsys, caplog, main
):
    """A second payment of a paid order (a second tab) conflicted on ``paid_orders``' key
    and was answered ``processed``: the customer's money taken twice, and no person told. It
    is answered ``ignored`` and logged for a person to refund; the order keeps its first
    payment."""
    app = run(block(main), "main")["app"]
    sender = block("send_test.py")
    second = sender.replace("pay_test000000001", "pay_test000000002").replace(
        "evt_test_0001", "evt_test_0002"
    )
    with served(app) as running:
        for source in (sender, second):
            run(source.replace("http://127.0.0.1:8000", running.base_url), "send_test")
    answers = capsys.readouterr().out.splitlines()
    assert [a.split(",")[0] for a in answers] == ['200 {"status":"processed"',
                                                  '200 {"status":"ignored"']  # fmt: skip
    assert paid_orders(environment) == [("order_test0001", "pay_test000000001", 49_900)]
    assert [r.getMessage() for r in caplog.records if r.name == "shop"] == [
        "payment_for_paid_order"
    ]


PAYU_PAGE = "PayU's return page (surl and furl), beside the router in main.py"
THANKS = "Thank you: your payment for order order_test0001 is received."


def test_the_pages_payu_return_page_applies_the_post_once_and_says_what_it_is(
    environment, monkeypatch
):
    """The customer's browser posts PayU's signed result: applied through the page's hooks, a
    copy of it (PayU's server post with the same bytes) thanked alike, one in other bytes
    said to be confirming, a failure said so, and a forged one refused."""
    monkeypatch.setenv("PAYU_MERCHANT_KEY", KEYS.payu_key)
    monkeypatch.setenv("PAYU_SALT", KEYS.payu_salt)
    scope = run(block("main.py"), "main")
    exec(compile(block(PAYU_PAGE), "docs/fastapi.md:payu_return", "exec"), scope)
    posted = GATEWAY.payu(txnid="order_test0001", mihpayid="403993715500000001", amount="499.00")
    other = GATEWAY.payu(txnid="order_test0001", mihpayid="403993715500000002", amount="499.00")
    failed = GATEWAY.payu(
        txnid="order_test0002", mihpayid="403993715500000003", amount="499.00", status="failure"
    )
    pending = GATEWAY.payu(
        txnid="order_test0003", mihpayid="403993715500000004", amount="499.00", status="pending"
    )
    authorised = payu_authorised_post("order_test0004", "403993715500000005")
    unknown = GATEWAY.payu(txnid="order_nosuch01", mihpayid="403993715500000006", amount="499.00")
    forged = posted.body.replace(b"amount=499.00", b"amount=1.00")
    sent = [(d.body, d.headers) for d in (posted, posted, other, failed, pending, authorised,
                                           unknown)]  # fmt: skip
    with served(scope["app"]) as running, running.client() as client:
        pages = [
            client.post("/payu/return", content=body, headers=headers)
            for body, headers in [*sent, (forged, posted.headers)]
        ]
    assert [(page.status_code, page.text) for page in pages] == [
        (200, THANKS),
        (200, THANKS),  # duplicate: the other post was applied first
        (200, "We are confirming your payment for order order_test0001 with PayU."),
        (200, "Your payment for order order_test0002 did not go through."),
        # the bank still deciding, or a payment authorised and debited, not captured: it was
        # "did not go through", and the customer paid again
        (200, "Your payment for order order_test0003 is being completed: we will write to you."),
        (200, "Your payment for order order_test0004 is being completed: we will write to you."),
        # parked (no such order): it thanked the customer for an order never placed
        (
            200,
            "We have your payment for order order_nosuch01 and are checking it: "
            "we will write to you.",
        ),
        (400, "We could not confirm this payment yet."),
    ]
    assert paid_orders(environment) == [("order_test0001", "order_test0001", 49_900)]


def test_the_pages_payu_return_page_thanks_no_one_for_a_payment_not_applied(
    environment, monkeypatch
):
    """A capture the handler answered ``ignored`` (another amount than an order payhooks was
    not told of) was thanked: "your payment ... is received", the order unpaid. With no
    connection to be had, the page was a 500 after the pool's wait."""
    from psycopg_pool import AsyncConnectionPool

    monkeypatch.setenv("PAYU_MERCHANT_KEY", KEYS.payu_key)
    monkeypatch.setenv("PAYU_SALT", KEYS.payu_salt)
    with psycopg.connect(environment, autocommit=True) as conn:
        conn.execute("UPDATE orders SET amount_paise = 99900")
    scope = run(block("main.py"), "main")
    exec(compile(block(PAYU_PAGE), "docs/fastapi.md:payu_return", "exec"), scope)
    posted = GATEWAY.payu(txnid="order_test0001", mihpayid="403993715500000031", amount="499.00")
    with served(scope["app"]) as running, running.client() as client:
        page = client.post("/payu/return", content=posted.body, headers=posted.headers)
        scope["pool"] = AsyncConnectionPool("postgresql://nobody@127.0.0.1:1/gone", open=False)
        away = client.post("/payu/return", content=posted.body, headers=posted.headers)
    assert (page.status_code, page.text) == (
        200, "We have your payment for order order_test0001 and are checking it: we will write "
        "to you.",
    )  # fmt: skip
    assert paid_orders(environment) == []
    assert away.status_code == 503 and away.text.startswith("We are confirming your payment")


def test_the_pages_checkout_expects_the_order_it_writes(environment):
    scope = run(block("main.py"), "main")
    exec(compile(block("the checkout, beside the route in main.py"), "docs/fastapi.md", "exec"),
         scope)  # fmt: skip
    order = {"gateway": "razorpay", "gateway_order_id": "order_doc0002", "amount_paise": 129_900}
    with served(scope["app"]) as running, running.client() as client:
        answer = client.post("/orders", json=order)
    assert (answer.status_code, answer.json()) == (201, {"gateway_order_id": "order_doc0002"})
    with psycopg.connect(environment) as conn:
        expected = conn.execute(
            "SELECT provider, gateway_order_id, amount_paise, currency FROM payhooks_expectations"
        ).fetchall()
    assert expected == [("razorpay", "order_doc0002", 129_900, "INR")]


def test_the_pages_refund_asks_for_one_of_the_payment_that_paid_the_order(environment):
    scope = run(block("main.py"), "main")
    exec(compile(block("a refund, beside the route in main.py"), "docs/fastapi.md", "exec"),
         scope)  # fmt: skip
    with psycopg.connect(environment, autocommit=True) as conn:
        conn.execute("INSERT INTO paid_orders VALUES ('order_test0001', 'pay_doc0001', 49900)")

    async def refunded():
        async with AsyncConnectionPool(environment) as pool:
            scope["pool"] = pool  # the app's, as its lifespan opens it
            return await scope["refund_order"]("order_test0001", 10_000, "asha")

    refund = asyncio.run(refunded())
    assert (refund.payment_id, refund.amount_paise, refund.captured_paise) == (
        "pay_doc0001", 10_000, 49_900,
    )  # fmt: skip

    async def unpaid():
        async with AsyncConnectionPool(environment) as pool:
            scope["pool"] = pool
            return await scope["refund_order"]("order_never_paid", 10_000, "asha")

    # said to be so, not a TypeError from unpacking no row
    with pytest.raises(ValueError, match="order order_never_paid is not paid"):
        asyncio.run(unpaid())

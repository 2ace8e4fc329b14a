"""docs/flask.md as a merchant follows it: its app, its migration step and its signed test
delivery, run as written against real PostgreSQL and a real socket."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from flask import abort, request

from tests import loopback
from tests.factories import GATEWAY, KEYS, payu_authorised_post
from tests.flask.conftest import own_schema, serving, sqlalchemy_url

DOC = (Path(__file__).parents[2] / "docs" / "flask.md").read_text()
DOCUMENTED_URL = "http://127.0.0.1:5000"


def block(first_line: str) -> str:
    """The ```python block of the page that starts with ``first_line``."""
    found = [b for b in re.findall(r"```python\n(.*?)```", DOC, re.S) if b.startswith(first_line)]
    assert len(found) == 1, first_line
    return found[0]


def run(source: str, namespace: dict[str, object]) -> None:
    """As a merchant's file runs: without this module's ``from __future__`` imports."""
    exec(compile(source, "docs/flask.md", "exec", dont_inherit=True), namespace)


@pytest.fixture
def search_path(database_url: str) -> dict[str, str]:
    return own_schema(database_url, "flask_docs")


@pytest.fixture
def documented(database_url, search_path, monkeypatch) -> Iterator[dict[str, object]]:
    """The page's app and its migration step, run as written, in a database of its own."""
    url = sqlalchemy_url(database_url, **search_path).render_as_string(hide_password=False)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("RAZORPAY_WEBHOOK_SECRET", "whsec_test")
    namespace: dict[str, object] = {"__name__": "app"}
    run(block("# app.py"), namespace)
    run(block("# once, before serving"), namespace)
    yield namespace
    namespace["engine"].dispose()


def test_the_pages_delivery_pays_the_order_once_through_the_pages_app(
    documented, database_url, search_path, capsys
):
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        conn.execute(DOC.split("add an order\n(`", 1)[1].split("`", 1)[0])
        with serving(documented["app"]) as base:
            for _ in range(2):
                run(block("# try_it.py").replace(DOCUMENTED_URL, base), {})
        paid = conn.execute("SELECT paid FROM orders").fetchall()
    printed = capsys.readouterr().out
    assert '"status":"processed"' in printed and '"status":"duplicate"' in printed
    assert paid == [(True,)]


def test_the_pages_handler_tells_of_a_second_payment_of_a_paid_order(
    documented, database_url, search_path, capsys, caplog
):
    """A second payment of a paid order (a second tab) marked it paid again, ``processed``:
    the customer's money taken twice, and no person told. It is answered ``ignored`` and
    logged for a person to refund; the order keeps its first payment."""
    sender = block("# try_it.py")
    second = sender.replace("pay_test", "pay_twice").replace("evt_test", "evt_twice")
    assert second != sender
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        conn.execute(DOC.split("add an order\n(`", 1)[1].split("`", 1)[0])
        with serving(documented["app"]) as base:
            for source in (sender, second):
                run(source.replace(DOCUMENTED_URL, base), {})
        paid = conn.execute("SELECT paid, payment_id FROM orders").fetchall()
    printed = capsys.readouterr().out
    assert '"status":"processed"' in printed and '"status":"ignored"' in printed
    assert [(p, i.startswith("pay_test")) for p, i in paid] == [(True, True)]
    assert "payment_for_paid_order" in [r.getMessage() for r in caplog.records]


def test_the_pages_handler_leaves_an_underpaid_order_unpaid(
    documented, database_url, search_path, capsys
):
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        conn.execute("INSERT INTO orders VALUES ('order_test_1', 99900, 'INR', false)")
        with serving(documented["app"]) as base:
            run(block("# try_it.py").replace(DOCUMENTED_URL, base), {})
        paid = conn.execute("SELECT paid FROM orders").fetchall()
    assert '"status":"ignored"' in capsys.readouterr().out and paid == [(False,)]


def test_the_pages_payu_return_page_gets_the_exact_body_though_a_hook_reads_the_form(
    documented, database_url, search_path, monkeypatch
):
    monkeypatch.setenv("PAYU_MERCHANT_KEY", KEYS.payu_key)
    monkeypatch.setenv("PAYU_SALT", KEYS.payu_salt)
    run(block("# PayU's return page"), documented)
    app = documented["app"]
    app.before_request(lambda: None if request.form.get("website") is None else abort(400))
    failed = GATEWAY.payu(txnid="order_test_2", mihpayid="403993715500000004", amount="499.00",
                          status="failure")  # fmt: skip
    delivery = GATEWAY.payu(txnid="order_test_1", mihpayid="403993715500000003", amount="499.00")
    pending = GATEWAY.payu(txnid="order_test_3", mihpayid="403993715500000005", amount="499.00",
                           status="pending")  # fmt: skip
    authorised = payu_authorised_post("order_test_4", "403993715500000006")
    unknown = GATEWAY.payu(txnid="order_nosuch", mihpayid="403993715500000007", amount="499.00")
    short = GATEWAY.payu(txnid="order_test_5", mihpayid="403993715500000008", amount="1.00")
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        conn.execute("INSERT INTO orders VALUES ('order_test_1', 49900, 'INR', false)")
        conn.execute("INSERT INTO orders VALUES ('order_test_5', 49900, 'INR', false)")
        with serving(app) as base:
            shown = [
                loopback.post(base + "/payu/return", content=post.body, headers=post.headers).text
                for post in (failed, delivery, pending, authorised, unknown, short)
            ]
        paid = conn.execute("SELECT paid FROM orders ORDER BY ref").fetchall()
    # furl's failure post was thanked for a payment received
    assert shown == [
        "Your payment for order order_test_2 did not go through.",
        "Thank you: your payment for order order_test_1 is received.",
        # neither failed nor captured: it said "did not go through", and the customer paid again
        "Your payment for order order_test_3 is being completed: we will write to you.",
        "Your payment for order order_test_4 is being completed: we will write to you.",
        "We have your payment for order order_nosuch and are checking it: we will write to you.",
        # another amount, the handler's ignored: it was thanked, the order unpaid
        "We have your payment for order order_test_5 and are checking it: we will write to you.",
    ]
    assert paid == [(True,), (False,)]  # order_test_1 paid, order_test_5 not


def test_the_pages_payu_return_page_says_a_post_refused_for_now_is_being_confirmed(
    documented, database_url, search_path, monkeypatch
):
    """Two resent posts of one payment already wait for PayU's word, so a third is refused
    for now (``ConfirmationsFull``: PayU's own webhook brings it again). The page told the
    customer it could not confirm the payment, answered 400, as for a post not PayU's."""
    monkeypatch.setenv("PAYU_MERCHANT_KEY", KEYS.payu_key)
    monkeypatch.setenv("PAYU_SALT", KEYS.payu_salt)
    run(block("# PayU's return page"), documented)
    posts = [GATEWAY.payu(txnid="order_test_1", mihpayid=f"4039937155000000{n:02d}",
                          amount="499.00") for n in range(4)]  # fmt: skip
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        conn.execute("INSERT INTO orders VALUES ('order_test_1', 49900, 'INR', false)")
        with serving(documented["app"]) as base:
            answered = [loopback.post(base + "/payu/return", content=post.body,
                                      headers=post.headers) for post in posts]  # fmt: skip
    said = [(answer.status_code, answer.text) for answer in answered]
    waiting = "We are confirming your payment for order order_test_1 with PayU."
    assert said[1:3] == [(200, waiting)] * 2
    refused = "We are confirming your payment with PayU: this page need not be sent again."
    assert said[3] == (503, refused)


def test_the_pages_payu_return_page_says_a_post_met_with_the_database_away_is_being_confirmed(
    documented, monkeypatch
):
    """The database away when the page opens its connection: SQLAlchemy's ``OperationalError``
    came before payhooks was asked, and the customer saw Flask's 500 page."""
    import sqlalchemy

    monkeypatch.setenv("PAYU_MERCHANT_KEY", KEYS.payu_key)
    monkeypatch.setenv("PAYU_SALT", KEYS.payu_salt)
    away = sqlalchemy.create_engine("postgresql+psycopg://nobody@127.0.0.1:1/gone")
    run(block("# PayU's return page"), {**documented, "engine": away})
    post = GATEWAY.payu(txnid="order_test_1", mihpayid="403993715500000099", amount="499.00")
    with serving(documented["app"]) as base:
        answer = loopback.post(base + "/payu/return", content=post.body, headers=post.headers)
    refused = "We are confirming your payment with PayU: this page need not be sent again."
    assert (answer.status_code, answer.text) == (503, refused)


def test_the_pages_checkout_expects_the_order_it_writes(documented, database_url, search_path):
    run(block("sessions = sqlalchemy.orm.sessionmaker(engine)"), documented)
    documented["create_order"]("order_doc0001", 129_900)
    with psycopg.connect(database_url, **search_path) as conn:
        orders = conn.execute("SELECT * FROM orders").fetchall()
        expected = conn.execute(
            "SELECT provider, gateway_order_id, amount_paise, currency FROM payhooks_expectations"
        ).fetchall()
    assert orders == [("order_doc0001", 129_900, "INR", False, None)]
    assert expected == [("razorpay", "order_doc0001", 129_900, "INR")]


def test_the_pages_refund_asks_for_one_of_the_payment_that_paid_the_order(
    documented, database_url, search_path
):
    run(block("from payhooks.refunding import refunds"), documented)
    with psycopg.connect(database_url, autocommit=True, **search_path) as conn:
        conn.execute(
            "INSERT INTO orders VALUES ('order_doc0002', 49900, 'INR', true, 'pay_doc0002')"
        )
        conn.execute("INSERT INTO orders VALUES ('order_doc0003', 49900, 'INR', false)")
    refund = documented["refund_order"]("order_doc0002", 10_000, "asha")
    assert (refund.payment_id, refund.amount_paise, refund.captured_paise) == (
        "pay_doc0002", 10_000, 49_900,
    )  # fmt: skip
    # an order not paid (or none) is said to be so, not an AttributeError from deep inside
    for unpaid in ("order_doc0003", "order_none"):
        with pytest.raises(ValueError, match=f"order {unpaid} is not paid"):
            documented["refund_order"](unpaid, 10_000, "asha")

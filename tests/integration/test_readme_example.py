"""The README's library example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from payhooks.sim.gateway import Gateway, GatewaySecrets

README = (Path(__file__).parents[2] / "README.md").read_text()


EXAMPLE = re.search(r"## Use it as a library.*?```python\n(.*?)```", README, re.S).group(1)
FASTAPI = re.search(r"In a FastAPI app, the route is.*?```python\n(.*?)```", README, re.S).group(1)


def run_example(database_url: str, amount_paise: int) -> list[str]:
    """The example, run twice with one capture of ``amount_paise``; the outcomes."""
    delivery = Gateway(GatewaySecrets(razorpay="whsec_previous")).razorpay(
        "payment.captured",
        payment_id="pay_readme000001",
        order_id="order_readme",
        amount_paise=amount_paise,
    )
    outcomes = []
    for _ in range(2):
        scope: dict[str, object] = {}
        with pytest.MonkeyPatch.context() as env:
            env.setenv("DATABASE_URL", database_url)
            exec(compile(EXAMPLE, "README.md", "exec"), scope)
            route = scope["razorpay_webhook"]
            outcomes.append(route(delivery.body, list(delivery.headers.items())).value)
    return outcomes


def order_of(conn, amount_paise: int) -> None:
    conn.execute(
        "CREATE TABLE my_orders (gateway_ref text PRIMARY KEY, amount_paise bigint,"
        " currency text, paid boolean)"
    )
    conn.execute("INSERT INTO my_orders VALUES ('order_readme', %s, 'INR', false)", (amount_paise,))


def test_readme_library_example_processes_once_then_answers_duplicate(conn, database_url):
    order_of(conn, 100)
    assert run_example(database_url, 100) == ["processed", "duplicate"]
    assert conn.execute("SELECT paid FROM my_orders").fetchone()[0] is True


def test_readme_library_example_leaves_an_underpaid_order_unpaid(conn, database_url):
    order_of(conn, 49_900)
    run_example(database_url, 100)
    assert conn.execute("SELECT paid FROM my_orders").fetchone()[0] is False


def test_readme_fastapi_route_serves_the_example_hooks_once(conn, database_url):
    """The README's FastAPI snippet, over the library example's hooks: it built an
    ``AsyncConnectionPool`` for the example's sync ``Hooks``, which the router refuses at
    start-up (docs/fastapi.md), so the app never started as written."""
    from tests import loopback
    from tests.conftest import serving_app

    order_of(conn, 49_900)
    scope: dict[str, object] = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DATABASE_URL", database_url)
        exec(compile(EXAMPLE, "README.md", "exec"), scope)
        exec(compile(FASTAPI, "README.md", "exec"), scope)
    delivery = Gateway(GatewaySecrets(razorpay="whsec_previous")).razorpay(
        "payment.captured", payment_id="pay_readme000002", order_id="order_readme",
        amount_paise=49_900,
    )  # fmt: skip
    pool = scope["pool"]
    pool.open()  # the app's lifespan opens it
    try:
        with serving_app(scope["app"]) as base:
            answers = [
                loopback.post(base + delivery.path, content=delivery.body, headers=delivery.headers)
                for _ in range(2)
            ]
    finally:
        pool.close()
    assert [a.json()["status"] for a in answers] == ["processed", "duplicate"]
    assert conn.execute("SELECT paid FROM my_orders").fetchone() == (True,)

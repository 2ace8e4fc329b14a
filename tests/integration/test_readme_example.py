"""The README's library example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from payhooks.sim.gateway import Gateway, GatewaySecrets

README = (Path(__file__).parents[2] / "README.md").read_text()


def test_readme_library_example_processes_once_then_answers_duplicate(conn, database_url):
    example = re.search(r"## Use it as a library.*?```python\n(.*?)```", README, re.S).group(1)
    conn.execute("CREATE TABLE my_orders (gateway_ref text PRIMARY KEY, paid boolean)")
    conn.execute("INSERT INTO my_orders VALUES ('order_readme', false)")
    delivery = Gateway(GatewaySecrets(razorpay="whsec_previous")).razorpay(
        "payment.captured", payment_id="pay_readme000001", order_id="order_readme", amount_paise=100
    )
    outcomes = []
    for _ in range(2):
        scope = {
            "DATABASE_URL": database_url,
            "raw_body": delivery.body,
            "header_pairs": list(delivery.headers.items()),
        }
        exec(compile(example, "README.md", "exec"), scope)
        outcomes.append(scope["receipt"].outcome.value)
    assert outcomes == ["processed", "duplicate"]
    assert conn.execute("SELECT paid FROM my_orders").fetchone()[0] is True

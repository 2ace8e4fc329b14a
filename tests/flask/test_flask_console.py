"""The operator console beside the example Flask shop (examples/flask_shop), as docs/flask.md
says: ``payhooks console --hooks examples.flask_shop.app:hooks`` on the shop's database, its
operator added by ``payhooks operator add --database-url``. Driven over real HTTP: a capture
that came before its checkout is replayed from the console through the shop's own hooks and
pays the order once; an underpaid capture shows both amounts; forged deliveries sent to the
shop raise the console's health banner. The command stops gracefully on SIGTERM."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from psycopg.conninfo import make_conninfo

from tests import loopback
from tests.acceptance.conftest import invoke
from tests.conftest import free_port
from tests.console.conftest import csrf_of
from tests.factories import KEYS
from tests.flask import test_flask_example as example
from tests.flask.test_flask_example import PAID, checkout, orders, post, razorpay, status

ROOT = Path(__file__).parents[2]
search_path, engine, db, shop = example.search_path, example.engine, example.db, example.shop
OPERATOR, PASSWORD = "meera", "another long passphrase"
PAYHOOKS = Path(sys.executable).parent / "payhooks"


@contextlib.contextmanager
def console(url: str) -> Iterator[str]:
    """``payhooks console`` as an operator runs it beside the shop, until SIGTERM."""
    port = free_port()
    env = {**os.environ, "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": KEYS.razorpay}
    command = [PAYHOOKS, "console", "--hooks", "examples.flask_shop.app:hooks",
               "--database-url", url, "--port", str(port)]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if loopback.get(f"{base}/console/login", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                time.sleep(0.1)
        yield base
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    # uvicorn stops gracefully (the lifespan closes the console's pool), then re-raises the
    # signal it caught, as a server should.
    assert process.returncode in (0, -signal.SIGTERM), stderr
    assert "Traceback" not in stderr and '"level": "error"' not in stderr, stderr
    assert "payhooks console on http://127.0.0.1" in stderr


def operator(url: str) -> None:
    """``payhooks operator add``, in this process (tests/acceptance runs the installed one)."""
    done = invoke(
        {**os.environ}, "operator", "add", OPERATOR, "--password-stdin", "--database-url", url,
        input=PASSWORD + "\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@contextlib.contextmanager
def logged_in(base: str) -> Iterator[httpx.Client]:
    with loopback.Client(base_url=base, timeout=30, follow_redirects=False) as client:
        assert client.get("/").headers["location"] == "/console/"
        assert client.get("/console/").headers["location"].startswith("/console/login?next=")
        answer = client.post("/console/login", data={"name": OPERATOR, "password": PASSWORD})
        assert answer.status_code == 303, answer.text
        yield client


def replay(client: httpx.Client, event_id: str) -> str:
    form = {"csrf": csrf_of(client.get("/console/parked").text), "provider": "razorpay",
            "event_id": event_id, "back": "/console/parked"}  # fmt: skip
    answer = client.post("/console/parked/replay", data=form)
    assert answer.status_code == 303, answer.text
    return client.get(answer.headers["location"]).text


def test_the_console_refuses_a_port_outside_1_to_65535_before_anything(database_url):
    """The kernel takes a port modulo 65536: --port 70000 listened on 4464."""
    result = invoke({**os.environ}, "console", "--hooks", "examples.flask_shop.app:hooks",
                    "--database-url", database_url, "--port", "70000", timeout=20)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Invalid value for '--port'" in result.stderr


def test_the_console_replays_a_parked_capture_through_the_shops_hooks_once(
    shop, db, database_url, search_path
):
    url = make_conninfo(database_url, **search_path)  # the shop's database: its schema
    operator(url)
    assert status(post(shop, razorpay())) == "parked"  # the webhook before the checkout
    with console(url) as base, logged_in(base) as client:
        parked = client.get("/console/parked").text
        [event_id] = re.findall(r'name="event_id" value="([^"]+)"', parked)[:1]
        assert "Replayed: it is still parked" in replay(client, event_id)
        checkout(shop)
        assert "Replayed: the delivery was applied." in replay(client, event_id)
        again = replay(client, event_id)
        assert "Nothing to do: this delivery is parked no more (applied, or settled)." in again
        assert orders(db) == PAID


def test_an_underpaid_capture_and_forged_deliveries_show_on_the_console(
    shop, db, database_url, search_path
):
    url = make_conninfo(database_url, **search_path)
    operator(url)
    checkout(shop)
    assert status(post(shop, razorpay(amount_paise=100))) == "parked"
    forged = razorpay(payment_id="pay_forged000001")
    headers = {**forged.headers, "x-razorpay-signature": "0" * 64}
    for _ in range(5):
        assert (
            loopback.post(f"{shop}{forged.path}", content=forged.body, headers=headers).status_code
            == 401
        )
    with console(url) as base, logged_in(base) as client:
        assert "amount: paid ₹1.00, expected ₹499.00" in client.get("/console/parked").text
        deadline = time.monotonic() + 60  # the shop's log writes its lines after the answers
        while 'role="alert"' not in (home := client.get("/console/").text):
            assert time.monotonic() < deadline, "no banner: " + home
            time.sleep(0.1)
    assert "razorpay" in home[home.index('role="alert"') :].split("</div>")[0]

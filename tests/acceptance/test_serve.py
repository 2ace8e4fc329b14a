"""`payhooks serve` and `payhooks trace` as a merchant runs them: subprocesses, real HTTP."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from payhooks.sim.gateway import Gateway, GatewaySecrets
from tests import loopback
from tests.acceptance.conftest import PAYHOOKS, Process, invoke, running, wait_until
from tests.conftest import free_port
from tests.factories import GATEWAY, KEYS


@pytest.fixture
def server_log(tmp_path: Path) -> Path:
    return tmp_path / "serve.log"


@pytest.fixture
def server(env: dict[str, str], server_log: Path) -> Iterator[str]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running(["serve", "--port", str(port)], env, server_log) as process:
        wait_until(lambda: _ready(base, process), timeout=30, what="payhooks serve")
        yield base


def _ready(base: str, process: Process) -> bool:
    assert process.alive(), process.output()
    try:
        return loopback.get(f"{base}/readyz").status_code == 200
    except httpx.TransportError:
        return False


def test_serve_takes_a_paid_cart_to_one_traceable_order(server: str, env: dict[str, str]) -> None:
    with loopback.Client(base_url=server, headers={"authorization": "Bearer acceptance"}) as client:
        client.post(
            "/api/products", json={"sku": "MUG", "name": "Mug", "price_paise": 39900, "stock": 3}
        ).raise_for_status()
        cart = client.post(
            "/api/carts",
            json={"customer_email": "c@example.com", "items": [{"sku": "MUG", "quantity": 1}]},
        ).json()
        ref = client.post(
            f"/api/carts/{cart['cart_id']}/checkout", json={"provider": "razorpay"}
        ).json()["gateway_order_id"]
        delivery = GATEWAY.razorpay(
            "payment.captured", payment_id="pay_acc000000001", order_id=ref, amount_paise=39900
        )
        answers = [
            client.post(delivery.path, content=delivery.body, headers=delivery.headers).json()
            for _ in range(3)
        ]
        stock = client.get("/api/products/MUG").json()["stock"]
    assert [a["status"] for a in answers] == ["processed", "duplicate", "duplicate"]
    assert stock == 2
    traced = invoke(env, "trace", answers[0]["order_id"])
    assert traced.returncode == 0, traced.stderr
    report = json.loads(traced.stdout)
    assert report["matched"] == ["order"]
    assert [e["event_id"] for e in report["events"]] == [answers[0]["event_id"]]
    assert report["orders"][0]["payment_id"] == "pay_acc000000001"


def test_serve_logs_one_json_line_per_delivery_with_its_key_and_no_secrets(
    server: str, server_log: Path
) -> None:
    delivery = GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_log000000001",
        order_id="order_nowhere",
        amount_paise=100,
    )
    answer = loopback.post(
        server + delivery.path, content=delivery.body, headers=delivery.headers
    ).json()
    parked = logged(server_log, "webhook_parked")
    assert parked and parked[0]["event_id"] == answer["event_id"]
    text = server_log.read_text()
    assert delivery.headers["x-razorpay-signature"] not in text
    assert KEYS.razorpay not in text


def test_trace_of_unknown_id_prints_one_line_and_fails(env: dict[str, str]) -> None:
    assert invoke(env, "migrate").returncode == 0
    result = invoke(env, "trace", "nothing-like-this")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0
    assert "not found" in result.stderr


def test_migrate_is_idempotent(env: dict[str, str]) -> None:
    result = invoke(env, "migrate")
    assert result.returncode == 0, result.stderr
    assert "up to date" in result.stdout


def test_serve_without_database_exits_with_one_line(env: dict[str, str]) -> None:
    env = {**env, "DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"}
    result = subprocess.run(
        [PAYHOOKS, "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("payhooks: database unavailable")


@pytest.mark.parametrize("port", ["0", "65536", "70000", "-1"])
def test_serve_refuses_a_port_outside_1_to_65535_before_anything(
    env: dict[str, str], port: str
) -> None:
    """The kernel takes a port modulo 65536: serve said it served on :70000 and listened on
    4464 (and on :0, on any free port)."""
    result = invoke(env, "serve", "--port", port, timeout=20)
    assert result.returncode == 2, result.stderr
    assert "Invalid value for '--port'" in result.stderr
    assert "serving" not in result.stderr


def test_serve_takes_a_secret_holding_a_comma_as_one_secret(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Gateways let merchants choose any characters; a value written the old way, as a
    comma-separated list, is said to be one secret at start."""
    secret = "Xk9,pQ2#mZ"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    secret_env = {**env, "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS": secret}
    delivery = Gateway(GatewaySecrets(razorpay=secret)).razorpay(
        "payment.captured", payment_id="pay_comma0000001", order_id="order_x", amount_paise=100
    )
    with running(["serve", "--port", str(port)], secret_env, tmp_path / "serve.log") as process:
        wait_until(lambda: _ready(base, process), timeout=30, what="payhooks serve")
        answer = loopback.post(
            f"{base}{delivery.path}", content=delivery.body, headers=delivery.headers
        )
        output = process.output()
    assert (answer.status_code, answer.json()["status"]) == (200, "parked")
    assert "PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS is read as one secret holding a comma" in output
    assert secret not in output


def logged(log: Path, event: str) -> list[dict[str, object]]:
    """The JSON lines of ``event`` in the server's log, once there is one (the line is written
    before the answer, but read here as a file another process writes)."""
    deadline = time.monotonic() + 10
    while True:
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        found = [line for line in lines if line["event"] == event]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_serve_on_the_embedded_database_stops_it_on_sigterm(
    env: dict[str, str], tmp_path: Path
) -> None:
    """uvicorn stops gracefully, then raises the signal again: under the default handler the
    process died there, and the embedded PostgreSQL's clean-up at exit never ran, leaving it
    running. Its home is not under pytest's root, which the server's own user cannot enter
    (tests/conftest.py, ``admin_url``)."""
    home = Path(tempfile.mkdtemp(prefix="payhooks-serve-home-"))
    embedded = {name: value for name, value in env.items() if name != "DATABASE_URL"}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    postmaster: psutil.Process | None = None
    try:
        args, served = ["serve", "--port", str(port)], {**embedded, "PAYHOOKS_HOME": str(home)}
        with running(args, served, tmp_path / "serve.log") as process:
            wait_until(lambda: _ready(base, process), timeout=120, what="serve, embedded")
            pid = (home / "pgdata" / "postmaster.pid").read_text().split()[0]
            postmaster = psutil.Process(int(pid))
            process.popen.send_signal(signal.SIGTERM)
            status = process.popen.wait(timeout=60)
        assert not _alive(postmaster), process.output()
        assert status == 0, process.output()
    finally:
        if postmaster is not None and _alive(postmaster):
            postmaster.terminate()  # PostgreSQL's smart shutdown, as pg_ctl stop asks
            postmaster.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)

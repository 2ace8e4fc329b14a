"""`pip install payhooks` is the library: a clean venv imports the core without the service's
web framework, CLI or pool libraries, and can create the core's table and ingest a delivery."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.acceptance.installing import installed, venv_with

HEAVY = [
    "fastapi",
    "starlette",
    "uvicorn",
    "typer",
    "rich",
    "httpx",
    "pydantic",
    "psycopg_pool",
    "nats",
    "aio_pika",
    "aiormq",
]

PROBE = """
import json, sys
import payhooks
from payhooks import Hooks, EventKind, Razorpay, ingest, migrate
from payhooks.relay import inbox, relaying  # the consumer's inbox and the relay: psycopg alone
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)))
"""


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv with nothing but `pip install payhooks` (the wheel, at the pinned versions)."""
    return venv_with(tmp_path_factory, "core", "{wheel}")


def test_the_bare_install_imports_the_core_without_any_heavy_library(bare: Path) -> None:
    probe = f"HEAVY = {HEAVY!r}\n{PROBE}"
    out = subprocess.run([bare, "-c", probe], check=True, capture_output=True, text=True)
    assert json.loads(out.stdout) == []


def test_the_bare_install_holds_only_the_driver(bare: Path) -> None:
    assert installed(bare) <= {
        "payhooks", "psycopg", "psycopg-binary", "typing-extensions", "tzdata",
    }  # fmt: skip


def test_the_command_without_the_service_extra_says_how_to_get_it(bare: Path) -> None:
    command = bare.parent / "payhooks"
    done = subprocess.run([command, "--help"], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'payhooks[service,sim]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_bare_install_creates_the_cores_table_and_ingests(bare: Path, database_url) -> None:
    from tests.factories import GATEWAY, KEYS

    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_bare1", order_id="order_bare", amount_paise=100
    )
    script = f"""
import psycopg
from payhooks import Applied, EventKind, Hooks, Outcome, Razorpay, header_map, ingest, migrate
hooks = Hooks()
seen = []
@hooks.on(EventKind.PAYMENT_CAPTURED)
def paid(conn, event):
    seen.append(event.payment_id)
razorpay = Razorpay(secrets=({KEYS.razorpay!r},))
with psycopg.connect({database_url!r}, autocommit=True) as conn:
    migrate(conn)
    pairs = {list(delivery.headers.items())!r}
    receipt = ingest(conn, razorpay, {delivery.body!r}, header_map(pairs, razorpay), hooks)
    again = ingest(conn, razorpay, {delivery.body!r}, header_map(pairs, razorpay), hooks)
print(receipt.outcome, again.outcome, seen)
"""
    out = subprocess.run([bare, "-c", script], check=True, capture_output=True, text=True)
    assert out.stdout.split() == ["processed", "duplicate", "['pay_bare1']"]

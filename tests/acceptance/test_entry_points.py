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


def test_the_console_missing_a_module_its_extra_brings_says_the_extra_in_one_line(
    tmp_path,
) -> None:
    """python-multipart absent (FastAPI refuses the console's forms as the module is imported,
    with a RuntimeError, not an ImportError): one line naming the extra, exit 1."""
    import os

    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['python_multipart'] = sys.modules['multipart'] = None\n"
    )
    (tmp_path / "myshop_hooks.py").write_text("from payhooks import Hooks\nhooks = Hooks()\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [PAYHOOKS, "console", "--hooks", "myshop_hooks:hooks", "--database-url",
         "postgresql://nobody@127.0.0.1:9/none"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "the console needs the console extra" in done.stderr
    assert "python-multipart" in done.stderr
    assert "pip install 'payhooks[cli,console]'" in done.stderr

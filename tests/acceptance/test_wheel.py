"""The wheel a user installs: built from the sdist as an index would build it, checked as an index
checks it (``twine check --strict``), holding every file of the package (the SQL migrations, the
templates, ``py.typed``), importing its core with psycopg alone and each extra's modules.

The core is installed into a fresh venv with its dependencies, from the package registry or
pip's cache. Each extra's modules are imported from the same wheel installed ``--no-deps`` into
a second venv that reads the dependencies from this suite's venv (a plain path line, so the
editable install of the work tree stays out): it proves the wheel's own files, not that the
extra lists every library (tests/acceptance/test_bare_install.py and test_cli_install.py install
the core and the ``cli`` extra whole).
"""

from __future__ import annotations

import email.parser
import json
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

import payhooks
from tests.acceptance.installing import ROOT, distributions, once, pip, the_wheel, venv_with

# Each extra, and modules of the wheel that need it.
EXTRAS = {
    "service": ["payhooks.service.web", "payhooks.cli.commands"],
    "sim": ["payhooks.sim.demo", "payhooks.cli.sim"],
    "reconcile": ["payhooks.reconcile", "payhooks.gateways.razorpay.status"],
    "metrics": ["payhooks.operations.metrics"],
    "cli": ["payhooks.cli.merchant"],
    "console": ["payhooks.console.app"],
    "fastapi": ["payhooks.fastapi.routes"],
    "starlette": ["payhooks.starlette"],
    "aio": ["payhooks.aio.deliveries"],
    "django": ["payhooks.django.apps"],
    "flask": ["payhooks.flask"],
    "nats": ["payhooks.relay.nats"],
    "rabbitmq": ["payhooks.relay.rabbitmq"],
}
NOT_A_RUNTIME_EXTRA = {"test"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return distributions(tmp_path_factory)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return the_wheel(tmp_path_factory)


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(archive.read(name).decode())


def test_the_sdist_and_the_wheel_pass_twines_strict_check(dist: Path) -> None:
    files = sorted(dist.iterdir(), key=lambda f: f.suffix)
    assert [f.suffix for f in files] == [".gz", ".whl"]
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_wheel_holds_every_file_of_the_package(wheel: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "src/payhooks"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    expected = {path.removeprefix("src/") for path in tracked}
    with zipfile.ZipFile(wheel) as archive:
        held = set(archive.namelist())
    assert sorted(expected - held) == []
    data = {name for name in expected if not name.endswith(".py")}
    assert "payhooks/py.typed" in data
    assert any(n.startswith("payhooks/migrations/") and n.endswith(".sql") for n in data)
    assert any(n.startswith("payhooks/service/migrations/") for n in data)
    assert any(n.startswith("payhooks/console/templates/") for n in data)
    assert any(n.startswith("payhooks/django/templates/") for n in data)


def test_the_wheels_metadata_states_version_license_pythons_and_extras(wheel: Path) -> None:
    found = metadata(wheel)
    assert found["Version"] == payhooks.__version__
    assert found["License-Expression"] == "Apache-2.0"
    assert found["Requires-Python"] == ">=3.11"
    assert "Typing :: Typed" in found.get_all("Classifier")
    assert set(found.get_all("Provides-Extra")) == set(EXTRAS) | NOT_A_RUNTIME_EXTRA
    assert found.get_all("License-File") == ["LICENSE"]


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and its one dependency, psycopg (the pinned version);
    tests/acceptance/test_bare_install.py reads the same venv."""
    return venv_with(tmp_path_factory, "core", "{wheel}")


CORE_PROBE = """
import json, payhooks
from payhooks import Hooks, Razorpay, ingest, migrate
from payhooks.plumbing.schema import CORE
print(json.dumps({
    "file": payhooks.__file__,
    "version": payhooks.__version__,
    "migrations": [version for version, _ in CORE.files()],
}))
"""


def test_the_wheel_alone_imports_the_core_with_psycopg_and_its_migrations(core: Path) -> None:
    out = subprocess.run([core, "-c", CORE_PROBE], check=True, capture_output=True, text=True)
    found = json.loads(out.stdout)
    assert found["file"].startswith(str(core.parents[1]))
    assert found["version"] == payhooks.__version__
    shipped = sorted(p.stem for p in (ROOT / "src/payhooks/migrations").glob("*.sql"))
    assert found["migrations"] == shipped


@pytest.fixture(scope="module")
def beside(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel alone in a venv that reads every other library from this suite's venv."""

    def make(folder: Path) -> None:
        venv.create(folder, with_pip=False)
        python = folder / "bin" / "python"
        pip(python, "install", "--quiet", "--no-deps", wheel)
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        Path(site, "suite_libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    return once(tmp_path_factory, "beside", make) / "bin" / "python"


EXTRA_PROBE = """
import importlib, json, sys
files = [importlib.import_module(name).__file__ for name in sys.argv[1:]]
print(json.dumps(files))
"""


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_each_extras_modules_import_from_the_wheel(beside: Path, extra: str) -> None:
    done = subprocess.run(
        [beside, "-c", EXTRA_PROBE, *EXTRAS[extra]], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    venv_root = str(beside.parents[1])
    assert all(path.startswith(venv_root) for path in json.loads(done.stdout))

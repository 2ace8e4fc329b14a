"""Fresh venvs holding payhooks as a user installs it, made once a run and shared by the
modules that read them (``tests/acceptance/test_wheel.py``, ``test_bare_install.py``,
``test_cli_install.py``): building the wheel and installing it take most of their time.

A venv is made without pip of its own: this suite's pip installs into it (``pip --python``),
which is what a user's pip does, without bootstrapping a copy per venv."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import venv
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def once(factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``name``'s folder, made by whichever of the run's workers comes first and used by all."""
    run = factory.getbasetemp()
    shared = run.parent if os.environ.get("PYTEST_XDIST_WORKER") else run
    folder, done = shared / name, shared / f"{name}.done"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def pip(python: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """This suite's pip acting on the venv of ``python``."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )


def installed(python: Path) -> set[str]:
    """The distributions in ``python``'s venv, by normalised name."""
    listed = json.loads(pip(python, "list", "--format", "json").stdout)
    return {p["name"].lower().replace("_", "-") for p in listed}


def distributions(factory: pytest.TempPathFactory) -> Path:
    """The sdist, and the wheel built from it (``python -m build``'s default)."""

    def build(out: Path) -> None:
        subprocess.run(
            [sys.executable, "-m", "build", "--outdir", out, ROOT],
            check=True,
            capture_output=True,
            timeout=600,
        )

    return once(factory, "dist", build)


def the_wheel(factory: pytest.TempPathFactory) -> Path:
    (found,) = distributions(factory).glob("payhooks-*.whl")
    return found


def venv_with(factory: pytest.TempPathFactory, name: str, *requirements: str) -> Path:
    """The python of a fresh venv holding ``requirements`` (the wheel spelled ``{wheel}``,
    with an extra as ``{wheel}[cli]``) and their dependencies at the pinned versions."""
    wheel = the_wheel(factory)

    def make(folder: Path) -> None:
        venv.create(folder, with_pip=False)
        wanted = [r.format(wheel=wheel) for r in requirements]
        pip(
            folder / "bin" / "python", "install", "--quiet", "-c", ROOT / "constraints.txt", *wanted
        )

    return once(factory, name, make) / "bin" / "python"

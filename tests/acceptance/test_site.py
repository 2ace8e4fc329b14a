"""The documentation site builds in strict mode (mkdocs.yml): a broken link, a missing page or
a reference to a name that does not exist fails the build, and so this test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def build(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", root / "mkdocs.yml", "-d", out],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=600,
    )


def test_the_site_builds_strictly_with_every_guide_and_reference_page(tmp_path: Path) -> None:
    done = build(ROOT, tmp_path)
    assert done.returncode == 0, done.stderr
    guides = {page.stem for page in (ROOT / "docs").glob("*.md")} - {"index"}
    assert sorted(g for g in guides if not (tmp_path / g / "index.html").exists()) == []
    ingest = (tmp_path / "reference" / "intake" / "index.html").read_text()
    assert 'id="payhooks.intake.ingest.ingest_in_transaction"' in ingest
    front = (tmp_path / "reference" / "index.html").read_text()
    assert 'id="payhooks.SignatureMismatch"' in front


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The site's sources, to break."""
    root = tmp_path / "repo"
    for name in ("docs", "src", "scripts", "examples"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "CHANGELOG.md"):
        shutil.copy(ROOT / name, root / name)
    return root


def test_a_broken_link_a_missing_name_and_a_missing_file_each_fail_the_build(
    copy: Path, tmp_path: Path
) -> None:
    """One build broken three ways (each is a warning, and strict mode fails on any), every
    one named in what the build says."""
    guide = copy / "docs" / "operations.md"
    guide.write_text(guide.read_text() + "\nSee [the moon](moon.md).\n")
    reference = copy / "docs" / "reference" / "intake.md"
    reference.write_text(reference.read_text() + "\n::: payhooks.intake.no_such_module\n")
    flask = copy / "docs" / "flask.md"
    flask.write_text(flask.read_text() + "\nSee [the shop](../examples/no_such_shop.py).\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "moon.md" in done.stderr
    assert "payhooks.intake.no_such_module" in done.stderr
    assert "../examples/no_such_shop.py, which does not exist" in done.stderr

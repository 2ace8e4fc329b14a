"""Every public definition of every public module has a docstring, and every public module has a
page in the API reference (docs/reference/), which mkdocstrings generates from them.

Public: the package's front door, the core's rooms and the doors into a merchant's app, less
what starts with ``_`` and the shims of moved paths; in them each module, each class, function
and method whose name does not start with ``_`` (``@overload`` signatures aside)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "src" / "payhooks"
ROOMS = ["plumbing", "intake", "refunding", "operations", "gateways", "reconcile", "aio", "fastapi"]
DOORS = [
    "__init__.py", "events.py", "applying.py", "starlette.py", "flask.py", "console/__init__.py",
    "django/__init__.py", "django/conf.py", "django/views.py", "django/metrics.py",
    "django/testing.py",
]  # fmt: skip


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def public_modules(package: Path = PACKAGE) -> Iterator[Path]:
    yield from (package / door for door in DOORS if (package / door).exists())
    for room in ROOMS:
        for path in sorted((package / room).rglob("*.py")):
            parts = path.relative_to(package).parts
            if any(part.startswith("_") and part != "__init__.py" for part in parts):
                continue
            if "moved(__name__, " not in path.read_text():
                yield path


def _overload(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload")
        or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in node.decorator_list
    )


def _public(
    body: list[ast.stmt],
) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    for node in body:
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, kinds) and not node.name.startswith("_") and not _overload(node):
            yield node


def undocumented(path: Path, name: str) -> list[str]:
    """``name`` and each public definition in it, at any depth of classes, with no docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    missing = [] if ast.get_docstring(tree) else [name]

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in _public(body):
            if ast.get_docstring(node) is None:
                missing.append(f"{prefix}.{node.name}")
            if isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}.{node.name}")

    walk(tree.body, name)
    return missing


def test_every_public_definition_has_a_docstring() -> None:
    missing = [each for path in public_modules() for each in undocumented(path, module_name(path))]
    assert missing == []


def test_the_check_finds_a_definition_without_one(tmp_path: Path) -> None:
    package = tmp_path / "payhooks"
    (package / "intake").mkdir(parents=True)
    (package / "intake" / "__init__.py").write_text('"""A room."""\n')
    (package / "intake" / "claim.py").write_text(
        '"""A module."""\n\n'
        "from typing import overload\n\n\n"
        "class Claim:\n"
        '    """Documented."""\n\n'
        "    def state(self) -> str:\n        return 'new'\n\n"
        "    def _hidden(self) -> None: ...\n\n\n"
        "@overload\ndef take(x: int) -> int: ...\n"
        'def take(x: object) -> object:\n    """Documented."""\n    return x\n\n\n'
        "def key() -> str:\n    return ''\n"
    )
    paths = [p for p in public_modules(package) if p.name == "claim.py"]
    assert [undocumented(p, module_name(p, package)) for p in paths] == [
        ["payhooks.intake.claim.Claim.state", "payhooks.intake.claim.key"]
    ]


def test_every_public_module_has_its_place_in_the_api_reference() -> None:
    pages = "\n".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    documented = set(re.findall(r"^::: ([\w.]+)$", pages, re.M))
    assert sorted({module_name(p) for p in public_modules()} - documented) == []

"""The package's layout: no import cycle anywhere in src/payhooks, counting every import the
reader sees (inside functions and under ``TYPE_CHECKING`` too), and the old paths of the
modules that moved are shims (tests/unit/test_deprecations.py: each warns and gives the moved
objects)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import payhooks

ROOT = Path(payhooks.__file__).parent


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``name`` imports, at any depth, relative imports resolved: the
    deepest known module each import names (``from a import b`` names ``a.b`` if it is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        for target in _targets(node, package):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _targets(node: ast.AST, package: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def cycle_in(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as the modules along it, the first repeated at the end."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for other in sorted(graph.get(module, ())):
            if state.get(other) == 1:
                return [*path[path.index(other) :], other]
            if other not in state and (found := visit(other)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return None


def test_no_module_of_the_package_imports_itself_round_a_cycle() -> None:
    known = modules()
    graph = {name: imported(name, path, set(known)) for name, path in known.items()}
    cycle = cycle_in(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_sees_imports_in_functions_and_type_checking_blocks(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "sub" / "__init__.py").write_text("")
    (root / "a.py").write_text("def f():\n    from pkg.sub import b\n")
    (root / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import a\n"
    )
    known = modules(root)
    graph = {name: imported(name, path, set(known)) for name, path in known.items()}
    assert cycle_in(graph) == ["pkg.a", "pkg.sub.b", "pkg.a"]


ROOMS = {
    "plumbing": ["db", "pools", "retries", "schema", "errors", "keys"],
    "refunding": ["refunds", "sending"],
    "intake": [
        "ingest", "idempotency", "expectations", "confirmations", "hooks", "stored", "answers",
        "endpoint", "payments",
    ],
    "operations": [
        "deliverylog", "health", "alarms", "alerts", "notifier", "timeline", "retention",
        "metrics",
    ],
}  # fmt: skip
MOVED = [(room, name) for room, names in ROOMS.items() for name in names if name != "keys"]


def test_the_core_has_no_flat_module_but_the_shims_the_vocabulary_and_the_doors() -> None:
    flat = {p.stem for p in ROOT.glob("*.py")} - {"__init__", "__main__"}
    shims = {name for _, name in MOVED}
    assert flat - shims == {"events", "applying", "starlette", "flask"}
    for name in shims - {"ingest"}:
        assert "moved(__name__, " in (ROOT / f"{name}.py").read_text()


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("payhooks.refunding.refunds", "payhooks.gateways._refunds", ["Refund", "RefundState"]),
        (
            "payhooks.refunding.sending",
            "payhooks.gateways._refunds",
            ["Sent", "RefundRefused", "RefundClient", "processed_delivery", "reread"],
        ),
        ("payhooks.intake.confirmations", "payhooks.gateways._reports", ["Verdict"]),
    ],
)
def test_what_the_gateways_answer_with_is_still_named_where_it_was(
    old: str, new: str, names: list[str]
) -> None:
    before, now = importlib.import_module(old), importlib.import_module(new)
    assert all(getattr(before, each) is getattr(now, each) for each in names)


ABOVE_THE_GATEWAYS = ("refunding", "intake", "operations", "reconcile", "aio")


def test_no_module_of_the_gateways_imports_a_room_above_them() -> None:
    known = modules()
    above = tuple(f"payhooks.{room}" for room in ABOVE_THE_GATEWAYS)
    found = {
        f"{name} -> {target}"
        for name, path in known.items()
        if name == "payhooks.gateways" or name.startswith("payhooks.gateways.")
        for target in imported(name, path, set(known))
        if target.startswith(above)
    }
    assert found == set()


def test_the_gateways_room_check_sees_an_import_from_money_out(tmp_path: Path) -> None:
    root = tmp_path / "payhooks"
    (root / "gateways").mkdir(parents=True)
    (root / "refunding").mkdir()
    for init in (root / "__init__.py", root / "gateways" / "__init__.py"):
        init.write_text("")
    (root / "refunding" / "__init__.py").write_text("")
    (root / "gateways" / "status.py").write_text("from payhooks.refunding import sending\n")
    (root / "refunding" / "sending.py").write_text("")
    known = modules(root)
    path = known["payhooks.gateways.status"]
    assert "payhooks.refunding.sending" in imported("payhooks.gateways.status", path, set(known))

"""The documentation's Python snippets (the README and every page of docs/) are what a reader
copies: each compiles as written, and every name it uses is its own (an import, a definition,
an argument), a builtin, or one an earlier snippet of the same page defines at its top level
(the app it adds to). A name no
snippet defines (``rzp_order``, ``payment_id``) leaves the reader guessing what it stands for.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SNIPPET = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)


def snippets(page: str) -> list[tuple[int, str]]:
    """Each python block of ``page`` with the line it starts on, its indentation removed."""
    text = page
    found = []
    for match in SNIPPET.finditer(text):
        indent = len(match.group(1))
        source = "\n".join(line[indent:] for line in match.group(2).splitlines())
        found.append((text[: match.start()].count("\n") + 1, source))
    return found


class _Names(ast.NodeVisitor):
    """The names a snippet binds, at its top level and in all, and those it reads."""

    def __init__(self) -> None:
        self.top: set[str] = set()
        self.bound: set[str] = set()
        self.read: set[str] = set()
        self.depth = 0

    def _bind(self, name: str) -> None:
        self.bound.add(name)
        if self.depth == 0:
            self.top.add(name)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.read.add(node.id)
        else:
            self._bind(node.id)

    def visit_alias(self, node: ast.alias) -> None:
        self._bind((node.asname or node.name).split(".")[0])

    def visit_arg(self, node: ast.arg) -> None:
        self.bound.add(node.arg)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)

    def _scope(self, node: ast.AST, name: str | None) -> None:
        if name is not None:
            self._bind(name)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scope(node, node.name)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scope(node, node.name)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scope(node, node.name)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._scope(node, None)


def problems(page: str) -> list[str]:
    found, defined = [], set(dir(builtins))
    for line, source in snippets(page):
        try:
            compile(source, f"line {line}", "exec", dont_inherit=True)
        except SyntaxError as exc:
            found.append(f"line {line}: {exc.msg}")
            continue
        names = _Names()
        names.visit(ast.parse(source))
        unknown = sorted(names.read - names.bound - defined)
        if unknown:
            found.append(f"line {line}: {', '.join(unknown)} defined nowhere")
        defined |= names.top
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_snippet_of_a_page_runs_as_written_in_it(page):
    assert problems(page.read_text()) == []


def test_a_name_no_snippet_defines_is_found():
    page = "```python\nx = 1\n```\n\n```python\nprint(x, y)\n```\n"
    assert problems(page) == ["line 5: y defined nowhere"]


def test_a_snippet_that_does_not_compile_is_found():
    page = "```python\nasync with pool.connection() as conn:\n    pass\n```\n"
    assert problems(page) == ["line 1: 'async with' outside async function"]

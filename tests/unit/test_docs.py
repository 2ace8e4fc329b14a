"""The README documents every command, docs/configuration.md every setting payhooks reads (it
is written by scripts/configuration_page.py, and checked in as that script writes it)."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path
from typing import Any

import typer

from payhooks.cli.commands import app
from payhooks.gateways import GATEWAYS
from payhooks.operations import retention
from payhooks.service.config import Settings

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
CONFIG = (Path(__file__).parents[2] / "src" / "payhooks" / "service" / "config.py").read_text()


def test_every_cli_command_is_in_the_readme():
    names = {command.name or command.callback.__name__ for command in app.registered_commands}
    for group in app.registered_groups:
        commands = group.typer_instance.registered_commands
        names |= {f"{group.name} {command.name}" for command in commands}
    missing = [name for name in sorted(names) if f"`payhooks {name}" not in README]
    assert missing == []


def _commands(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every command under a group (typer's own click), by its full name."""
    found: dict[str, Any] = {}
    for name, command in group.commands.items():
        found[prefix + name] = command
        if hasattr(command, "commands"):
            found |= _commands(command, f"{prefix}{name} ")
    return found


def test_each_command_sums_itself_up_in_one_line():
    """`payhooks --help` lists each command by its help's first paragraph, line breaks kept: a
    summary over several lines is a wall of text there. One line, then the details."""
    long = {}
    for name, command in _commands(typer.main.get_command(app)).items():
        summary = inspect.cleandoc(command.help or "").split("\n\n")[0]
        if "\n" in summary or len(summary) > 100 or not summary:
            long[name] = summary
    assert long == {}


def test_every_environment_variable_is_on_the_configuration_page():
    variables = set(re.findall(r'env\.get\("([A-Z_]+)"\)', CONFIG))
    variables |= set(re.findall(r'"(PAYHOOKS_[A-Z_]+)"', CONFIG))  # read through a table
    assert variables, "config.py reads no variables?"
    for gateway in GATEWAYS.values():  # each gateway's settings, which config.py loops over
        api = gateway.status_api
        variables |= {secret.variable for secret in gateway.secrets}
        variables |= {api.id_variable, api.secret_variable, api.url_variable}
    missing = sorted(v for v in variables if f"| `{v}` |" not in CONFIGURATION)
    assert missing == []


def test_docs_and_code_cite_only_files_in_the_repository():
    """A citation of a file outside the repository is a dead end for every reader."""
    root = Path(__file__).parents[2]
    texts = [*root.glob("src/**/*.py"), *root.glob("docs/*.md"), root / "README.md"]
    citing = [str(p.relative_to(root)) for p in texts if "DESIGN.md" in p.read_text()]
    assert citing == []


def test_every_relative_link_in_the_docs_resolves():
    root = Path(__file__).parents[2]
    broken = []
    for page in [root / "README.md", *root.glob("docs/*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.name}: {target}")
    assert broken == []


def test_the_defaults_the_configuration_page_states_are_what_the_service_reads():
    """The page takes each default from its setting's field; the service, given no variable,
    must read that same value, so the page says what happens when a variable is unset."""
    unset = Settings.from_env({})
    service = CONFIGURATION.split("## The service", 1)[1].split("\n## ", 1)[0]
    stated = re.findall(r"^\| `(PAYHOOKS_[A-Z_]+)` \| `([^`]+)` \|", service, re.M)
    assert len(stated) >= 15, stated
    for variable, value in stated:
        found = getattr(unset, variable.removeprefix("PAYHOOKS_").lower())
        shown = str(found).lower() if isinstance(found, bool) else str(found)
        assert shown == value, variable


def test_the_configuration_page_is_the_one_its_script_writes():
    spec = importlib.util.spec_from_file_location("page", ROOT / "scripts/configuration_page.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.page() == CONFIGURATION, (
        "run: .venv/bin/python scripts/configuration_page.py --write"
    )


def test_the_retention_window_has_one_default():
    assert Settings().retention_days == retention.DEFAULT_RETENTION_DAYS
    assert Settings.from_env({}).retention_days == retention.DEFAULT_RETENTION_DAYS
    operations = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    assert f"`PAYHOOKS_RETENTION_DAYS`, {retention.DEFAULT_RETENTION_DAYS} days unless set" in (
        operations.replace("\n", " ")
    )


def test_the_readme_links_every_guide():
    guides = sorted(p.name for p in (Path(__file__).parents[2] / "docs").glob("*.md"))
    assert guides
    assert [name for name in guides if f"(docs/{name})" not in README] == []


def test_the_readme_layout_names_every_room():
    """Each folder of the package, and each module that is not a shim of a moved one."""
    package = Path(__file__).parents[2] / "src" / "payhooks"
    layout = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    rooms = [p.name + "/" for p in package.iterdir() if (p / "__init__.py").exists()]
    rooms += [
        p.name
        for p in package.glob("*.py")
        if p.name != "__init__.py" and "Moved to" not in p.read_text()
    ]
    assert [room for room in sorted(rooms) if room not in layout] == []


def test_every_path_of_the_repository_the_docs_name_exists():
    """A file moved or renamed leaves no guide pointing at where it was (the sources a guide
    cites, ``- [R2] ...`` lines naming files of the gateways' SDKs, are not ours)."""
    root = Path(__file__).parents[2]
    texts = [root / "README.md", root / "CHANGELOG.md", *(root / "docs").glob("*.md")]
    ours = [
        line
        for text in texts
        for line in text.read_text().splitlines()
        if not re.match(r"- \[\w+\] ", line)
    ]
    pattern = r"(?<![\w/.-])(?:tests|src|bench|scripts|examples)/[\w./-]+\.(?:py|md|sql|sh)"
    named = {path for line in ours for path in re.findall(pattern, line)}
    assert len(named) > 50, named
    assert sorted(path for path in named if not (root / path).exists()) == []

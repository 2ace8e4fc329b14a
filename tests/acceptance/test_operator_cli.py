"""`payhooks operator` as an operator runs it: add (prompted or from stdin), list, a new
password, remove; a name or password the console does not take is refused in one line."""

from __future__ import annotations

import subprocess

import psycopg

from payhooks.operations import operators
from tests.acceptance.conftest import invoke


def operator(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``payhooks operator *args``, run to its end in this process (``invoke``)."""
    return invoke(env, "operator", *args, input=stdin)


def stored_hash(url: str, name: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT password_hash FROM payhooks_operators WHERE name = %s", (name,)
        ).fetchone()
    return None if row is None else row[0]


def test_add_list_change_and_remove_an_operator(env):
    url = env["DATABASE_URL"]
    added = operator(env, "add", "asha", "--password-stdin", stdin="first password 1\n")
    assert (added.returncode, added.stdout) == (0, "operator asha added\n"), added.stderr
    first = stored_hash(url, "asha")
    assert first and operators.password_matches("first password 1", first)
    assert "first password" not in first
    assert operator(env, "list").stdout.startswith("asha\tadded ")
    changed = operator(env, "add", "asha", "--password-stdin", stdin="second password 2\n")
    assert changed.stdout == "operator asha has a new password\n"
    assert operators.password_matches("second password 2", stored_hash(url, "asha") or "")
    assert operator(env, "remove", "asha").stdout == "operator asha removed\n"
    assert stored_hash(url, "asha") is None


def test_the_password_is_asked_twice_when_not_piped(env):
    answer = operator(env, "add", "ravi", stdin="a long password\na long password\n")
    assert answer.returncode == 0, answer.stderr
    assert operators.password_matches(
        "a long password", stored_hash(env["DATABASE_URL"], "ravi") or ""
    )


def test_a_short_password_or_an_odd_name_is_refused_in_one_line(env):
    short = operator(env, "add", "asha", "--password-stdin", stdin="short\n")
    odd = operator(env, "add", "Asha <admin>", "--password-stdin", stdin="a long password\n")
    for refused in (short, odd):
        assert refused.returncode == 1
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("payhooks: ")
    assert "12 to 1024 characters" in short.stderr
    assert "lower-case letters" in odd.stderr


def test_removing_an_unknown_operator_says_so(env):
    answer = operator(env, "remove", "nobody")
    assert (answer.returncode, answer.stderr) == (1, "payhooks: operator 'nobody' not found\n")


def test_a_flask_apps_sqlalchemy_url_names_the_database_too(env):
    """A Flask app's DATABASE_URL is SQLAlchemy's ``postgresql+psycopg://``: the command
    reads it, in the environment and in ``--database-url``, as libpq reads ``postgresql://``."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    # Every parameter in the query string, so a socket directory (the embedded server's)
    # or a password reaches libpq as it does from the key=value form.
    parts = {k: str(v) for k, v in conninfo_to_dict(env["DATABASE_URL"]).items()}
    dbname = parts.pop("dbname")
    url = f"postgresql+psycopg:///{quote(dbname)}?{urlencode(parts)}"
    sqlalchemy_env = {**env, "DATABASE_URL": url}
    added = operator(sqlalchemy_env, "add", "ravi", "--password-stdin", stdin="a password 123\n")
    assert added.returncode == 0, added.stderr
    listed = operator(sqlalchemy_env, "list", "--database-url", url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("ravi\tadded ")


def test_can_act_on_an_existing_operator_asks_for_a_password_as_the_docs_show(env):
    """docs/console.md: ``operator add ravi --can-act`` asks for a password twice; the one
    they have, typed again, keeps it."""
    url = env["DATABASE_URL"]
    operator(env, "add", "ravi", "--read-only", "--password-stdin", stdin="ravi's password\n")
    answer = operator(env, "add", "ravi", "--can-act", stdin="ravi's password\nravi's password\n")
    assert answer.returncode == 0, answer.stderr
    assert "Password:" in answer.stdout and "Repeat for confirmation:" in answer.stdout
    assert answer.stdout.endswith("operator ravi has a new password (can act)\n")
    assert operators.password_matches("ravi's password", stored_hash(url, "ravi") or "")

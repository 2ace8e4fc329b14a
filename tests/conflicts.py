"""Serialization failures injected on a schedule, on real PostgreSQL.

A trigger raises SQLSTATE 40001 (or 40P01) on the first ``failures`` rows written to a table;
the count lives in a sequence, which a rollback does not undo, so each attempt of a retried
transaction draws the next number. ``at_commit`` makes it a deferred constraint trigger: it
fires at COMMIT, after everything the handler wrote.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from payhooks.plumbing import db
from payhooks.plumbing.retries import Retries

_FUNCTION = """
CREATE OR REPLACE FUNCTION conflict_injected() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('conflict_attempts') <= TG_ARGV[0]::bigint THEN
        RAISE EXCEPTION 'injected conflict' USING ERRCODE = TG_ARGV[1];
    END IF;
    RETURN NULL;
END $$
"""
_AT_STATEMENT = (
    "CREATE TRIGGER conflict_injected AFTER INSERT ON {table} FOR EACH ROW"
    " EXECUTE FUNCTION conflict_injected('{failures}', '{sqlstate}')"
)
_AT_COMMIT = (
    "CREATE CONSTRAINT TRIGGER conflict_injected AFTER INSERT ON {table}"
    " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW"
    " EXECUTE FUNCTION conflict_injected('{failures}', '{sqlstate}')"
)
ALWAYS = 1_000_000


def inject(
    conn: db.Connection,
    table: str,
    *,
    failures: int,
    sqlstate: str = "40001",
    at_commit: bool = False,
) -> None:
    """The first ``failures`` inserts into ``table`` fail with ``sqlstate`` (test names only)."""
    conn.execute("CREATE SEQUENCE IF NOT EXISTS conflict_attempts")
    conn.execute(_FUNCTION)
    trigger = _AT_COMMIT if at_commit else _AT_STATEMENT
    conn.execute(trigger.format(table=table, failures=failures, sqlstate=sqlstate).encode())


def attempts(conn: db.Connection) -> int:
    """How many rows the trigger saw: every attempt, failed or not."""
    row = conn.execute(
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM conflict_attempts"
    ).fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def unhurried_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A door's default retries with a window of 30 s instead of half a second: on a loaded
    machine two slow attempts can close the real window and the third is rightly refused (503),
    which these tests are not about; the window's bound has tests of its own
    (``tests/integration/test_conflict_retries.py``)."""
    defaults = Retries.__init__.__kwdefaults__
    assert defaults is not None and "window_s" in defaults
    monkeypatch.setitem(defaults, "window_s", 30.0)
    yield

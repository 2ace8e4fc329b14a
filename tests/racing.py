"""Two transactions racing, in a set order and without sleeps: one held open, the other run on
a thread of its own until it finishes or waits on a lock the held one took; then the held one
commits. Each order of the two is a test of its own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
import psycopg.errors

Work = Callable[[psycopg.Connection[Any]], None]


def blocked_by(conn: psycopg.Connection[Any], pid: int) -> bool:
    """Whether a session waits on a lock the session ``pid`` holds."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
    ).fetchone()
    return bool(row and row[0])


def while_held(
    database_url: str,
    conn: psycopg.Connection[Any],
    held: Work,
    racing: Work,
    options: str = "-c lock_timeout=30000",
) -> None:
    """``held(connection)`` in a transaction left open; ``racing(connection)`` (autocommit) on
    a thread until it has finished or waits on a lock the held one took (``conn`` watches);
    then the held one commits and the racing one ends. Both connections take ``options``."""
    errors: list[BaseException] = []

    def race() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True, options=options) as other:
                racing(other)
        except BaseException as exc:  # reported below, in the test's own thread
            errors.append(exc)

    with psycopg.connect(database_url, options=options) as holder:
        held(holder)
        thread = threading.Thread(target=race)
        thread.start()
        while thread.is_alive() and not blocked_by(conn, holder.info.backend_pid):
            thread.join(timeout=0.05)
        holder.commit()
    thread.join()
    assert not errors, errors


def refused_once(monkeypatch: Any, module: object, name: str) -> list[object]:
    """``module.name`` raising a lock timeout at its first call (a row another session holds),
    as the database refuses a write; each later call runs it. The first call's arguments are
    kept in the list returned."""
    real, refused = getattr(module, name), []

    def once(*args: object, **kwargs: object) -> object:
        if not refused:
            refused.append(args)
            raise psycopg.errors.LockNotAvailable("lock timeout")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, once)
    return refused

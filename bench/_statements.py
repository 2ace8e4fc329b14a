"""Time per statement from pg_stat_statements, on the bench's own embedded server only.

The extension needs its library loaded when the server starts. The embedded server is the
bench's (a fresh cluster in a temporary folder), so it may be restarted with the library; a
server named by DATABASE_URL is someone else's, and is used only if it already loads it.
``track = all`` counts the statements run inside functions too (``shop_first_capture``'s).
"""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg
from _pgbench import EMBEDDED_PGBENCH

PG_CTL = EMBEDDED_PGBENCH.with_name("pg_ctl")
LIBRARY = "pg_stat_statements"

_TOP = """
SELECT toplevel, calls, total_exec_time, rows, query FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND calls > 0 AND query NOT LIKE '%%pg_stat_statements_reset%%'
ORDER BY total_exec_time DESC
LIMIT %s
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    toplevel: bool
    calls: int
    total_ms: float
    rows: int
    query: str


def enable(url: str, *, ours: bool) -> str | None:
    """Load and create the extension in ``url``'s database; None when done, else why not."""
    with psycopg.connect(url, autocommit=True) as conn:
        loaded = LIBRARY in str(_one(conn, "SHOW shared_preload_libraries"))
        if not loaded and not ours:
            return f"{LIBRARY} is not loaded by DATABASE_URL's server (not the bench's to restart)"
        if not loaded:
            conn.execute(f"ALTER SYSTEM SET shared_preload_libraries = '{LIBRARY}'".encode())
            data = Path(str(_one(conn, "SHOW data_directory")))
    if not loaded:
        _restart(data)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {LIBRARY}".encode())
    return None


def make_room(url: str, connections: int) -> str | None:
    """``max_connections`` at least ``connections`` on the bench's own embedded server (a
    restart); None when it has them, else why not (a server named by DATABASE_URL is left as
    it is)."""
    with psycopg.connect(url, autocommit=True) as conn:
        have = int(str(_one(conn, "SHOW max_connections")))
        if have >= connections:
            return None
        if os.environ.get("DATABASE_URL"):
            return f"DATABASE_URL's server allows {have} connections (not the bench's to restart)"
        conn.execute(f"ALTER SYSTEM SET max_connections = {int(connections)}".encode())
        data = Path(str(_one(conn, "SHOW data_directory")))
    _restart(data)
    return None


def _one(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> object:
    row = conn.execute(sql.encode()).fetchone()
    assert row is not None
    return row[0]


def _restart(data: Path) -> None:
    """pg_ctl restart as the data folder's owner; the server keeps its socket options."""
    owner = data.stat().st_uid
    user = None if owner == os.getuid() else pwd.getpwuid(owner).pw_name
    subprocess.run(
        [str(PG_CTL), "-D", str(data), "-l", str(data / "log"), "-m", "fast", "-w", "restart"],
        user=user,
        stdout=subprocess.DEVNULL,  # the server inherits pg_ctl's output: no pipe to wait on
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=60,
    )


def track(url: str, what: str) -> None:
    """``pg_stat_statements.track`` for every session, open ones included (a reload): on the
    bench's own server only."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET pg_stat_statements.track = '{what}'".encode())
        conn.execute("SELECT pg_reload_conf()")


def reset(url: str) -> None:
    """Forget the figures of ``url``'s database (only its: the server may be shared)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_stat_statements_reset(0, oid, 0) FROM pg_database"
            " WHERE datname = current_database()"
        )


def top(url: str, limit: int = 20) -> list[Statement]:
    """The statements that took the most time since the last reset, most first."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(_TOP, (limit,)).fetchall()
    return [
        Statement(
            toplevel=bool(row[0]),
            calls=int(row[1]),
            total_ms=float(row[2]),
            rows=int(row[3]),
            query=" ".join(str(row[4]).split()),
        )
        for row in rows
    ]

"""Numbered SQL migrations, in tracks: the core's own tables, and whatever builds on them.

A library user creates only the core's table with ``payhooks.migrate(conn)``, or reads the
SQL files (``payhooks.plumbing.schema.CORE.files()``) into their own migration tool. The reference
service adds its shop's track on top. Each applied version is recorded in
``payhooks_migrations``; one advisory lock makes concurrent migrators safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from psycopg import sql

from payhooks.plumbing.db import Connection, query, translated

_LOCK = 0x70617968  # "payh": one migrator at a time across processes


@dataclass(frozen=True, slots=True, kw_only=True)
class Track:
    """A named, ordered series of ``NNNN_name.sql`` files shipped in a package folder."""

    name: str
    package: str
    folder: str = "migrations"

    def files(self) -> list[tuple[str, str]]:
        """(version, SQL) in order."""
        found: Traversable = resources.files(self.package) / self.folder
        names = sorted(p.name for p in found.iterdir() if p.name.endswith(".sql"))
        return [(n.removesuffix(".sql"), (found / n).read_text("utf-8")) for n in names]


CORE = Track(name="core", package="payhooks")

_TABLE = """
CREATE TABLE IF NOT EXISTS payhooks_migrations (
    track      text NOT NULL,
    version    text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (track, version)
)
"""
# Releases before the tracks kept one series in schema_migrations, which created the core's
# table in 0001_init and extended it in 0005_hardening: those count as the tracks' versions
# they equal. A version is adopted only where what it made is there, in this schema: a table
# of that name may belong to another migration tool (Rails, golang-migrate) and say nothing.
_ADOPT = """
INSERT INTO payhooks_migrations (track, version)
SELECT t.track, t.version FROM {legacy} s
JOIN (VALUES ('0001_init', 'core', '0001_processed_webhooks', 'processed_webhooks', 'body'),
             ('0001_init', 'shop', '0001_init', 'carts', 'customer_email'),
             ('0002_maintenance', 'shop', '0002_maintenance', 'maintenance_runs', 'rows_done'),
             ('0003_stock_slots', 'shop', '0003_stock_slots', 'product_stock', 'slot'),
             ('0004_outbox_indexes', 'shop', '0004_outbox_indexes', 'outbox', 'dedupe_key'),
             ('0005_hardening', 'core', '0002_references_and_copies', 'processed_webhooks',
              'first_copy'),
             ('0005_hardening', 'shop', '0005_captures', 'payments', 'captured_at'))
     AS t (legacy, track, version, made, made_column) ON t.legacy = s.version::text
WHERE EXISTS (SELECT 1 FROM information_schema.columns c
              WHERE c.table_schema = current_schema()
                AND c.table_name = t.made AND c.column_name = t.made_column)
ON CONFLICT DO NOTHING
"""
_LEGACY = """
SELECT 1 FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'schema_migrations'
  AND column_name = 'version'
"""


def migrate(conn: Connection, *tracks: Track) -> list[str]:
    """Apply, in one transaction, what is not yet applied of each track (the core's when none
    is named), in order; returns ``track/version`` of each applied. Safe to run concurrently."""
    applied: list[str] = []
    with translated(), conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        conn.execute(_TABLE)
        _adopt_legacy(conn)
        for track in tracks or (CORE,):
            applied += _apply(conn, track)
    return applied


def _adopt_legacy(conn: Connection) -> None:
    if query(conn, _LEGACY).fetchone() is None:
        return
    schema = query(conn, "SELECT current_schema()").fetchone()
    legacy = sql.Identifier(str(schema[0]) if schema else "public", "schema_migrations")
    conn.execute(sql.SQL(_ADOPT).format(legacy=legacy))


def _apply(conn: Connection, track: Track) -> list[str]:
    done = {
        row[0]
        for row in query(
            conn, "SELECT version FROM payhooks_migrations WHERE track = %s", (track.name,)
        )
    }
    applied = []
    for version, script in track.files():
        if version not in done:
            conn.execute(script.encode("utf-8"))
            conn.execute(
                "INSERT INTO payhooks_migrations (track, version) VALUES (%s, %s)",
                (track.name, version),
            )
            applied.append(f"{track.name}/{version}")
    return applied

"""Shop records' identifiers: new ones, opaque and unguessable, and the record one names."""

from __future__ import annotations

import secrets

from payhooks.plumbing.db import Connection, Named, named_row
from payhooks.plumbing.errors import NotFound


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def record(conn: Connection, sql: str, key: tuple[str, ...], what: str) -> Named:
    """The ``what`` that ``sql`` reads under ``key``, its columns named as the fields of the
    value it is made into, so no getter maps columns by position; ``NotFound`` when there is
    none, naming the key as the API shows it (``provider/payment_id``)."""
    found = named_row(conn, sql, key)
    if found is None:
        raise NotFound(what, "/".join(key))
    return found

"""Operators of the console and their passwords: who may log in, with what role (docs/console.md,
"Who gets in"). The console logs them in and keeps their sessions (``payhooks.console.auth``);
``payhooks operator`` adds, lists and removes them here, with no web framework imported.

Passwords are kept as scrypt hashes, each naming the cost it was made with.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import OperatorRefused

MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_CHARS = 1024  # scrypt takes any length; a megabyte password is an attack
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")

SCRYPT_COST = (14, 8, 1)
"""scrypt's cost for new hashes: log2 of n, r and p (about 40 ms and 16 MiB a hash). A hash
names the cost it was made with (``scrypt$ln=14,r=8,p=1$salt$digest``), so a later raise of
this cost leaves existing passwords valid."""
_UNNAMED_COST = (14, 8, 1)  # of the hashes made before costs were named: scrypt$salt$digest
_COSTS = re.compile(r"ln=([0-9]{1,2}),r=([0-9]{1,2}),p=([0-9])")
_MAX_MEMORY = 64 * 1024 * 1024  # scrypt takes 128 * r * n bytes: a stored cost beyond is refused


def _bearable(log_n: int, r: int, p: int) -> bool:
    """Whether a hash may be made or checked at this cost: n 2^10 or more, within 64 MiB."""
    return log_n >= 10 and r >= 1 and 1 <= p <= 4 and 128 * r * 2**log_n <= _MAX_MEMORY


def hash_password(password: str, cost: tuple[int, int, int] = SCRYPT_COST) -> str:
    """``password``'s scrypt hash, naming ``cost`` (one ``password_matches`` can check)."""
    log_n, r, p = cost
    if not _bearable(log_n, r, p):
        raise ValueError(f"scrypt cost {cost} is below n = 2^10 or needs more than 64 MiB")
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(
        password.encode(), salt=salt, n=2**log_n, r=r, p=p, maxmem=2 * _MAX_MEMORY
    )
    return "$".join(("scrypt", f"ln={log_n},r={r},p={p}", _b64(salt), _b64(digest)))


def password_matches(password: str, stored: str) -> bool:
    """Whether ``password`` is the one ``stored`` (a hash ``hash_password`` made) was made
    from; a hash of another scheme, or naming a cost out of bounds, matches nothing."""
    scheme, *parts = stored.split("$")
    if scheme != "scrypt" or len(parts) not in (2, 3):
        return False
    log_n, r, p = _UNNAMED_COST
    if len(parts) == 3:
        named = _COSTS.fullmatch(parts.pop(0))
        if named is None:
            return False
        log_n, r, p = (int(group) for group in named.groups())
        if not _bearable(log_n, r, p):
            return False
    try:
        salt, digest = (_unb64(part) for part in parts)
    except ValueError:  # not base64: no hash payhooks made
        return False
    given = hashlib.scrypt(
        password.encode(), salt=salt, n=2**log_n, r=r, p=p, maxmem=2 * _MAX_MEMORY
    )
    return hmac.compare_digest(given, digest)


@functools.cache
def decoy() -> str:
    """A hash to check unknown names against, so they take as long as known ones."""
    return hash_password(secrets.token_urlsafe(16))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode())


# A role given is set; none given keeps an existing operator's (a new one may act).
_ADD = """
INSERT INTO payhooks_operators (name, password_hash, read_only)
VALUES (%(name)s, %(hash)s, coalesce(%(read_only)s, false))
ON CONFLICT (name) DO UPDATE SET password_hash = excluded.password_hash,
    read_only = coalesce(%(read_only)s, payhooks_operators.read_only)
RETURNING (xmax = 0)
"""
_REMOVE = "DELETE FROM payhooks_operators WHERE name = %s"
_NAMES = "SELECT name, created_at, read_only FROM payhooks_operators ORDER BY name"
_HASH_OF = "SELECT password_hash FROM payhooks_operators WHERE name = %s"
_END_SESSIONS_OF = "DELETE FROM payhooks_console_sessions WHERE operator = %s"


def checked_name(name: str) -> str:
    """``name``, when it is an operator's name (``NAME_PATTERN``); else ``OperatorRefused``."""
    if not NAME_PATTERN.fullmatch(name):
        raise OperatorRefused(
            "an operator name is 1 to 63 lower-case letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def checked_password(password: str) -> str:
    """``password``, when its length is one a password may have; else ``OperatorRefused``."""
    if not MIN_PASSWORD_CHARS <= len(password) <= MAX_PASSWORD_CHARS:
        raise OperatorRefused(
            f"a password is {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters"
        )
    return password


def add_operator(
    conn: Connection, name: str, password: str, *, read_only: bool | None = None
) -> bool:
    """Add an operator, or set a new password (ending their sessions); True when added.
    ``read_only`` True: they may look and not act; False: they may act; None: a new operator
    may act, an existing one keeps their role."""
    params = {
        "name": checked_name(name),
        "hash": hash_password(checked_password(password)),
        "read_only": read_only,
    }
    row = conn.execute(_ADD, params).fetchone()
    conn.execute(_END_SESSIONS_OF, (name,))
    return bool(row and row[0])


def remove_operator(conn: Connection, name: str) -> bool:
    """Remove an operator; their sessions end with them (ON DELETE CASCADE)."""
    return conn.execute(_REMOVE, (name,)).rowcount == 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Operator:
    """An operator as ``payhooks operator list`` shows them: their name, when they were added,
    and whether they may only look."""

    name: str
    created_at: datetime
    read_only: bool


def operators(conn: Connection) -> list[Operator]:
    """Every operator, by name."""
    return [
        Operator(name=str(name), created_at=created, read_only=bool(read_only))
        for name, created, read_only in conn.execute(_NAMES)
    ]


def stored_hash(conn: Connection, name: str) -> str | None:
    """The password hash kept for ``name``, or None when no such operator is kept."""
    row = conn.execute(_HASH_OF, (name,)).fetchone()
    return None if row is None else str(row[0])

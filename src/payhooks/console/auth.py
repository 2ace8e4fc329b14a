"""Operators, their sessions and the login rate limit: the console's own door, apart from the
API token (docs/console.md, "Who gets in").

Passwords are kept as scrypt hashes. A session is a random token: the cookie carries it signed
(so a forged or stale cookie is refused before the database is asked), the database its
sha256, its operator, expiry and CSRF token. Logging out deletes the row; removing an operator
ends every session of theirs.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from itsdangerous import BadSignature, URLSafeTimedSerializer

from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import OperatorRefused

SESSION_LIFETIME = timedelta(hours=12)
MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_CHARS = 1024  # scrypt takes any length; a megabyte password is an attack
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")

# Failed logins allowed in the window, per operator name and per client address.
FAILURES_PER_NAME = 5
FAILURES_PER_CLIENT = 20
FAILURE_WINDOW = timedelta(minutes=15)

SCRYPT_COST = (14, 8, 1)
"""scrypt's cost for new hashes: log2 of n, r and p (about 40 ms and 16 MiB a hash). A hash
names the cost it was made with (``scrypt$ln=14,r=8,p=1$salt$digest``), so a later raise of
this cost leaves existing passwords valid."""
_UNNAMED_COST = (14, 8, 1)  # of the hashes made before costs were named: scrypt$salt$digest
_COSTS = re.compile(r"ln=([0-9]{1,2}),r=([0-9]{1,2}),p=([0-9])")
_MAX_MEMORY = 64 * 1024 * 1024  # scrypt takes 128 * r * n bytes: a stored cost beyond is refused
_COOKIE_SALT = "payhooks-console-session"


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
def _decoy() -> str:
    """A hash to check unknown names against, so they take as long as known ones."""
    return hash_password(secrets.token_urlsafe(16))


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode())


# --- operators -------------------------------------------------------------------------------

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


def checked_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise OperatorRefused(
            "an operator name is 1 to 63 lower-case letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def checked_password(password: str) -> str:
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
    name: str
    created_at: datetime
    read_only: bool


def operators(conn: Connection) -> list[Operator]:
    return [
        Operator(name=str(name), created_at=created, read_only=bool(read_only))
        for name, created, read_only in conn.execute(_NAMES)
    ]


# --- logging in ------------------------------------------------------------------------------

_FAILURES = """
SELECT count(*) FILTER (WHERE name = %s), count(*) FILTER (WHERE client = %s)
FROM payhooks_console_login_failures
WHERE (name = %s OR client = %s) AND failed_at > now() - %s
"""
_FAILED = "INSERT INTO payhooks_console_login_failures (name, client) VALUES (%s, %s)"
_FORGET_FAILURES = "DELETE FROM payhooks_console_login_failures WHERE name = %s"
_ONE_AT_A_TIME = """
SELECT pg_advisory_xact_lock(hashtext('payhooks-login-name:' || %s)),
       pg_advisory_xact_lock(hashtext('payhooks-login-client:' || %s))
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Login:
    """What a login attempt came to: the operator, or why not."""

    operator: str | None = None
    throttled: bool = False


def log_in(conn: Connection, name: str, password: str, client: str) -> Login:
    """Check a login, rate-limited per name and per client before any password is hashed.

    Attempts for one name, or from one client, are taken one at a time (a transaction-level
    advisory lock each, name first), so a burst of parallel guesses is counted as it goes and
    gets no more tries than a sequence would."""
    name = name[:64]
    with conn.transaction():
        conn.execute(_ONE_AT_A_TIME, (name, client))
        by_name, by_client = conn.execute(
            _FAILURES, (name, client, name, client, FAILURE_WINDOW)
        ).fetchone() or (0, 0)
        if by_name >= FAILURES_PER_NAME or by_client >= FAILURES_PER_CLIENT:
            return Login(throttled=True)
        row = conn.execute(_HASH_OF, (name,)).fetchone()
        acceptable = 0 < len(password) <= MAX_PASSWORD_CHARS
        stored = str(row[0]) if row else _decoy()
        matched = password_matches(password if acceptable else "", stored)
        if row is None or not matched or not acceptable:
            conn.execute(_FAILED, (name, client))
            return Login()
        conn.execute(_FORGET_FAILURES, (name,))
    return Login(operator=name)


# --- sessions --------------------------------------------------------------------------------

_KEY = """
WITH made AS (
    INSERT INTO payhooks_console_keys (id, secret) VALUES (1, %s) ON CONFLICT (id) DO NOTHING
    RETURNING secret)
SELECT secret FROM made UNION ALL SELECT secret FROM payhooks_console_keys WHERE id = 1
"""
_OPEN = """
INSERT INTO payhooks_console_sessions (token_sha256, operator, csrf_token, expires_at)
VALUES (%s, %s, %s, now() + %s)
"""
_SESSION = """
SELECT s.operator, s.csrf_token, o.read_only
FROM payhooks_console_sessions s JOIN payhooks_operators o ON o.name = s.operator
WHERE s.token_sha256 = %s AND s.expires_at > now()
"""
_CLOSE = "DELETE FROM payhooks_console_sessions WHERE token_sha256 = %s"
_END_SESSIONS_OF = "DELETE FROM payhooks_console_sessions WHERE operator = %s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    operator: str
    csrf_token: str
    read_only: bool = False
    """The operator may look and not act (read each request, so a change takes at once)."""


class Cookies:
    """Signs and reads the session cookie with the key every `payhooks serve` shares."""

    def __init__(self, secret: str) -> None:
        self._signer = URLSafeTimedSerializer(secret, salt=_COOKIE_SALT)

    @classmethod
    def of(cls, conn: Connection) -> Cookies:
        row = conn.execute(_KEY, (secrets.token_urlsafe(32),)).fetchone()
        assert row is not None  # one of the two branches always returns the key
        return cls(str(row[0]))

    def sign(self, token: str) -> str:
        return self._signer.dumps(token)

    def token(self, cookie: str | None) -> str | None:
        """The session token a cookie carries, or None when it is forged or too old."""
        if not cookie:
            return None
        try:
            token = self._signer.loads(cookie, max_age=int(SESSION_LIFETIME.total_seconds()))
        except BadSignature:
            return None
        return token if isinstance(token, str) else None


def open_session(conn: Connection, operator: str) -> tuple[str, Session]:
    """A new session for ``operator``: its token (for the cookie) and the session."""
    token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    conn.execute(_OPEN, (_digest(token), operator, csrf, SESSION_LIFETIME))
    return token, Session(operator=operator, csrf_token=csrf)


def session_of(conn: Connection, token: str | None) -> Session | None:
    if token is None:
        return None
    row = conn.execute(_SESSION, (_digest(token),)).fetchone()
    if row is None:
        return None
    return Session(operator=str(row[0]), csrf_token=str(row[1]), read_only=bool(row[2]))


def close_session(conn: Connection, token: str | None) -> None:
    if token is not None:
        conn.execute(_CLOSE, (_digest(token),))


def csrf_matches(session: Session, given: str | None) -> bool:
    return hmac.compare_digest((given or "").encode(), session.csrf_token.encode())


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()

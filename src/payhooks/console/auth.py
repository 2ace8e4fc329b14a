"""Logging in to the console, and the sessions it keeps: the console's own door, apart from the
API token (docs/console.md, "Who gets in"). The operators and their passwords are
``payhooks.operations.operators``'.

A session is a random token: the cookie carries it signed (so a forged or stale cookie is
refused before the database is asked), the database its sha256, its operator, expiry and CSRF
token. Logging out deletes the row; removing an operator ends every session of theirs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from itsdangerous import BadSignature, URLSafeTimedSerializer

from payhooks.operations.operators import MAX_PASSWORD_CHARS, decoy, password_matches, stored_hash
from payhooks.plumbing.db import Connection

SESSION_LIFETIME = timedelta(hours=12)

# Failed logins allowed in the window, per operator name and per client address.
FAILURES_PER_NAME = 5
FAILURES_PER_CLIENT = 20
FAILURE_WINDOW = timedelta(minutes=15)
_COOKIE_SALT = "payhooks-console-session"


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
        kept = stored_hash(conn, name)
        acceptable = 0 < len(password) <= MAX_PASSWORD_CHARS
        matched = password_matches(password if acceptable else "", kept or decoy())
        if kept is None or not matched or not acceptable:
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

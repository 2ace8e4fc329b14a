"""How work is tried again: a delivery whose transaction lost a serialization conflict
(``Retries``), and a gateway's API after a rate limit or outages (``Pausing``).

A 40001 or 40P01 (``payhooks.plumbing.errors.SerializationConflict``) means the server gave the
whole transaction up, so nothing of it is kept and running it again is safe: the claim, the handler
and the commit, from the start. Every front door hands ``payhooks.intake.endpoint`` that whole
function, so the retry is written once there, bounded by this policy (docs/scaling.md,
"Serialization failures").
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

from payhooks.plumbing.errors import CredentialsRefused, GatewayApiError

ANSWER_DEADLINE_MS = 5000
"""The gateways' acknowledgement deadline (Razorpay's 5 s, the shortest): every attempt and
every pause between them must fit inside it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Retries:
    """Up to ``attempts`` runs of one delivery's transaction; a retry begins only while less
    than ``window_s`` has passed since the first began, after a jittered pause that doubles
    from ``backoff_s`` (half to all of it, so twins that conflicted do not meet again)."""

    attempts: int = 3
    window_s: float = 0.5
    backoff_s: float = 0.02

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.window_s < 0 or self.backoff_s < 0:
            raise ValueError("retries need at least one attempt and no negative time")

    @classmethod
    def within(cls, pool_timeout_ms: int, transaction_timeout_ms: int) -> Retries:
        """Retries that never push an answer past the deadline: one begins only while a whole
        attempt (waiting for a connection, then the longest transaction) still fits."""
        spare_ms = ANSWER_DEADLINE_MS - pool_timeout_ms - transaction_timeout_ms
        return cls(window_s=max(0, spare_ms) / 1000)

    def pause(self, retry: int, elapsed_s: float, draw: float | None = None) -> float | None:
        """The wait before retry ``retry`` (1 for the second attempt), or None when none is
        left: the attempts spent, or the window closed by the time the retry would begin.
        ``draw`` (0 to 1) picks the jitter; a random one when not given."""
        if retry >= self.attempts:
            return None
        share = random.random() if draw is None else draw
        wait = self.backoff_s * 2 ** (retry - 1) * (0.5 + share / 2)
        return wait if elapsed_s + wait <= self.window_s else None


FAILURES_BEFORE_PAUSE = 3
RATE_LIMIT_WAIT = timedelta(minutes=1)


def asked_wait(error: GatewayApiError) -> timedelta:
    """How long the gateway asked one item to wait: its ``Retry-After``, and after a rate limit
    at least ``RATE_LIMIT_WAIT`` (PayU's "Requests limit reached" names no wait, and a 429's
    second is no promise the next call is welcome), as every pass reads a 429: the checkout,
    the callback or the refund asked waits the longer of this and its own backoff."""
    named = timedelta(seconds=error.retry_after_s or 0)
    return max(named, RATE_LIMIT_WAIT) if error.rate_limited else named


@dataclass(slots=True)
class Pausing:
    """One gateway's turn in a pass (reconciliation's, confirmation's, the refund sender's): a
    429, refused credentials, or ``FAILURES_BEFORE_PAUSE`` outages in a row (5xx, no answer,
    too slow, too large) pause it, and the rest of its turn waits for a later pass."""

    outages: int = 0

    def after(self, error: GatewayApiError | None) -> timedelta | None:
        """How long the rest of the turn waits once the gateway answered ``error`` (None: it
        answered usefully); None while it goes on. What the gateway asked for, at least a
        minute: never one item's own (possibly hours-long) backoff. A 4xx about one item pauses
        nothing, and breaks a run of outages."""
        if error is None:
            self.outages = 0
            return None
        self.outages = self.outages + 1 if error.outage else 0
        refused = isinstance(error, CredentialsRefused)
        if not (error.rate_limited or refused or self.outages >= FAILURES_BEFORE_PAUSE):
            return None
        if error.retry_after_s is not None:
            return max(timedelta(seconds=error.retry_after_s), RATE_LIMIT_WAIT)
        return RATE_LIMIT_WAIT


__all__ = [
    "ANSWER_DEADLINE_MS",
    "FAILURES_BEFORE_PAUSE",
    "RATE_LIMIT_WAIT",
    "Pausing",
    "Retries",
    "asked_wait",
]

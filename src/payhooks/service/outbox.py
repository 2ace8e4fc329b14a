"""The shop's messages on the core's outbound queue (``payhooks.operations.outbox``): a
customer's email or an alert to the operators' address, enqueued in the same transaction as
the order it concerns and sent by the worker after commit (``payhooks.service.sender``)."""

from __future__ import annotations

from dataclasses import dataclass

from payhooks.operations.outbox import (
    Message,
    MessageKind,
    Pending,
    counts,
    dead_letter,
    enqueue,
    failed,
    mark_sent,
    retry_later,
    revive,
    to_the_back,
)
from payhooks.operations.outbox import hold_next as next_due


def alert(dedupe_key: str, subject: str, body: str, **payload: object) -> Message:
    """An alert to PAYHOOKS_ALERT_EMAIL, read when it is sent."""
    return Message(
        kind=MessageKind.ALERT, dedupe_key=dedupe_key, subject=subject, body=body, payload=payload
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter for a message the SMTP server turned away for now;
    dead-lettered at the last attempt."""

    base_seconds: float = 30.0
    cap_seconds: float = 3600.0
    max_attempts: int = 8

    def delay(self, attempts: int, jitter: float) -> float:
        """``jitter`` in [0, 1) spreads retries between half and the whole of the step."""
        step = min(self.cap_seconds, self.base_seconds * 2.0 ** max(0, attempts - 1))
        return step * (0.5 + jitter / 2)


__all__ = [
    "Message",
    "MessageKind",
    "Pending",
    "RetryPolicy",
    "alert",
    "counts",
    "dead_letter",
    "enqueue",
    "failed",
    "mark_sent",
    "next_due",
    "retry_later",
    "revive",
    "to_the_back",
]

"""What to answer a gateway: one table from outcomes and errors to HTTP status and body,
shared by the reference service and every framework integration (docs/api.md).

Permanent conditions answer 200 so the gateway stops retrying; only what may succeed later
(the database busy or away, a handler's bug) answers 5xx, so the gateway tries again.
``log_name`` is the one stable log name for each refusal, in every integration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from payhooks.intake.ingest import Outcome, Receipt
from payhooks.plumbing import errors

STATUS_OF_OUTCOME = {outcome: 200 for outcome in Outcome}
STATUS_OF_ERROR: list[tuple[type[errors.PayhooksError], int, str]] = [
    (errors.ConfirmationsFull, 503, "confirmations_full"),
    (errors.SettingsRefused, 503, "settings_refused"),
    (errors.PayloadTooLarge, 413, "payload_too_large"),
    (errors.LengthRequired, 411, "length_required"),
    (errors.UnsignedChargeback, 401, "unsigned_chargeback"),
    (errors.SignatureMismatch, 401, "signature_mismatch"),
    (errors.MalformedPayload, 400, "malformed_payload"),
    (errors.ProviderNotConfigured, 404, "provider_not_configured"),
    (errors.NotCommitted, 503, "not_committed"),
    (errors.DatabaseUnavailable, 503, "database_unavailable"),
    (errors.Unauthorised, 401, "unauthorised"),
    (errors.NotFound, 404, "not_found"),
    (errors.Conflict, 409, "conflict"),
    (errors.InvalidRequest, 422, "invalid_request"),
    (errors.HandlerCommitted, 500, "handler_committed"),
]
MAX_DETAIL_CHARS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """What a door answers the gateway: an HTTP status and its JSON body."""

    status: int
    body: dict[str, Any]


def error_status(exc: errors.PayhooksError) -> tuple[int, str]:
    """The status and error code an error is answered with, from the one table
    (``STATUS_OF_ERROR``); 500 ``internal_error`` for any other."""
    for kind, status, code in STATUS_OF_ERROR:
        if isinstance(exc, kind):
            return status, code
    return 500, "internal_error"


def log_name(status: int) -> str:
    """``webhook_failed`` for a handler's bug (500), ``webhook_unavailable`` for what the
    database refused (503), ``webhook_rejected`` for the rest."""
    if status >= 500:
        return "webhook_unavailable" if status == 503 else "webhook_failed"
    return "webhook_rejected"


def clipped(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """At most ``limit`` characters: error details can quote what a client sent."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def declared_over(content_length: str, limit: int) -> bool:
    """Whether a declared ``Content-Length`` is over ``limit``: refused before a byte is read.
    Past 18 digits it is over any bound (and ``int()`` refuses strings past 4,300 digits)."""
    if not (content_length.isascii() and content_length.isdigit()):
        return False
    return len(content_length) > 18 or int(content_length) > limit


def answer(receipt: Receipt) -> Answer:
    """The answer to a delivery that was claimed (or found to be a duplicate)."""
    return Answer(
        status=STATUS_OF_OUTCOME[receipt.outcome],
        body={
            "status": receipt.outcome.value,
            "event_id": receipt.event.event_id,
            "order_id": receipt.order_id,
        },
    )


def error_answer(exc: errors.PayhooksError) -> Answer:
    """The answer to a delivery refused or not taken: says why, briefly."""
    status, code = error_status(exc)
    detail = getattr(exc, "reason", None) or str(exc)
    return Answer(status=status, body={"error": code, "detail": clipped(detail)})


__all__ = [
    "STATUS_OF_ERROR",
    "STATUS_OF_OUTCOME",
    "Answer",
    "answer",
    "clipped",
    "declared_over",
    "error_answer",
    "error_status",
    "log_name",
]

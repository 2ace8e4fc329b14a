"""Structured logs: one JSON object per line, the message being a stable event name.

payhooks logs ``log.info("webhook_processed", extra={"provider": ..., "event_id": ...})``;
everything in ``extra`` becomes a field. Secrets, signatures and bodies are never passed.
Python's default output prints the name alone (``webhook_rejected``): an app that has no
formatter of its own showing the fields gives payhooks' loggers this one (``configure``, or
``JsonFormatter`` in its own logging setup). The reference service runs with it.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """A record as one JSON line: its time, level, logger, event name and every field."""

    def format(self, record: logging.LogRecord) -> str:
        """The line: the standard attributes named once, then the record's own fields."""
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: int = logging.INFO) -> None:
    """JSON lines on stderr for payhooks' own loggers (``payhooks`` and those below it), from
    ``level`` up; other loggers are left as they are."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("payhooks")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def failure_logged(
    log: logging.Logger, event: str, exc: BaseException, limit: int = 500, /, **fields: object
) -> str:
    """One item of a pass failing on what nobody foresaw (the database refusing its
    bookkeeping, a handler raising), called where it is caught: logged as ``event`` with the
    traceback and ``fields``, and its cause (``Type: words``, at most ``limit`` characters)
    returned, for the item's own record of why, while the pass goes on to the others."""
    reason = f"{type(exc).__name__}: {exc}"[:limit]
    log.exception(event, extra={**fields, "error": reason}, stacklevel=2)
    return reason


__all__ = ["JsonFormatter", "configure", "failure_logged"]

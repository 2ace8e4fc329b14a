"""An operator's JSON read (webhook health, a payment's timeline), answered alike by every door
that serves one (``payhooks.starlette.health_route`` and ``timeline_route``,
``payhooks.flask.health_blueprint`` and ``timeline_blueprint``): what it read; a query that
does not read, 400; and what the database refused (away, busy, the read's connection ended
under it) from the one table the webhooks are answered from (``payhooks.intake.answers``),
503 ``database_unavailable``, never a bare 500. The read's connection is its own
(``payhooks.operations.deliverylog.OwnConnection``): one found lost is dropped, and the next
read opens another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from payhooks.intake.answers import Answer, error_answer
from payhooks.operations.deliverylog import Side
from payhooks.operations.timeline import UnreadableQuery
from payhooks.plumbing.db import Connection
from payhooks.plumbing.errors import PayhooksError

Read = Callable[[Connection], dict[str, Any]]
"""What an operator's ``GET`` reads, on the read's own connection, to answer as JSON."""


def answered(side: Side, read: Read) -> Answer:
    """``read`` on ``side``, as the answer to give (call it off the event loop)."""
    try:
        return Answer(status=200, body=side.run(read))
    except UnreadableQuery as exc:
        return Answer(status=400, body={"error": str(exc)})
    except PayhooksError as exc:
        return error_answer(exc)


__all__ = ["Read", "answered"]

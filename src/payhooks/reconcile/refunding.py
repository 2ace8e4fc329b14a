"""A pass of the refund sender (``payhooks.refunding.sending``) with the gateways' own clients, over
httpx: what ``payhooks refunds send``, the reference worker and a merchant's scheduler run.

::

    from payhooks.reconcile.refunding import send
    tally = send("postgresql://shop@db/shop")   # every few seconds, beside the app
    print(tally.summary())

The gateways' API credentials are read from the environment under the reference service's
names (``PAYHOOKS_RAZORPAY_KEY_ID``, ...), as reconciliation reads them."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from functools import partial

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS, ApiCredentials, credentials
from payhooks.gateways._refunds import Refund, processed_delivery
from payhooks.gateways._status import client, http_client
from payhooks.reconcile.parts import Connect, Deliver
from payhooks.reconcile.running import TIMEOUT_S, connecting
from payhooks.refunding.sending import RefundClient, Tally, send_due


def send_once(
    connect: Connect,
    found: Mapping[Provider, ApiCredentials],
    *,
    timeout_s: float = TIMEOUT_S,
    limit: int = 50,
    stop: Callable[[], bool] = lambda: False,
    deliver: Deliver | None = None,
    erring: bool = False,
) -> Tally:
    """One pass over the due refund intents of each gateway in ``found`` payhooks refunds.
    ``deliver`` (``running.delivering`` through the app's hooks): each refund the gateway says
    processed is delivered through it as its refund webhook would be (``processed_delivery``),
    before its intent is closed, so the app records it even when that webhook never comes.
    With ``erring`` (a door's one pass), the intents waiting again after an error are counted
    too (``Tally.erring``)."""
    settle = None if deliver is None else partial(_delivered, deliver)
    with http_client(timeout_s) as http:
        clients: dict[Provider, RefundClient] = {
            p: client(c, http)  # type: ignore[misc]  # a status client that sends refunds
            for p, c in found.items()
            if GATEWAYS[p].sends_refunds
        }
        return send_due(connect, clients, limit=limit, stop=stop, settle=settle, erring=erring)


def _delivered(deliver: Deliver, refund: Refund) -> None:
    """The processed refund through the app's hooks: one they raise on rolls back, and its
    intent stays open, asked about (and delivered) again."""
    deliver(processed_delivery(refund), then=lambda *_: None)


WAITING = """
SELECT provider, count(*) FROM payhooks_refunds
WHERE state = 'requested' AND provider = ANY(%s)
GROUP BY provider
"""


def unsendable(connect: Connect, found: Mapping[Provider, ApiCredentials]) -> dict[Provider, int]:
    """The refund intents waiting to be sent (``requested``) of each gateway payhooks refunds
    through that has no API credentials in ``found``: no pass with ``found`` sends them."""
    missing = [p.value for p, g in GATEWAYS.items() if g.sends_refunds and p not in found]
    if not missing:
        return {}
    with connect() as conn:
        rows = conn.execute(WAITING, (missing,)).fetchall()
    return {Provider(provider): int(count) for provider, count in sorted(rows)}


def send(database_url: str, *, environ: Mapping[str, str] | None = None, limit: int = 50) -> Tally:
    """One pass on ``database_url`` with the credentials in ``environ`` (default: the
    process's environment)."""
    found = credentials(os.environ if environ is None else environ)
    return send_once(connecting(database_url), found, limit=limit)


__all__ = ["send", "send_once", "unsendable"]

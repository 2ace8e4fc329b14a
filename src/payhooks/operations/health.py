"""Webhook health per gateway, from the delivery log (``payhooks_deliveries``) and the claim's
records: when each gateway was last answered 2xx, its answers by status in the last hour, the
signature failures among them (the forged-signature banner), its parked deliveries, and the
callbacks its status API refuted in the last day (a credential someone else holds).

A spike of signature failures is usually a secret rotated in the gateway's dashboard and not
yet added to payhooks' configuration (every genuine delivery refused), or someone forging
deliveries: either way an operator must see it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from payhooks.gateways import GATEWAYS
from payhooks.plumbing.db import Connection, query

# A banner when, in the last hour, a gateway had at least this many signature failures,
# making up at least this share of its answers.
SIGNATURE_FAILURES_TO_WARN = 5
SIGNATURE_FAILURE_SHARE = 0.2
SIGNATURE_OUTCOME = "signature_mismatch"
"""What the log files a signature failure under. Not every 401 is one: a notice the gateway
sends unsigned (PayU's chargebacks) is refused 401 ``unsigned_chargeback``."""

# By gateway, over the last hour: every answer, the 5xx, the signature failures. A line stands
# for ``repeats`` requests (a minute's refusals of one kind past the first few are one line,
# ``payhooks.operations.deliverylog``): requests are counted by their sum, never by rows.
FAILED = "status >= 500 AND outcome <> 'confirmations_full'"
"""A line of a failed answer: a 5xx, but for payhooks' own refusal of callbacks past a bound
(``ConfirmationsFull``: whoever holds a credential, or a signed PayU post, can send those; the
callbacks waiting have a banner of their own), which the banners never read as failing."""
LAST_HOUR = f"""
SELECT provider, sum(repeats), coalesce(sum(repeats) FILTER (WHERE {FAILED}), 0),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'signature_mismatch'), 0)
FROM payhooks_deliveries WHERE received_at > %(now)s - interval '1 hour'
GROUP BY 1 ORDER BY 1
"""
_BY_STATUS = """
SELECT provider, status, sum(repeats),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'signature_mismatch'), 0)
FROM payhooks_deliveries WHERE received_at > %(now)s - interval '1 hour'
GROUP BY 1, 2 ORDER BY 1, 2
"""
# One read of the index payhooks_deliveries_answered per gateway, however long ago.
LAST_ANSWERED = """
SELECT g.provider,
       (SELECT max(d.received_at) FROM payhooks_deliveries d
        WHERE d.provider = g.provider AND d.status < 300)
FROM unnest(%(providers)s::text[]) AS g (provider)
"""
_PARKED = """
SELECT provider, count(*) FROM processed_webhooks WHERE outcome = 'parked' GROUP BY 1
"""
# Callbacks resting on a static credential that the gateway's API refuted in the last day
# (``payhooks.intake.confirmations``): through the partial index payhooks_confirmations_refuted.
# One a person refuted by hand (``confirmations.BY_HAND``) is no word of the API's.
REFUTED = """
SELECT provider, count(*) FROM payhooks_confirmations
WHERE verdict = 'refuted' AND settled_at > %(now)s - interval '24 hours'
  AND detail NOT LIKE 'settled by hand: %%'
GROUP BY 1 ORDER BY 1
"""


def forged(total: int, refused: int) -> bool:
    """Whether ``refused`` signature failures among ``total`` answers in an hour warn."""
    return refused >= SIGNATURE_FAILURES_TO_WARN and refused >= SIGNATURE_FAILURE_SHARE * total


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayHealth:
    """One gateway's answers in the last hour, its last 2xx, its parked deliveries
    and its refuted callbacks."""

    provider: str
    last_2xx: datetime | None
    """The last answer 2xx, however long ago."""
    by_status: dict[int, int]
    """Answers in the last hour, by HTTP status."""
    signature_refused: int = 0
    """Requests refused for their signature in the last hour."""
    parked: int = 0
    refuted: int = 0
    """Callbacks its status API refuted in the last day: forged under the right credential
    (PhonePe's header, Juspay's Basic, PayU's refund callbacks), or stale."""

    @property
    def answered(self) -> int:
        """Requests answered in the last hour."""
        return sum(self.by_status.values())

    @property
    def forged(self) -> bool:
        """The forged-signature banner's condition, for this gateway."""
        return forged(self.answered, self.signature_refused)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Webhook health per gateway at one moment, as the console and the health routes show it."""

    at: datetime
    gateways: list[GatewayHealth]

    @property
    def forged(self) -> list[str]:
        """The gateways under the forged-signature banner."""
        return [gateway.provider for gateway in self.gateways if gateway.forged]

    @property
    def refuted(self) -> list[str]:
        """The gateways with callbacks their API refuted in the last day."""
        return [gateway.provider for gateway in self.gateways if gateway.refuted]

    def as_json(self) -> dict[str, Any]:
        """The summary as the health routes answer it."""
        return {
            "at": self.at.isoformat(),
            "forged_signatures": self.forged,
            "refuted_callbacks": self.refuted,
            "gateways": [
                {
                    "provider": g.provider,
                    "last_2xx_at": None if g.last_2xx is None else g.last_2xx.isoformat(),
                    "last_hour": {str(status): n for status, n in g.by_status.items()},
                    "signature_refused_last_hour": g.signature_refused,
                    "parked": g.parked,
                    "forged_signatures": g.forged,
                    "refuted_last_day": g.refuted,
                }
                for g in self.gateways
            ],
        }


def last_answered(conn: Connection, providers: list[str]) -> dict[str, datetime | None]:
    """When each of ``providers`` was last answered 2xx."""
    return dict(query(conn, LAST_ANSWERED, {"providers": providers}).fetchall())


def refuted_last_day(conn: Connection, now: datetime) -> dict[str, int]:
    """Callbacks each gateway's API refuted in the day before ``now``."""
    return {str(p): int(n) for p, n in query(conn, REFUTED, {"now": now}).fetchall()}


def summary(conn: Connection, now: datetime) -> Summary:
    """Every gateway payhooks knows, then any other the log names (a path a client chose)."""
    counted: dict[str, dict[int, int]] = {}
    signature: dict[str, int] = {}
    for provider, status, count, signatures in query(conn, _BY_STATUS, {"now": now}):
        counted.setdefault(provider, {})[status] = count
        signature[provider] = signature.get(provider, 0) + signatures
    parked: dict[str, int] = dict(query(conn, _PARKED).fetchall())
    refuted = refuted_last_day(conn, now)
    known = [p.value for p in GATEWAYS]
    providers = known + sorted(counted.keys() - set(known))
    last = last_answered(conn, providers)
    gateways = [
        GatewayHealth(
            provider=p,
            last_2xx=last.get(p),
            by_status=counted.get(p, {}),
            signature_refused=signature.get(p, 0),
            parked=parked.get(p, 0),
            refuted=refuted.get(p, 0),
        )
        for p in providers
    ]
    return Summary(at=now, gateways=gateways)


__all__ = [
    "GatewayHealth",
    "Summary",
    "forged",
    "last_answered",
    "refuted_last_day",
    "summary",
]

"""Webhook health per gateway over the last 24 hours, from the delivery log: answers by class,
hour by hour, and the two warnings an operator must not miss.

- Repeated 5xx answers: Razorpay disables a webhook endpoint that keeps failing for 24 hours,
  and every gateway stops retrying at some point; each 5xx is a payment waiting.
- A spike of signature failures: usually a secret rotated in the gateway's dashboard and not
  yet added to payhooks' configuration; every genuine delivery is being refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from payhooks.db import Connection
from payhooks.events import Provider

HOURS = 24
# A banner when, in the last hour, a gateway was answered 5xx at least this often ...
FAILURES_TO_WARN = 3
# ... or had at least this many signature failures, making up at least this share.
SIGNATURE_FAILURES_TO_WARN = 5
SIGNATURE_FAILURE_SHARE = 0.2


class Answer(StrEnum):
    """Classes of answer, in the order they are stacked."""

    APPLIED = "applied"  # processed, ignored
    DUPLICATE = "duplicate"
    PARKED = "parked"
    SIGNATURE = "signature refused"  # 401
    REFUSED = "refused"  # other 4xx
    FAILED = "failed"  # 5xx


_BY_HOUR = """
SELECT provider, date_trunc('hour', received_at, 'UTC') AS hour,
       count(*) FILTER (WHERE status < 300 AND outcome IN ('processed', 'ignored')),
       count(*) FILTER (WHERE outcome = 'duplicate'),
       count(*) FILTER (WHERE outcome = 'parked'),
       count(*) FILTER (WHERE status = 401),
       count(*) FILTER (WHERE status >= 400 AND status < 500 AND status <> 401),
       count(*) FILTER (WHERE status >= 500)
FROM deliveries
WHERE received_at >= date_trunc('hour', %(now)s, 'UTC') - make_interval(hours => %(hours)s - 1)
GROUP BY 1, 2
"""
_LAST_HOUR = """
SELECT provider, count(*), count(*) FILTER (WHERE status >= 500),
       count(*) FILTER (WHERE status = 401)
FROM deliveries WHERE received_at > %(now)s - interval '1 hour'
GROUP BY 1 ORDER BY 1
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hour:
    start: datetime
    counts: dict[Answer, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class Gateway:
    provider: str
    hours: list[Hour]

    @property
    def totals(self) -> dict[Answer, int]:
        return {a: sum(h.counts[a] for h in self.hours) for a in Answer}

    @property
    def peak(self) -> int:
        return max((h.total for h in self.hours), default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Alarm:
    provider: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    gateways: list[Gateway]
    alarms: list[Alarm]


def health(conn: Connection, now: datetime, *, hours: int = HOURS) -> Health:
    """Hours are UTC hours, whatever the database's time zone (India's is half an hour off)."""
    now = now.astimezone(UTC)
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)
    starts = [start + timedelta(hours=n) for n in range(hours)]
    counted: dict[tuple[str, datetime], dict[Answer, int]] = {}
    for provider, hour, *counts in conn.execute(_BY_HOUR, {"now": now, "hours": hours}):
        counted[(provider, hour)] = dict(zip(Answer, counts, strict=True))
    providers = [p.value for p in Provider] + sorted(
        {p for p, _ in counted} - {p.value for p in Provider}
    )
    empty = dict.fromkeys(Answer, 0)
    gateways = [
        Gateway(
            provider=p, hours=[Hour(start=s, counts=counted.get((p, s), empty)) for s in starts]
        )
        for p in providers
    ]
    return Health(gateways=gateways, alarms=alarms(conn, now))


def alarms(conn: Connection, now: datetime) -> list[Alarm]:
    """5xx answers first (payments are waiting), then signature failures; by gateway."""
    failing: list[Alarm] = []
    found: list[Alarm] = []
    for provider, total, failed, forged in conn.execute(_LAST_HOUR, {"now": now}):
        if failed >= FAILURES_TO_WARN:
            failing.append(
                Alarm(
                    provider=provider,
                    text=(
                        f"{provider}: {failed} of {total} deliveries in the last hour were "
                        "answered 5xx. The gateway retries them for a while, then gives up; "
                        "Razorpay disables an endpoint that keeps failing for 24 hours."
                    ),
                )
            )
        if forged >= SIGNATURE_FAILURES_TO_WARN and forged >= SIGNATURE_FAILURE_SHARE * total:
            found.append(
                Alarm(
                    provider=provider,
                    text=(
                        f"{provider}: {forged} of {total} deliveries in the last hour failed "
                        "the signature check. Was a webhook secret rotated in the gateway's "
                        "dashboard and not yet added to payhooks' configuration?"
                    ),
                )
            )
    return failing + found


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One stacked segment of the chart, in SVG units."""

    x: float
    y: float
    width: float
    height: float
    answer: str
    title: str


CHART_WIDTH = 480
CHART_HEIGHT = 80


def chart(gateway: Gateway) -> list[Bar]:
    """Stacked bars, one per hour, scaled to the busiest hour."""
    peak = gateway.peak or 1
    slot = CHART_WIDTH / max(len(gateway.hours), 1)
    bars: list[Bar] = []
    for n, hour in enumerate(gateway.hours):
        top = float(CHART_HEIGHT)
        for answer in Answer:
            count = hour.counts[answer]
            if not count:
                continue
            height = CHART_HEIGHT * count / peak
            top -= height
            bars.append(
                Bar(
                    x=n * slot + 1,
                    y=top,
                    width=slot - 2,
                    height=height,
                    answer=answer.name.lower(),
                    title=f"{hour.start:%H:00} {answer.value}: {count}",
                )
            )
    return bars

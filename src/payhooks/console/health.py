"""Webhook health per gateway over the last 24 hours, from the delivery log: answers by class,
hour by hour, when each gateway was last answered 2xx, and the warnings an operator must not
miss (``payhooks.operations.alarms``: repeated 5xx answers, signature failures, refuted callbacks;
the notifier sends the same ones by email and chat, ``payhooks.operations.alerts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from payhooks.gateways import GATEWAYS
from payhooks.operations.alarms import (  # noqa: F401  (the console's names, kept where they were)
    FAILURES_TO_WARN,
    RETRY_WINDOWS,
    SLOW_FAILURE_HOURS,
    SLOW_FAILURE_SHARE,
    SLOW_FAILURES_TO_WARN,
    Alarm,
    Stamp,
    alarms,
    in_utc,
)
from payhooks.operations.health import LAST_ANSWERED as _LAST_ANSWERED  # noqa: F401  (tests read it)
from payhooks.operations.health import last_answered
from payhooks.plumbing.db import Connection

HOURS = 24


class Answer(StrEnum):
    """Classes of answer, in the order they are stacked."""

    APPLIED = "applied"  # processed or ignored
    WAITING = "waiting"  # confirming: for the status API, nothing applied until it says
    DUPLICATE = "duplicate"
    PARKED = "parked"
    SIGNATURE = "signature refused"  # 401 signature_mismatch
    REFUSED = "refused"  # other 4xx (an unsigned chargeback's 401 too)
    FAILED = "failed"  # 5xx


# Requests, not lines: a line stands for ``repeats`` of them (a minute's refusals of one kind
# past the first few, ``payhooks.operations.deliverylog``). The hours a gateway failed in stay a
# count.
_BY_HOUR = """
SELECT provider, date_trunc('hour', received_at, 'UTC') AS hour,
       coalesce(sum(repeats) FILTER (
           WHERE status < 300 AND outcome IN ('processed', 'ignored')), 0),
       coalesce(sum(repeats) FILTER (WHERE status < 300 AND outcome = 'confirming'), 0),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'duplicate'), 0),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'parked'), 0),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'signature_mismatch'), 0),
       coalesce(sum(repeats) FILTER (
           WHERE status >= 400 AND status < 500 AND outcome <> 'signature_mismatch'), 0),
       coalesce(sum(repeats) FILTER (WHERE status >= 500), 0)
FROM payhooks_deliveries
WHERE received_at >= date_trunc('hour', %(now)s, 'UTC') - make_interval(hours => %(hours)s - 1)
GROUP BY 1, 2
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
    last_2xx: datetime | None = None  # the last answer 2xx, however long ago

    @property
    def totals(self) -> dict[Answer, int]:
        return {a: sum(h.counts[a] for h in self.hours) for a in Answer}

    @property
    def peak(self) -> int:
        return max((h.total for h in self.hours), default=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    gateways: list[Gateway]
    alarms: list[Alarm]


def health(conn: Connection, now: datetime, *, hours: int = HOURS, when: Stamp = in_utc) -> Health:
    """Hours are UTC hours, whatever the database's time zone (India's is half an hour off).
    A time in a banner's words is written by ``when`` (the console's, in its zone)."""
    now = now.astimezone(UTC)
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=hours - 1)
    starts = [start + timedelta(hours=n) for n in range(hours)]
    counted: dict[tuple[str, datetime], dict[Answer, int]] = {}
    for provider, hour, *counts in conn.execute(_BY_HOUR, {"now": now, "hours": hours}):
        counted[(provider, hour)] = dict(zip(Answer, counts, strict=True))
    served = [p.value for p in GATEWAYS]
    providers = served + sorted({p for p, _ in counted} - set(served))
    empty = dict.fromkeys(Answer, 0)
    last = last_answered(conn, providers)
    gateways = [
        Gateway(
            provider=p,
            hours=[Hour(start=s, counts=counted.get((p, s), empty)) for s in starts],
            last_2xx=last.get(p),
        )
        for p in providers
    ]
    return Health(gateways=gateways, alarms=alarms(conn, now, when=when))


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One stacked segment of the chart, in SVG units."""

    x: float
    y: float
    width: float
    height: float
    answer: str
    title: str
    start: datetime
    count: int


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
                    title=f"{answer.value}: {count}",
                    start=hour.start,
                    count=count,
                )
            )
    return bars

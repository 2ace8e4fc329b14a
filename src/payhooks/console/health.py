"""Webhook health per gateway over the last 24 hours, from the delivery log: answers by class,
hour by hour, when each gateway was last answered 2xx, and the warnings an operator must not
miss.

- Repeated 5xx answers: Razorpay disables a webhook endpoint that keeps failing for 24 hours,
  and every gateway stops retrying at some point; each 5xx is a payment waiting. A burst in
  the last hour warns at once; a slow failure (a few an hour) warns once it has lasted a few
  hours of the gateway's retry window and is a share of its answers there, not the odd 503
  of a busy, healthy shop.
- A spike of signature failures: usually a secret rotated in the gateway's dashboard and not
  yet added to payhooks' configuration; every genuine delivery is being refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from payhooks.db import Connection
from payhooks.events import Provider
from payhooks.gateways import GATEWAYS
from payhooks.health import LAST_ANSWERED as _LAST_ANSWERED  # noqa: F401  (tests read it)
from payhooks.health import LAST_HOUR, forged, last_answered, refuted_last_day

HOURS = 24
# A banner when, in the last hour, a gateway was answered 5xx at least this often ...
FAILURES_TO_WARN = 3
# ... or had enough signature failures (``payhooks.health.forged``).
# A banner too when, over its retry window, a gateway was answered 5xx at least this often,
# in at least this many different hours (a slow failure, not one restart's burst), making up
# at least this share of its answers there (a busy shop's one 503 in 500 is no failure; a
# quiet one's one or two an hour is). Not cleared by a later 2xx: a slow failure has them.
SLOW_FAILURES_TO_WARN = 6
SLOW_FAILURE_HOURS = 3
SLOW_FAILURE_SHARE = 0.02
# How long each gateway keeps retrying a delivery answered 5xx (its ``retry_window``).
RETRY_WINDOWS = {provider: found.retry_window for provider, found in GATEWAYS.items()}


class Answer(StrEnum):
    """Classes of answer, in the order they are stacked."""

    APPLIED = "applied"  # processed, ignored, or kept for its gateway's API to confirm
    DUPLICATE = "duplicate"
    PARKED = "parked"
    SIGNATURE = "signature refused"  # 401
    REFUSED = "refused"  # other 4xx
    FAILED = "failed"  # 5xx


# Requests, not lines: a line stands for ``repeats`` of them (a minute's refusals of one kind
# past the first few, ``payhooks.deliverylog``). The hours a gateway failed in stay a count.
_BY_HOUR = """
SELECT provider, date_trunc('hour', received_at, 'UTC') AS hour,
       coalesce(sum(repeats) FILTER (
           WHERE status < 300 AND outcome IN ('processed', 'ignored', 'confirming')), 0),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'duplicate'), 0),
       coalesce(sum(repeats) FILTER (WHERE outcome = 'parked'), 0),
       coalesce(sum(repeats) FILTER (WHERE status = 401), 0),
       coalesce(sum(repeats) FILTER (WHERE status >= 400 AND status < 500 AND status <> 401), 0),
       coalesce(sum(repeats) FILTER (WHERE status >= 500), 0)
FROM payhooks_deliveries
WHERE received_at >= date_trunc('hour', %(now)s, 'UTC') - make_interval(hours => %(hours)s - 1)
GROUP BY 1, 2
"""
_OVER_WINDOW = """
SELECT d.provider, sum(d.repeats), coalesce(sum(d.repeats) FILTER (WHERE d.status >= 500), 0),
       count(DISTINCT date_trunc('hour', d.received_at, 'UTC')) FILTER (WHERE d.status >= 500)
FROM unnest(%(providers)s::text[], %(windows)s::interval[]) AS w (provider, span)
JOIN payhooks_deliveries d ON d.provider = w.provider AND d.received_at > %(now)s - w.span
WHERE d.received_at > %(now)s - %(longest)s
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
    last_2xx: datetime | None = None  # the last answer 2xx, however long ago

    @property
    def totals(self) -> dict[Answer, int]:
        return {a: sum(h.counts[a] for h in self.hours) for a in Answer}

    @property
    def peak(self) -> int:
        return max((h.total for h in self.hours), default=0)


class Trouble(StrEnum):
    """What a banner is about, and so which requests it leads to."""

    FAILED = "failed"  # answered 5xx
    SIGNATURE = "signature"  # refused for their signature
    REFUTED = "refuted"  # contradicted by the gateway's API


_LEADS_TO = {
    Trouble.FAILED: ("answer=failed", "deliveries answered 5xx"),
    Trouble.SIGNATURE: ("answer=signature", "deliveries refused for their signature"),
    Trouble.REFUTED: ("answer=refuted", "refuted callbacks"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Alarm:
    provider: str
    text: str
    trouble: Trouble = Trouble.FAILED

    @property
    def query(self) -> str:
        """The deliveries list's filter for the requests the banner is about."""
        return f"gateway={self.provider}&{_LEADS_TO[self.trouble][0]}"

    @property
    def what(self) -> str:
        return _LEADS_TO[self.trouble][1]


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
    return Health(gateways=gateways, alarms=alarms(conn, now))


def alarms(conn: Connection, now: datetime) -> list[Alarm]:
    """5xx answers first (payments are waiting), then signature failures; by gateway."""
    failing, found = _last_hour(conn, now)
    hourly = {alarm.provider for alarm in failing}
    slow = [a for a in _slow_failures(conn, now) if a.provider not in hourly]
    return failing + slow + found + _refuted(conn, now)


def _refuted(conn: Connection, now: datetime) -> list[Alarm]:
    """Callbacks under the right credential that the gateway's API contradicted: whoever sent
    them holds the webhook's credential (it changed nothing; the next one may try harder)."""
    return [
        Alarm(provider=provider, text=_refuted_text(provider, count), trouble=Trouble.REFUTED)
        for provider, count in refuted_last_day(conn, now).items()
    ]


def _refuted_text(provider: str, count: int) -> str:
    said = f"{provider}: {count} {'callback' if count == 1 else 'callbacks'} in the last day"
    if provider == Provider.PAYU.value:  # its refund callbacks rest on the public merchant key
        return (
            f"{said} said what PayU's API refuted (nothing was applied): refund callbacks "
            "anyone can write (the merchant key is in every checkout form), or a customer's "
            "own signed post resent under another mihpayid. No credential to rotate; look for "
            "who sends them."
        )
    return (
        f"{said} carried the right webhook credential but the gateway's API refuted what "
        "they said (nothing was applied). Unless they are old copies, someone else holds the "
        "credential: set a new one in the gateway's dashboard and in payhooks."
    )


def _slow_failures(conn: Connection, now: datetime) -> list[Alarm]:
    """5xx answers spread over a gateway's retry window, too few in any one hour to warn."""
    windows = {
        "providers": [p.value for p in RETRY_WINDOWS],
        "windows": [*RETRY_WINDOWS.values()],
        "longest": max(RETRY_WINDOWS.values()),  # a bound the planner can use on its own
    }
    found: list[Alarm] = []
    for provider, total, failed, hours in conn.execute(_OVER_WINDOW, {"now": now, **windows}):
        if failed < SLOW_FAILURES_TO_WARN or hours < SLOW_FAILURE_HOURS:
            continue
        if failed < SLOW_FAILURE_SHARE * total:
            continue
        span = RETRY_WINDOWS[Provider(provider)]
        found.append(
            Alarm(
                provider=provider,
                text=(
                    f"{provider}: {failed} of {total} deliveries in the last "
                    f"{span.total_seconds() / 3600:.0f} hours were answered 5xx, in {hours} "
                    "different hours. A slow failure: each is a payment waiting for a retry, "
                    "and Razorpay disables an endpoint that keeps failing for 24 hours."
                ),
            )
        )
    return found


def _last_hour(conn: Connection, now: datetime) -> tuple[list[Alarm], list[Alarm]]:
    failing: list[Alarm] = []
    found: list[Alarm] = []
    for provider, total, failed, refused in conn.execute(LAST_HOUR, {"now": now}):
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
        if forged(total, refused):
            found.append(
                Alarm(
                    provider=provider,
                    text=(
                        f"{provider}: {refused} of {total} deliveries in the last hour failed "
                        "the signature check. Was a webhook secret rotated in the gateway's "
                        "dashboard and not yet added to payhooks' configuration?"
                    ),
                    trouble=Trouble.SIGNATURE,
                )
            )
    return failing, found


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

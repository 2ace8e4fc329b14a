"""The warnings an operator must not miss, per gateway, from the delivery log: the console's
banners (``payhooks.console.health``) and the notifier's alerts (``payhooks.operations.alerts``)
read them here, so a page and an email never disagree about what is wrong.

- Repeated 5xx answers: Razorpay disables a webhook endpoint that keeps failing for 24 hours,
  and every gateway stops retrying at some point; each 5xx is a payment waiting. A burst in
  the last hour warns at once; a slow failure (a few an hour) warns once it has lasted a few
  hours of the gateway's retry window and is a share of its answers there, not the odd 503
  of a busy, healthy shop.
- A spike of signature failures: usually a secret rotated in the gateway's dashboard and not
  yet added to payhooks' configuration; every genuine delivery is being refused.
- Callbacks the gateway's API refuted: someone else holds the webhook's credential.
- Callbacks waiting for the gateway's API past ``UNCONFIRMED_WAIT``: no API credentials (so no
  pass asks), the API down, or what it said could not be applied (the handler fails).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS, named, title_of
from payhooks.operations.health import FAILED, LAST_HOUR, forged, refuted_last_day
from payhooks.plumbing.db import Connection


class AlarmKind(StrEnum):
    """What a console banner warns of."""

    FAILING = "failing"  # 5xx answers: a burst in the last hour, or a slow failure
    FORGED = "forged"  # signature failures
    REFUTED = "refuted"  # callbacks the gateway's API contradicted
    UNCONFIRMED = "unconfirmed"  # callbacks waiting for the gateway's API past a bound


# A banner when, in the last hour, a gateway was answered 5xx at least this often ...
FAILURES_TO_WARN = 3
# ... or had enough signature failures (``payhooks.operations.health.forged``).
# A banner too when, over its retry window, a gateway was answered 5xx at least this often,
# in at least this many different hours (a slow failure, not one restart's burst), making up
# at least this share of its answers there (a busy shop's one 503 in 500 is no failure; a
# quiet one's one or two an hour is). Not cleared by a later 2xx: a slow failure has them.
SLOW_FAILURES_TO_WARN = 6
SLOW_FAILURE_HOURS = 3
SLOW_FAILURE_SHARE = 0.02
# A callback waiting for its gateway's API (``payhooks.intake.confirmations``) this long needs a
# person: a real payment's API answers within seconds, and PATIENCE (30 minutes) settles one it
# keeps saying nothing of; one still waiting is never asked (no API credentials), or never answered
# usefully (the API down), or what the API said cannot be applied (the handler fails).
UNCONFIRMED_WAIT = timedelta(minutes=10)
# Through the partial index payhooks_confirmations_due (only waiting callbacks).
_UNCONFIRMED = """
SELECT DISTINCT ON (provider) provider, count(*) OVER (PARTITION BY provider),
       min(requested_at) OVER (PARTITION BY provider), last_error,
       bool_or(attempts > 0) OVER (PARTITION BY provider)
FROM payhooks_confirmations
WHERE verdict IS NULL AND requested_at <= %(since)s
ORDER BY provider, last_error IS NULL, requested_at DESC
"""
# How long each gateway keeps retrying a delivery answered 5xx (its ``retry_window``).
RETRY_WINDOWS = {provider: found.retry_window for provider, found in GATEWAYS.items()}

_OVER_WINDOW = f"""
SELECT d.provider, sum(d.repeats), coalesce(sum(d.repeats) FILTER (WHERE {FAILED}), 0),
       count(DISTINCT date_trunc('hour', d.received_at, 'UTC')) FILTER (WHERE {FAILED})
FROM unnest(%(providers)s::text[], %(windows)s::interval[]) AS w (provider, span)
JOIN payhooks_deliveries d ON d.provider = w.provider AND d.received_at > %(now)s - w.span
WHERE d.received_at > %(now)s - %(longest)s
GROUP BY 1 ORDER BY 1
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Alarm:
    """A banner: the gateway, what is wrong and the words shown."""

    provider: str
    kind: AlarmKind
    text: str
    since: datetime | None = None
    """When the oldest of the callbacks an unconfirmed banner counts was recorded waiting:
    where the console's list of them starts."""


Stamp = Callable[[datetime], str]
"""How a time is written in an alarm's words."""


def in_utc(at: datetime) -> str:
    """``2026-12-03 09:05 UTC``: a time as the alerts write it (the console writes its own)."""
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def alarms(conn: Connection, now: datetime, *, when: Stamp = in_utc) -> list[Alarm]:
    """5xx answers first (payments are waiting), then signature failures; by gateway. A time
    in the words is written by ``when``."""
    failing, found = _last_hour(conn, now)
    hourly = {alarm.provider for alarm in failing}
    slow = [a for a in _slow_failures(conn, now) if a.provider not in hourly]
    return failing + slow + found + _refuted(conn, now) + _unconfirmed(conn, now, when)


def _unconfirmed(conn: Connection, now: datetime, when: Stamp) -> list[Alarm]:
    """Callbacks waiting for their gateway's API past ``UNCONFIRMED_WAIT``, with the last
    error one of them met (the newest that met one)."""
    found: list[Alarm] = []
    for provider, count, oldest, error, asked in conn.execute(
        _UNCONFIRMED, {"since": now - UNCONFIRMED_WAIT}
    ):
        title = title_of(provider)
        said = f"{count} {title} {'callback has' if count == 1 else 'callbacks have'}"
        if error:
            why = f"The last error: {error}."
        elif asked:
            why = (
                "The API answered, and has not yet reported as done what they claim (a refund "
                "it reports on its way is waited for): check the gateway's dashboard; `payhooks "
                "resolve` settles one by hand."
            )
        else:
            why = (
                "None was ever asked about: are the gateway's API credentials set, and does "
                "a confirmation pass run (the worker, `payhooks confirm`; Django: `manage.py "
                "payhooks_confirm`)?"
            )
        text = (
            f"{said} waited for {title}'s status API for more than "
            f"{UNCONFIRMED_WAIT.total_seconds() / 60:.0f} minutes (the oldest since "
            f"{when(oldest)}): what they claim is applied only once the API confirms it. {why}"
        )
        found.append(Alarm(provider=provider, kind=AlarmKind.UNCONFIRMED, text=text, since=oldest))
    return found


def _refuted(conn: Connection, now: datetime) -> list[Alarm]:
    """Callbacks under the right credential that the gateway's API contradicted: whoever sent
    them holds the webhook's credential (it changed nothing; the next one may try harder)."""
    return [
        Alarm(provider=provider, kind=AlarmKind.REFUTED, text=_refuted_text(provider, count))
        for provider, count in refuted_last_day(conn, now).items()
    ]


def _refuted_text(provider: str, count: int) -> str:
    callbacks = "callback" if count == 1 else "callbacks"
    said = f"{title_of(provider)}: {count} {callbacks} in the last day"
    found = named(provider)
    if found is not None and found.refuted_advice:
        refuted = f"said what {found.title}'s API refuted (nothing was applied)"
        return f"{said} {refuted}: {found.refuted_advice}"
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
                kind=AlarmKind.FAILING,
                text=(
                    f"{title_of(provider)}: {failed} of {total} deliveries in the last "
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
                    kind=AlarmKind.FAILING,
                    text=(
                        f"{title_of(provider)}: {failed} of {total} deliveries in the last "
                        "hour were answered 5xx. The gateway retries them for a while, then "
                        "gives up; Razorpay disables an endpoint that keeps failing for 24 "
                        "hours."
                    ),
                )
            )
        if forged(total, refused):
            found.append(
                Alarm(
                    provider=provider,
                    kind=AlarmKind.FORGED,
                    text=(
                        f"{title_of(provider)}: {refused} of {total} deliveries in the last "
                        "hour failed the signature check. Was a webhook secret rotated in the "
                        "gateway's dashboard and not yet added to payhooks' configuration?"
                    ),
                )
            )
    return failing, found


__all__ = [
    "FAILURES_TO_WARN",
    "RETRY_WINDOWS",
    "SLOW_FAILURES_TO_WARN",
    "SLOW_FAILURE_HOURS",
    "SLOW_FAILURE_SHARE",
    "UNCONFIRMED_WAIT",
    "Alarm",
    "AlarmKind",
    "Stamp",
    "alarms",
    "in_utc",
]

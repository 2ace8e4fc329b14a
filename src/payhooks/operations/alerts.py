"""What is wrong now, as alerts a person must hear about (docs/operations.md, "Alerts"): each
condition read from the database, for every host of the core's tables, so a merchant's app
and the reference service say the same thing, and the console's banners
(``payhooks.operations.alarms``) and the email or chat message never disagree.

An alert is one condition about one thing (a gateway, the outbox): its ``key`` is what the
notifier (``payhooks.operations.notifier``) sends once, repeats at most every so often while it
lasts, and says is resolved when it clears. The text carries counts, never a body, a secret or an
address.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from payhooks.events import Provider
from payhooks.gateways import GATEWAYS, named
from payhooks.intake import disputes
from payhooks.operations.alarms import AlarmKind, alarms, in_utc
from payhooks.operations.outbox import Backlog, backlogs
from payhooks.plumbing.db import Connection
from payhooks.refunding.sending import INCOMPLETE, SHRUNK, SPENT
from payhooks.settlements import flags, reads


class Condition(StrEnum):
    """What is wrong, as an alert names it; one alert per condition and subject."""

    FAILING = "failing"
    """A gateway's deliveries answered 5xx: a burst in the last hour, or a slow failure."""
    FORGED = "forged"
    """A burst of signature failures: a secret rotated and not configured, or forgeries."""
    REFUTED = "refuted"
    """Callbacks carrying the right credential that the gateway's API refuted."""
    UNCONFIRMED = "unconfirmed"
    """Callbacks waiting for the gateway's API past a bound (``payhooks.operations.alarms``): no API
    credentials, the API down, or the handler failing on what it said."""
    RECONCILE_OFF = "reconcile_off"
    """Checkouts waiting past their time to be asked about: no pass runs for the gateway."""
    RECONCILE_REFUSED = "reconcile_refused"
    """The gateway refuses reconciliation's API credentials."""
    RECONCILE_FAILING = "reconcile_failing"
    """Checkouts reconciliation failed on several times in a row: the gateway's API answers
    nothing useful about them, or the handler fails on a payment it reported."""
    PARKED = "parked"
    """Deliveries parked for a while: a payment no order could be found or made for."""
    DEAD_LETTERS = "dead_letters"
    """Emails given up on (the reference service's outbox)."""
    REFUNDS_NEEDED = "refunds_needed"
    """Payments a person must refund (the reference shop's double payments and mismatches)."""
    REFUNDS_FAILING = "refunds_failing"
    """Refund intents the gateway refused, or that keep failing to be sent."""
    CAPTURES_FAILING = "captures_failing"
    """Authorised payments the reference worker keeps failing to capture and apply."""
    RELAY_BACKLOG = "relay_backlog"
    """Payment events waiting to be published to a broker past ``RELAY_LAG``: its relay is not
    running, the broker is away, or it refuses them."""
    DISPUTE_OPENED = "dispute_opened"
    """A dispute of a payment opened: the merchant answers it at the gateway by its deadline,
    or loses it (one alert per dispute)."""
    DISPUTE_DUE = "dispute_due"
    """A dispute still waiting for the merchant's answer whose deadline is near or past."""
    DISPUTE_LOST = "dispute_lost"
    """A dispute lost: the gateway took its amount back from the merchant."""

    UNSETTLED = "unsettled"
    """Captured payments the gateway has not paid out within its documented settlement cycle
    and the margin (``payhooks.settlements.flags``): money missing, until a payout names them."""
    SETTLEMENT_UNMATCHED = "settlement_unmatched"
    """Settlement lines naming a payment payhooks never applied: a payout for money the
    merchant's records do not have."""
    SETTLEMENT_UNREADABLE = "settlement_unreadable"
    """Settlement report lines payhooks could not read, kept by a fetch that recorded the rest:
    a payout's line nobody has looked at."""
    SETTLEMENTS_UNREAD = "settlements_unread"
    """A gateway's settlement reports not read whole for days (``payhooks.settlements.reads``):
    captures since are not reviewed, so money missing among them is not flagged."""


NOT_REPEATED = frozenset({Condition.DISPUTE_OPENED, Condition.DISPUTE_DUE, Condition.DISPUTE_LOST})
"""Said once when raised, never again while it lasts: news of one dispute, which an hourly
repeat for days would bury (``payhooks.operations.notifier``)."""
RESOLVED_SILENTLY = frozenset({Condition.DISPUTE_OPENED, Condition.DISPUTE_LOST})
"""Cleared without a notice: what it said stays true (a dispute opened, a dispute lost), and
the dispute's own next alert says what followed. A deadline answered is said resolved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Alert:
    """Something wrong a person must hear of, until it is resolved."""

    condition: Condition
    subject: str
    """What it concerns: a gateway's name, or ``outbox``."""
    title: str
    body: str

    @property
    def key(self) -> str:
        """``condition:subject``: an alert is raised once under it, however many hosts see it."""
        return f"{self.condition.value}:{self.subject}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """Some conditions and how to read them. A notifier resolves only the alerts of the
    conditions its sources read: another host's alerts (the service's outbox) are left alone.
    ``observe`` lists every alert that holds, never the first so many: one it leaves out is
    resolved."""

    conditions: frozenset[Condition]
    observe: Callable[[Connection, datetime], list[Alert]]


# A parked delivery is retried every minute by the worker (a cart link it waits for); one that
# has waited this long needs a person.
PARKED_WAIT = timedelta(minutes=10)
# A checkout is due to be asked about once it is ``after`` old (PAYHOOKS_RECONCILE_AFTER_S);
# one still waiting this long past that was never asked: no pass runs for its gateway.
RECONCILE_GRACE = timedelta(minutes=15)
RECONCILE_AFTER = timedelta(seconds=900)
RECONCILE_WINDOW = timedelta(days=7)
# A checkout reconciliation failed on this many times in a row (one minute, two, four apart for
# a fresh checkout) needs a person: an error that lasts is not a blip.
RECONCILE_FAILURES = 3
# A refund the gateway refused or failed is reported for a day after; then it is history.
REFUNDS_REPORTED = timedelta(hours=24)
# An intent still not sent this long after it was asked for: no sender runs, or every call
# fails. The sender runs on every worker tick (or ``payhooks refunds send --every``).
REFUND_UNSENT = timedelta(hours=1)
# A refund the gateway accepted and still has not settled this long after: its normal refunds
# take 5 to 7 working days.
REFUND_UNSETTLED = timedelta(days=10)
# A dispute waiting for the merchant's answer is alerted again this long before its deadline
# (PAYHOOKS_DISPUTE_WARNING_HOURS): gateways give a few days to answer, and gathering evidence
# takes one.
DISPUTE_WARNING = timedelta(hours=48)
# A lost dispute is news for this long (its alert is raised once in it, and cleared silently).
DISPUTE_LOST_REPORTED = timedelta(days=7)

# A relay publishes what is queued within a second or two; an event still waiting this long
# means no relay runs for the channel, or the broker is away or refuses it.
RELAY_LAG = timedelta(minutes=2)

_KINDS = {
    AlarmKind.FAILING: Condition.FAILING,
    AlarmKind.FORGED: Condition.FORGED,
    AlarmKind.REFUTED: Condition.REFUTED,
    AlarmKind.UNCONFIRMED: Condition.UNCONFIRMED,
}
_TITLES = {
    Condition.FAILING: "{subject}: webhook deliveries answered 5xx",
    Condition.FORGED: "{subject}: webhook signature failures",
    Condition.REFUTED: "{subject}: callbacks refuted by the gateway's API",
    Condition.UNCONFIRMED: "{subject}: callbacks waiting for the gateway's API",
}


def banners(conn: Connection, now: datetime) -> list[Alert]:
    """The console's banners, one alert per condition and gateway (a burst and a slow failure
    of one gateway are one failing alert)."""
    found: dict[str, Alert] = {}
    for alarm in alarms(conn, now):
        condition = _KINDS[alarm.kind]
        alert = Alert(
            condition=condition,
            subject=alarm.provider,
            title=_TITLES[condition].format(subject=alarm.provider),
            body=alarm.text,
        )
        found.setdefault(alert.key, alert)
    return list(found.values())


# Through the partial index processed_webhooks_parked.
_PARKED = """
SELECT provider, count(*), min(processed_at) FROM processed_webhooks
WHERE outcome = 'parked' AND processed_at <= %(since)s
GROUP BY 1 ORDER BY 1
"""


def parked(conn: Connection, now: datetime) -> list[Alert]:
    """Deliveries parked for longer than ``PARKED_WAIT``, by gateway."""
    rows = conn.execute(_PARKED, {"since": now - PARKED_WAIT}).fetchall()
    return [
        Alert(
            condition=Condition.PARKED,
            subject=provider,
            title=f"{provider}: {count} parked {_deliveries(count)} waiting",
            body=(
                f"{count} {provider} {_deliveries(count)} parked for more than "
                f"{_minutes(PARKED_WAIT)} (the oldest since {in_utc(oldest)}): a "
                "payment no order could be found or made for, or an amount not what was "
                "expected. Replay or resolve them in the console (Django: its admin), or "
                "with `payhooks parked`, `payhooks replay KEY --hooks module:attribute` "
                "(your app's hooks; `payhooks replay KEY` (the reference service)) and "
                "`payhooks resolve` (Django: `manage.py payhooks_parked`, `manage.py "
                "payhooks_replay KEY` and `manage.py payhooks_resolve`)."
            ),
        )
        for provider, count, oldest in rows
    ]


_REFUSED = """
SELECT provider, refused_since, refused_reason FROM payhooks_reconcile_totals
WHERE refused_since IS NOT NULL ORDER BY provider
"""
# Expectations never enrolled, and enrolled ones with no capture never leased again, that are
# overdue by the grace: one range of payhooks_expectations_unenrolled and one of
# payhooks_reconcile_due per gateway, each counted up to a bound (a gateway off for a week has
# every checkout of the week overdue; "10000 or more" says enough).
_OVERDUE = """
SELECT g.provider, unenrolled.n + late.n
FROM unnest(%(providers)s::text[]) AS g (provider)
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM payhooks_expectations e
        WHERE NOT e.enrolled AND e.provider = g.provider
          AND e.created_at <= %(unenrolled)s AND e.created_at > %(window)s
        LIMIT %(bound)s) AS x
) AS unenrolled
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM payhooks_reconcile r
        WHERE r.provider = g.provider AND NOT r.captured
          AND r.next_attempt_at <= %(overdue)s AND r.next_attempt_at > %(window)s
        LIMIT %(bound)s) AS y
) AS late
WHERE unenrolled.n + late.n > 0
ORDER BY 1
"""
OVERDUE_BOUND = 10_000


def reconciliation(
    conn: Connection,
    now: datetime,
    *,
    after: timedelta = RECONCILE_AFTER,
    window: timedelta = RECONCILE_WINDOW,
) -> list[Alert]:
    """Reconciliation refused by a gateway, not running for it, or failing on some of its
    checkouts: either way a payment whose webhook is lost stays lost."""
    return (
        _refused(conn)
        + _overdue(conn, now, after=after, window=window)
        + _failing(conn, now, window=window)
    )


# Through the partial index payhooks_reconcile_failing: only checkouts failing now, looked at
# within the window (one past it is asked no more, and its alert clears).
_FAILING = """
SELECT provider, count(*), min(failing_since),
       (array_agg(last_error ORDER BY last_attempt_at DESC, gateway_order_id))[1]
FROM payhooks_reconcile
WHERE failures >= %(bound)s AND last_attempt_at > %(window)s
GROUP BY 1 ORDER BY 1
"""


def _failing(conn: Connection, now: datetime, *, window: timedelta) -> list[Alert]:
    params = {"bound": RECONCILE_FAILURES, "window": now - window}
    return [
        Alert(
            condition=Condition.RECONCILE_FAILING,
            subject=provider,
            title=f"{provider}: reconciliation failing on {count} "
            f"{'checkout' if count == 1 else 'checkouts'}",
            body=(
                f"Reconciliation failed {RECONCILE_FAILURES} or more times in a row on {count} "
                f"{provider} {'checkout' if count == 1 else 'checkouts'} (the first since "
                f"{in_utc(since)}); the newest error: {error}. Each is asked again "
                "later; a payment the gateway reported that your handler fails on is not "
                "applied until the handler is fixed."
            ),
        )
        for provider, count, since, error in conn.execute(_FAILING, params).fetchall()
    ]


def _refused(conn: Connection) -> list[Alert]:
    return [
        Alert(
            condition=Condition.RECONCILE_REFUSED,
            subject=provider,
            title=f"{provider}: reconciliation's API credentials refused",
            body=(
                f"{provider}'s status API has refused payhooks' API credentials since "
                f"{in_utc(since)} ({reason}). Payments whose webhook was missed "
                f"are not recovered until they are fixed: check {_credentials_of(provider)}."
            ),
        )
        for provider, since, reason in conn.execute(_REFUSED).fetchall()
    ]


def _credentials_of(provider: str) -> str:
    """The settings holding a gateway's API credentials, as an operator sets them."""
    found = named(provider)
    return "its API credentials" if found is None else found.status_api.credentials


def _overdue(
    conn: Connection, now: datetime, *, after: timedelta, window: timedelta
) -> list[Alert]:
    params = {
        "providers": [p.value for p in GATEWAYS],
        "unenrolled": now - after - RECONCILE_GRACE,
        "overdue": now - RECONCILE_GRACE,
        "window": now - window,
        "bound": OVERDUE_BOUND,
    }
    return [
        Alert(
            condition=Condition.RECONCILE_OFF,
            subject=provider,
            title=f"{provider}: reconciliation is not running",
            body=(
                f"{_at_least(count)} {provider} "
                f"{'checkout has' if count == 1 else 'checkouts have'} "
                f"waited more than {_minutes(RECONCILE_GRACE)} past their time to be asked "
                f"about at {provider}'s status API. Reconciliation is off for {provider}: its "
                "API credentials are not set, or nothing runs it (the worker, `payhooks "
                "reconcile --hooks`, payhooks.reconcile.run; Django: `manage.py "
                "payhooks_reconcile`)."
            ),
        )
        for provider, count in conn.execute(_OVERDUE, params).fetchall()
    ]


_REFUNDS = """
SELECT provider,
       count(*) FILTER (WHERE state IN ('requested', 'sent') AND last_error IS NOT NULL),
       count(*) FILTER (WHERE state IN ('refused', 'failed')
                          AND NOT starts_with(coalesce(last_error, ''), %(incomplete)s)
                          AND NOT starts_with(coalesce(last_error, ''), %(spent)s)
                          AND NOT starts_with(coalesce(last_error, ''), %(shrunk)s)),
       count(*) FILTER (WHERE state = 'requested' AND last_error IS NULL),
       count(*) FILTER (WHERE state = 'sent' AND last_error IS NULL),
       count(*) FILTER (WHERE state = 'refused'
                          AND starts_with(coalesce(last_error, ''), %(incomplete)s)),
       count(*) FILTER (WHERE state = 'refused'
                          AND starts_with(coalesce(last_error, ''), %(spent)s)),
       count(*) FILTER (WHERE state = 'refused'
                          AND starts_with(coalesce(last_error, ''), %(shrunk)s)),
       (array_agg(DISTINCT payment_id ORDER BY payment_id))[1:%(named)s + 1]
FROM payhooks_refunds
WHERE (state IN ('requested', 'sent') AND last_error IS NOT NULL)
   OR (state = 'requested' AND requested_at <= %(unsent)s)
   OR (state = 'sent' AND sent_at <= %(unsettled)s)
   OR (state IN ('refused', 'failed')
       AND coalesce(settled_at, sent_at, requested_at) > %(reported)s)
GROUP BY 1 ORDER BY 1
"""


_AT_GATEWAY = (
    '; one refused at the gateway is never sent again: its last_error says why ("fully '
    'refunded already": the money went back another way), and if the money is still owed, '
    "ask again with a new key or refund it in the gateway's dashboard"
)
REFUND_PAYMENTS_NAMED = 5
"""The payments a refunds alert names, at most (the first by id), each a command to run."""


def refunds(conn: Connection, now: datetime) -> list[Alert]:
    """Refund intents (``payhooks.refunding.refunds``) that need a person: refused or failed at the
    gateway in the last day, or refused by payhooks itself, never sent (an intent naming too
    little for the gateway's call: ``payhooks.refunding.sending.INCOMPLETE``), still being
    retried after an error, not sent within ``REFUND_UNSENT`` of being asked for, or not
    settled within ``REFUND_UNSETTLED`` of being sent."""
    params = {"reported": now - REFUNDS_REPORTED, "unsent": now - REFUND_UNSENT,
              "unsettled": now - REFUND_UNSETTLED, "incomplete": INCOMPLETE, "spent": SPENT,
              "shrunk": SHRUNK,
              "named": REFUND_PAYMENTS_NAMED}  # fmt: skip
    found: list[Alert] = []
    rows = conn.execute(_REFUNDS, params)
    for row in rows:
        provider, retrying, refused, unsent, unsettled, incomplete, spent, shrunk, payments = row
        said = []
        if refused:
            said.append(f"{refused} refused or failed at {provider} in the last day")
        if incomplete:
            said.append(
                f"{incomplete} refused by payhooks in the last day, never sent to {provider} "
                "(naming too little for its refund call: ask again as its last error says)"
            )
        if spent:
            said.append(
                f"{spent} not sent by payhooks in the last day: a chargeback lost, or a refund "
                "made outside payhooks, had given the customer that money back already (no "
                "refund is owed for them; ask again for what is left, if anything, as the last "
                "error says)"
            )
        if shrunk:
            said.append(
                f"{shrunk} not sent by payhooks in the last day: they asked more than was left "
                "to refund (a chargeback lost, or a refund made outside payhooks, took the "
                "rest); what is left is still owed: ask again for it, as the last error says"
            )
        if retrying:
            said.append(f"{retrying} being retried after an error")
        if unsent:
            said.append(f"{unsent} not sent within {_hours(REFUND_UNSENT)} hour(s)")
        if unsettled:
            days = REFUND_UNSETTLED.days
            said.append(f"{unsettled} not settled within {days} day(s) of being sent")
        found.append(
            Alert(
                condition=Condition.REFUNDS_FAILING,
                subject=provider,
                title=f"{provider}: refunds not going through",
                body=(
                    f"{provider}'s refund intents: {'; '.join(said)}. Each payment's are "
                    f"listed with their last error by `payhooks refunds list {payments[0]} "
                    f"--provider {provider}` (payments "
                    f"{', '.join(payments[:REFUND_PAYMENTS_NAMED])}"
                    f"{', ...' if len(payments) > REFUND_PAYMENTS_NAMED else ''})"
                    f"{_AT_GATEWAY if refused else ''}; one stuck unsent that the gateway does "
                    f"not have (look in its dashboard: a call whose answer was lost may have "
                    f"made it) can be cancelled (`payhooks refunds cancel KEY --provider "
                    f"{provider} --reason WHY --by WHO --not-at-gateway`, KEY as listed), which "
                    "frees its amount."
                ),
            )
        )
    return found


def relay_backlog(conn: Connection, now: datetime) -> list[Alert]:
    """Each relay channel whose oldest unpublished payment event has waited past
    ``RELAY_LAG``: nothing is lost (the events wait in the queue), but the merchant's other
    services are not told of payments meanwhile; or that a removed channel left queued."""
    return [
        Alert(condition=Condition.RELAY_BACKLOG, subject=found.channel, **_backlog_told(found))
        for found in backlogs(conn)
        if found.oldest_at is not None and now - found.oldest_at >= RELAY_LAG
    ]


def _backlog_told(found: Backlog) -> dict[str, str]:
    """A backlog's title and body: a relay not publishing, or a removed channel's leftovers
    (nothing publishes them until a person decides)."""
    channel, waiting = found.channel, found.waiting
    if not found.relayed:
        return {
            "title": f"{channel}: {waiting} payment events left queued for a removed channel",
            "body": f"`payhooks relay remove {channel}` took the channel away with {waiting} "
            f"payment event(s) still queued for it. `payhooks relay {channel}` adds it back "
            f"and publishes them, in order; `payhooks relay remove {channel} --drop-queued` "
            "drops them, never to be published.",
        }
    assert found.oldest_at is not None
    return {
        "title": f"{channel}: {waiting} payment events waiting to be relayed",
        "body": f"{waiting} payment {'event has' if waiting == 1 else 'events have'} not been "
        f"published to {channel}; the oldest has waited since "
        f"{in_utc(found.oldest_at)}. Is `payhooks relay {channel}` running, and its "
        "broker up? Its log says why it does not publish, and `payhooks relay status` how "
        "many wait; they are published, in order, once it can.",
    }


# Through payhooks_disputes_open and payhooks_disputes_lost. Every one, never the first so
# many: the notifier resolves an alert a pass does not find, so a list cut at a bound would
# clear the alerts of the disputes cut from it while they still stand.
_DISPUTES_OPEN = """
SELECT provider, dispute_id, status, phase, amount_paise, currency, respond_by, payment_id,
       gateway_order_id
FROM payhooks_disputes WHERE closed_at IS NULL
ORDER BY respond_by NULLS LAST, provider, dispute_id
"""
_DISPUTES_LOST = """
SELECT d.provider, d.dispute_id, d.phase, d.lost_paise, d.currency, d.payment_id,
       d.gateway_order_id,
       EXISTS (SELECT 1 FROM payhooks_payments p
               WHERE p.provider = d.provider AND p.payment_id = d.payment_id)
FROM payhooks_disputes d WHERE d.status = 'lost' AND d.closed_at > %(since)s
ORDER BY d.closed_at, d.provider, d.dispute_id
"""


def disputes_alerts(
    conn: Connection, now: datetime, *, warning: timedelta = DISPUTE_WARNING
) -> list[Alert]:
    """One alert per dispute opened, again (``dispute_due``) once one still waiting for the
    merchant's answer is within ``warning`` of its deadline or past it, and one per dispute
    lost in the last ``DISPUTE_LOST_REPORTED``."""
    found: list[Alert] = []
    for row in conn.execute(_DISPUTES_OPEN).fetchall():
        provider, dispute_id, status, phase, amount, currency, respond_by, payment, order = row
        about = _dispute_words(provider, dispute_id, phase, amount, currency, payment, order)
        deadline = _deadline(respond_by)
        subject = f"{provider}:{dispute_id}"
        found.append(Alert(
            condition=Condition.DISPUTE_OPENED, subject=subject,
            title=f"{provider}: dispute {dispute_id} opened",
            body=f"{about} {deadline} {_answer(provider)}",
        ))  # fmt: skip
        waiting = status in disputes.AWAITING_RESPONSE  # as text: a newer release's too
        if waiting and respond_by is not None and respond_by - now <= warning:
            found.append(Alert(
                condition=Condition.DISPUTE_DUE, subject=subject,
                title=f"{provider}: dispute {dispute_id} due {_due(respond_by, now)}",
                body=f"{about} It still waits for your answer: {deadline} {_answer(provider)}",
            ))  # fmt: skip
    params = {"since": now - DISPUTE_LOST_REPORTED}
    for row in conn.execute(_DISPUTES_LOST, params).fetchall():
        provider, dispute_id, phase, lost, currency, payment, order, recorded = row
        about = _dispute_words(provider, dispute_id, phase, lost, currency, payment, order)
        kept = (
            "the payment's record says so (disputed_paise), and no refund of it gives it again."
            if recorded
            else "payhooks has no record of that payment (taken before payhooks, or not applied "
            "yet): the loss is counted on it when it is recorded."
        )
        found.append(Alert(
            condition=Condition.DISPUTE_LOST, subject=f"{provider}:{dispute_id}",
            title=f"{provider}: dispute {dispute_id} lost",
            body=f"{about} It was lost: {provider} took {_paise(lost, currency)} back; {kept}",
        ))  # fmt: skip
    return found


def _dispute_words(
    provider: str,
    dispute_id: str,
    phase: str | None,
    amount: int | None,
    currency: str | None,
    payment: str | None,
    order: str | None,
) -> str:
    stage = f" ({phase.replace('_', ' ')})" if phase else ""
    of = f" of payment {payment}" if payment else ""
    ordered = f" (gateway order {order})" if order else ""
    return f"{provider} dispute {dispute_id}{stage}{of}{ordered}, for {_paise(amount, currency)}."


def _deadline(respond_by: datetime | None) -> str:
    if respond_by is None:
        return "The gateway gave no deadline to answer it."
    return f"Answer it by {in_utc(respond_by)}, or it is lost."


def _due(respond_by: datetime, now: datetime) -> str:
    """The time left in whole hours, or in minutes under two hours (never "in 0 hour(s)")."""
    left = int((respond_by - now).total_seconds())
    if left < 0:
        return "now: its deadline passed"
    return f"in {left // 3600} hour(s)" if left >= 7200 else f"in {left // 60} minute(s)"


def _answer(provider: str) -> str:
    found = GATEWAYS.get(Provider(provider)) if provider in _PROVIDERS else None
    where = found.disputes_dashboard if found is not None else None
    return (
        f"Answer it (accept, or contest with evidence) in the {provider} dashboard"
        + (f" ({where})" if where else "")
        + "; the console's Disputes page lists every open dispute by deadline."
    )


def _paise(amount: int | None, currency: str | None) -> str:
    if amount is None:
        return "an amount not given"
    return f"{amount // 100}.{amount % 100:02d} {currency or 'INR'}"


_PROVIDERS = frozenset(p.value for p in Provider)


def _listed(flag: str) -> str:
    """Where a settlements list is, in a service's words and a Django app's."""
    return (
        "on the console's Settlements page and by `payhooks settlements "
        f"{flag}` (Django: its admin's Settlements page and `manage.py payhooks_settlements "
        f"{flag}`)"
    )


def settlements(conn: Connection, now: datetime) -> list[Alert]:
    """Captures not settled in time, settlement lines naming no known payment and report lines
    payhooks could not read, by gateway (what the settlements review and the fetches
    recorded; cheap reads, each minute)."""
    found = [
        Alert(
            condition=Condition.UNSETTLED,
            subject=c.provider,
            title=f"{c.provider}: {c.count} captured {_payments(c.count)} not settled",
            body=(
                f"{c.count} {c.provider} captured {_payments(c.count)} (the oldest captured "
                f"{in_utc(c.since)}) {'is' if c.count == 1 else 'are'} in no payout "
                f"within {c.provider}'s settlement cycle and the margin: money missing. Each "
                f"is listed {_listed('--unsettled')}; fetch the days since with "
                "`payhooks settlements --from ... --to ...` (Django: `manage.py "
                "payhooks_settlements --from ... --to ...`), or ask the gateway."
            ),
        )
        for c in flags.unsettled(conn)
    ]
    found += [
        Alert(
            condition=Condition.SETTLEMENT_UNMATCHED,
            subject=c.provider,
            title=f"{c.provider}: {c.count} settlement {_lines(c.count)} naming no known payment",
            body=(
                f"{c.count} {c.provider} settlement {_lines(c.count)} (the first recorded "
                f"{in_utc(c.since)}) {'names' if c.count == 1 else 'name'} a payment "
                "payhooks never applied: a webhook never came and reconciliation never found "
                "it, or a payment outside this app. Each is listed "
                f"{_listed('--unmatched')}."
            ),
        )
        for c in flags.unmatched(conn)
    ]
    found += [_unread(b) for b in reads.behind(conn, now)]
    return found + [
        Alert(
            condition=Condition.SETTLEMENT_UNREADABLE,
            subject=c.provider,
            title=f"{c.provider}: {c.count} settlement report {_lines(c.count)} payhooks cannot "
            "read",
            body=(
                f"{c.count} {c.provider} settlement report {_lines(c.count)} (the first met "
                f"{in_utc(c.since)}) could not be read: each is kept with why and "
                "the line as the gateway answered it, and the rest of its report was "
                "recorded. Look each up in the gateway's dashboard; they are listed "
                f"{_listed('--unreadable')}."
            ),
        )
        for c in flags.unreadable(conn)
    ]


def _unread(late: reads.Behind) -> Alert:
    return Alert(
        condition=Condition.SETTLEMENTS_UNREAD,
        subject=late.provider,
        title=f"{late.provider}: settlement reports read only through {late.read_through}",
        body=(
            f"{late.provider}'s settlement reports have not been read whole since "
            f"{late.read_through} (the last fetch that moved it on: "
            f"{in_utc(late.read_at)}): its report failed, or nothing "
            "fetches it. Captures whose cycle ends after that day are not reviewed, so money "
            "missing among them is not flagged. The worker fetches the days it missed once the "
            "gateway answers; by hand, or daily from cron, `payhooks settlements --catch-up` "
            "(Django: `manage.py payhooks_settlements --catch-up`) fetches each gateway from "
            "the day after its last day read whole up to today."
        ),
    )


def _payments(count: int) -> str:
    return "payment" if count == 1 else "payments"


def _lines(count: int) -> str:
    return "line" if count == 1 else "lines"


def _hours(span: timedelta) -> int:
    return int(span.total_seconds() // 3600)


def _at_least(count: int) -> str:
    return f"{count} or more" if count >= OVERDUE_BOUND else str(count)


def _deliveries(count: int) -> str:
    return "delivery" if count == 1 else "deliveries"


def _minutes(span: timedelta) -> str:
    return f"{span.total_seconds() / 60:.0f} minutes"


def core_sources(
    *,
    after: timedelta = RECONCILE_AFTER,
    window: timedelta = RECONCILE_WINDOW,
    dispute_warning: timedelta = DISPUTE_WARNING,
) -> list[Source]:
    """Every condition the core's tables hold; ``after`` and ``window`` are reconciliation's
    (PAYHOOKS_RECONCILE_AFTER_S, PAYHOOKS_RECONCILE_WINDOW_S), ``dispute_warning`` how long
    before its deadline an unanswered dispute is alerted again
    (PAYHOOKS_DISPUTE_WARNING_HOURS)."""

    def reconciled(conn: Connection, now: datetime) -> list[Alert]:
        return reconciliation(conn, now, after=after, window=window)

    def disputed(conn: Connection, now: datetime) -> list[Alert]:
        return disputes_alerts(conn, now, warning=dispute_warning)

    return [
        Source(
            conditions=frozenset(
                {Condition.FAILING, Condition.FORGED, Condition.REFUTED, Condition.UNCONFIRMED}
            ),
            observe=banners,
        ),
        Source(conditions=frozenset({Condition.PARKED}), observe=parked),
        Source(
            conditions=frozenset(
                {Condition.RECONCILE_OFF, Condition.RECONCILE_REFUSED, Condition.RECONCILE_FAILING}
            ),
            observe=reconciled,
        ),
        Source(conditions=frozenset({Condition.REFUNDS_FAILING}), observe=refunds),
        Source(conditions=frozenset({Condition.RELAY_BACKLOG}), observe=relay_backlog),
        Source(
            conditions=frozenset(
                {Condition.DISPUTE_OPENED, Condition.DISPUTE_DUE, Condition.DISPUTE_LOST}
            ),
            observe=disputed,
        ),
        Source(
            conditions=frozenset(
                {
                    Condition.UNSETTLED,
                    Condition.SETTLEMENT_UNMATCHED,
                    Condition.SETTLEMENT_UNREADABLE,
                    Condition.SETTLEMENTS_UNREAD,
                }
            ),
            observe=settlements,
        ),
    ]


def observe(conn: Connection, now: datetime, sources: Iterable[Source]) -> list[Alert]:
    """What every source finds now, each alert once."""
    found: dict[str, Alert] = {}
    for source in sources:
        for alert in source.observe(conn, now):
            found.setdefault(alert.key, alert)
    return list(found.values())


__all__ = [
    "DISPUTE_LOST_REPORTED",
    "DISPUTE_WARNING",
    "NOT_REPEATED",
    "PARKED_WAIT",
    "RECONCILE_FAILURES",
    "RECONCILE_GRACE",
    "REFUND_UNSENT",
    "REFUND_UNSETTLED",
    "RELAY_LAG",
    "RESOLVED_SILENTLY",
    "Alert",
    "Condition",
    "Source",
    "banners",
    "core_sources",
    "disputes_alerts",
    "observe",
    "parked",
    "reconciliation",
    "refunds",
    "relay_backlog",
    "settlements",
]

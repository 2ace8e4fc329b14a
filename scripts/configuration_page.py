"""Writes docs/configuration.md from what payhooks reads: the service's settings
(``payhooks.service.config.Settings``, whose fields hold the defaults) and the gateway registry
(``payhooks.gateways.GATEWAYS``, whose entries name each gateway's variables). A new gateway or
a changed default reaches the page by running this again; tests/unit/test_docs.py
fails while the page checked in differs from what it writes.

Usage: .venv/bin/python scripts/configuration_page.py [--write]
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from payhooks.gateways import GATEWAYS
from payhooks.gateways._gateway import Gateway
from payhooks.service.config import Settings

PAGE = Path(__file__).parents[1] / "docs" / "configuration.md"

# The service's own variables: (variable, the Settings field holding its default, or None, and
# what it means). Each default is the field's, never written here.
SERVICE = [
    ("DATABASE_URL", None, "PostgreSQL URL; unset = embedded PostgreSQL under `PAYHOOKS_HOME`"),
    ("PAYHOOKS_HOME", "home",
     "where the embedded database and the generated API token live; a folder that cannot be "
     "made or written there is refused at start, naming it"),
    ("PAYHOOKS_API_TOKEN", None, "bearer token for `/api/*`; unset = generated once, printed, "
     "kept under `PAYHOOKS_HOME`"),
    ("PAYHOOKS_SMTP_URL", None, "where the worker sends email (unset: the emails stay queued "
     "and the worker does the rest; alerts can go by `PAYHOOKS_ALERT_WEBHOOK_URL` alone): "
     "`smtp://[user:pass@]host[:port][?starttls=true]` (`starttls` true/false/1/0/yes/no, no "
     "other parameter) or `smtps://…`; checked at start, and a refusal never repeats the URL"),
    ("PAYHOOKS_MAIL_FROM", "mail_from", "the From address of the worker's email, one plain "
     "address, checked at start"),
    ("PAYHOOKS_ALERT_EMAIL", None, "where alerts go (refund needed, amount mismatch, parked "
     "event); one plain address, checked at start"),
    ("PAYHOOKS_ALERT_WEBHOOK_URL", None, "a chat tool's incoming-webhook URL (Slack, Google "
     "Chat, Discord's ending in `/slack`, Mattermost, a Teams workflow): the notifier posts each "
     "alert there as `{\"text\": …}`; http(s) with a host, checked at start, never printed "
     "([Operating payhooks](operations.md), \"Alerts\")"),
    ("PAYHOOKS_ALERT_REPEAT_MINUTES", "alert_repeat_minutes", "an alert that lasts is said "
     "again at most this often (1 to 10080)"),
    ("PAYHOOKS_DISPUTE_WARNING_HOURS", "dispute_warning_hours", "a dispute still waiting for "
     "your answer is alerted again this many hours before its deadline (1 to 720); one is "
     "alerted when it opens and when it is lost whatever this says"),
    ("PAYHOOKS_RETENTION_DAYS", "retention_days", "how long delivery records are kept, in days "
     "from 15 to 36500 (a shorter one is refused wherever it is read, `payhooks purge` "
     "included; with the variable unset, `payhooks purge --older-than-days N --force` takes "
     "one by hand)"),
    ("PAYHOOKS_LOCK_TIMEOUT_MS", "lock_timeout_ms", "how long a delivery waits for a twin in "
     "flight before answering 503; below the statement timeout. Every `*_MS` setting is a "
     "whole number from 1 to 2147483647 (`PAYHOOKS_RELAY_PUBLISH_TIMEOUT_MS`: to 600000, ten "
     "minutes), checked at start"),
    ("PAYHOOKS_STATEMENT_TIMEOUT_MS", "statement_timeout_ms", "upper bound for one SQL "
     "statement"),
    ("PAYHOOKS_TRANSACTION_TIMEOUT_MS", "transaction_timeout_ms", "upper bound for a whole "
     "webhook transaction: past it the delivery is answered 503"),
    ("PAYHOOKS_POOL_TIMEOUT_MS", "pool_timeout_ms", "how long a delivery waits for a free "
     "connection before answering 503 (`payhooks reconcile` and `worker --once` wait 10 s at "
     "least: no gateway waits on them)"),
    ("PAYHOOKS_POOL_SIZE", "pool_size", "database connections per server process"),
    ("PAYHOOKS_DATABASE_POOL_MODE", "database_pool_mode", "`session` (PostgreSQL itself, or a "
     "pooler in session mode) or `transaction` (PgBouncer `pool_mode = transaction` or another "
     "transaction pooler in front): then no startup options and no server-side prepared "
     "statements, and the timeouts are set in each transaction (`SET LOCAL`); see "
     "[Scaling out](scaling.md)"),
    ("PAYHOOKS_RECONCILE_AFTER_S", "reconcile_after_s", "reconciliation asks about checkouts "
     "older than this; a whole number from 1, as every setting here counted in seconds, "
     "minutes, hours or connections, checked at start by every command (a refused one stops "
     "`payhooks replay` too; `payhooks reconcile --older-than-s 0` asks about every checkout)"),
    ("PAYHOOKS_RECONCILE_WINDOW_S", "reconcile_window_s", "… and younger than this"),
    ("PAYHOOKS_SETTLEMENT_MARGIN_HOURS", "settlement_margin_hours", "past its gateway's "
     "settlement cycle, how long a captured payment may wait for its payout before it is "
     "flagged unsettled (1 to 1440; [Operating payhooks](operations.md), \"Settlements\")"),
    ("PAYHOOKS_RECONCILE_TIMEOUT_MS", "reconcile_timeout_ms", "how long one status API call "
     "may take"),
    ("PAYHOOKS_REFUND_DOUBLE_PAYMENTS", "refund_double_payments", "`true` or `false`: the "
     "worker refunds the second payment of a paid cart (flagged `duplicate_payment`) "
     "automatically, once, at the gateways payhooks refunds (below; their API credentials "
     "needed); the others keep the flag for a person ([Operating payhooks](operations.md))"),
    ("PAYHOOKS_CAPTURE_AUTHORIZED", "capture_authorized", "`true` or `false`: the worker "
     "captures payments authorised and not captured (manual capture), once, within 3 days "
     "(a day more for one whose capture was attempted), "
     "while their cart is open and for its amount, at the gateways below that capture them; "
     "any other is left to lapse"),
    ("PAYHOOKS_CONSOLE_TIMEZONE", "console_timezone", "the zone the console shows every time "
     "in, an IANA name, named beside each time; `payhooks console` reads it too. Refused at "
     "start: a name the time zone database does not hold"),
    ("PAYHOOKS_METRICS_TOKEN", None, "when set, `/metrics` needs `Authorization: Bearer <it>` "
     "(Prometheus: `authorization` in the scrape config); unset = `/metrics` is public"),
    ("PAYHOOKS_RELAY_NATS_URL", "relay_nats_url", "the NATS server `payhooks relay nats` "
     "publishes payment events to (`nats://` or `tls://`, credentials in it if any; never "
     "printed) ([Operating payhooks](operations.md), \"The relay\")"),
    ("PAYHOOKS_RELAY_NATS_STREAM", "relay_nats_stream", "the JetStream stream they are stored "
     "in; created with file storage over `<prefix>.>` when there is none, used as it is when "
     "there is one"),
    ("PAYHOOKS_RELAY_NATS_DUPLICATE_WINDOW_S", "relay_nats_duplicate_window_s", "the duplicate "
     "window of a stream the relay creates: how long JetStream drops a second message of one "
     "id, in seconds from 1 to 604800 (a week)"),
    ("PAYHOOKS_RELAY_RABBITMQ_URL", "relay_rabbitmq_url", "the RabbitMQ broker `payhooks relay "
     "rabbitmq` publishes payment events to (`amqp://` or `amqps://`; never printed)"),
    ("PAYHOOKS_RELAY_RABBITMQ_EXCHANGE", "relay_rabbitmq_exchange", "the durable topic exchange "
     "they are published to"),
    ("PAYHOOKS_RELAY_RABBITMQ_QUEUE", "relay_rabbitmq_queue", "the durable queue the relay "
     "declares and binds to every event (`<prefix>.#`), where they wait for a consumer"),
    ("PAYHOOKS_RELAY_SUBJECT_PREFIX", "relay_subject_prefix", "subjects (NATS) and routing keys "
     "(RabbitMQ) are `<prefix>.<gateway>.<kind>`; names of letters, digits, `_` and `-` joined "
     "by dots, checked at start, as are the stream's, exchange's and queue's"),
    ("PAYHOOKS_RELAY_BATCH", "relay_batch", "payment events a relay publishes together, each "
     "of another payment (1 to 1000)"),
    ("PAYHOOKS_RELAY_PUBLISH_TIMEOUT_MS", "relay_publish_timeout_ms", "how long a relay waits "
     "for the broker's confirm, and to connect; unanswered, the events are published again "
     "under the same ids"),
]  # fmt: skip

HEAD = """\
# Configuration

<!-- Written by scripts/configuration_page.py from payhooks.service.config.Settings and
payhooks.gateways.GATEWAYS; run it with --write after changing either. -->

The reference service (`payhooks serve`, `payhooks worker` and the commands over its database)
reads these environment variables once, at start, and refuses a bad value naming the variable,
never its value. A merchant's own app gives the same values in code (an adapter's secrets,
`payhooks.reconcile.run`, which reads the `PAYHOOKS_RECONCILE_*` variables too), or in Django's
`PAYHOOKS` setting under the keys named below ([Django](django.md)).

## The service

| variable | default | meaning |
|---|---|---|
"""

SECRETS = """\
## The gateways

A gateway with no webhook secret configured is not served (404). Its webhook secrets are
written one of two ways: one secret exactly as written, commas and all (`Xk9,pQ2#mZ` is one
secret), or several, all tried while one is rotated out, as a JSON array:
`'["whsec_new", "whsec_old"]'`. Refused at start: spaces around a plain value, a `[` value
that is not a JSON array of non-empty strings. Earlier versions split a plain value on commas:
one still written that way is one secret now, and `serve` and `worker` say so at start.
PhonePe's and Juspay's webhook credentials are each `username:password`, as set in the
gateway's dashboard: one without a username, a `:` and a password could never match a
callback, and is refused at start too.

A gateway's API credentials (both or neither) turn on reconciliation for it: the worker asks
its status API about checkouts no webhook settled ([Operating payhooks](operations.md)). What
each gateway's status API is asked, and with which credentials, is in [Gateways](providers.md).
A gateway's `..._API_URL` is the base payhooks adds the API's paths to, an `http://` or
`https://` URL with a host and no query; a URL already ending in the first of those paths
(Razorpay's `/v1`, Cashfree's `/pg`, PayU's `/merchant`, Juspay's `/orders`, as some gateways'
docs write their base URL) is refused at start-up, naming the base to give: every call would
go to `/v1/v1/...`, and Razorpay answers a path it has no route for as a bad request. Django's
`manage.py check` and `payhooks.reconcile.run` refuse them alike.
"""


def default(field: str | None) -> str:
    if field is None:
        return "unset"
    value = {f.name: f for f in dataclasses.fields(Settings)}[field].default
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def service_rows() -> list[str]:
    return [f"| `{name}` | {default(field)} | {meaning} |" for name, field, meaning in SERVICE]


def uses(gateway: Gateway) -> str:
    """What the gateway's API credentials are for, from its entry's flags."""
    found = ["reconciliation"]
    if gateway.confirmed_by_api:
        found.append("the confirmation of its callbacks, which prove only who sent them (each "
                     "takes effect once its status API confirms it, so it needs them)")  # fmt: skip
    if gateway.sends_refunds:
        found.append("the refunds payhooks sends (`payhooks refunds send`)")
    if gateway.captures_authorized:
        found.append("the captures of `PAYHOOKS_CAPTURE_AUTHORIZED`")
    return "; ".join(found)


def gateway_section(gateway: Gateway) -> list[str]:
    api = gateway.status_api
    rows = [f"### {gateway.title}", "", "| variable | Django `PAYHOOKS` key | meaning |",
            "|---|---|---|"]  # fmt: skip
    for secret in gateway.secrets:
        how = "webhook secrets: one, or several as a JSON array" if secret.several else (
            "one plain value, no spaces around it"
        )  # fmt: skip
        if secret.variable.endswith("_CREDENTIALS"):
            how = "webhook credentials, each `username:password`: one, or several as a JSON array"
        rows.append(f"| `{secret.variable}` | `{secret.django_key}` | {how} |")
    for variable, what in ((api.id_variable, "id"), (api.secret_variable, "secret")):
        key = variable.removeprefix("PAYHOOKS_")
        rows.append(f"| `{variable}` | `{key}` | its status API's {what} (both or neither) |")
    url = api.url_variable
    rows.append(
        f"| `{url}` | `{url.removeprefix('PAYHOOKS_')}` | the status API's base URL (default "
        f"`{api.url}`): a sandbox, or a test double |"
    )
    return [*rows, "", f"Its API credentials serve {uses(gateway)}.", ""]


def page() -> str:
    lines = [HEAD + "\n".join(service_rows()), "", SECRETS]
    for gateway in GATEWAYS.values():
        lines += gateway_section(gateway)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page())
    else:
        sys.stdout.write(page())

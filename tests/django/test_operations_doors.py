"""Each operation is one function of the core, whichever door a person comes in by: the
``payhooks`` command, Django's management command and, where it has one, the console's
action. Each test runs the doors on the same database, one after the other, and each door
finds what another did, answers in the same words, and refuses what another refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from orders.models import Order

import payhooks
from payhooks.applying import through
from payhooks.console import actions
from payhooks.console.actions import Done
from payhooks.django import conf
from payhooks.events import Provider
from payhooks.operations import alerts, parked, replays
from payhooks.sim.gateway import Delivery, Purchase
from tests.acceptance.conftest import invoke
from tests.django import sql_hooks
from tests.django.conftest import EXAMPLE, PAYHOOKS, records
from tests.factories import GATEWAY, KEYS
from tests.invoking import payhooks_command
from tests.reconcile import conftest as reconciling
from tests.reconcile.conftest import API_KEYS

gateway_api = reconciling.gateway_api  # its fixture
HOOKS = "tests.django.sql_hooks:hooks"  # the shop's handler, on the claim's connection


def capture(ref: str, key: str, amount_paise: int = 100) -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured",
        payment_id="pay_" + key,
        order_id=ref,
        amount_paise=amount_paise,
        event_id=key,
    )


def deliver(delivery: Delivery) -> str:
    response = Client().post(
        delivery.path, delivery.body, content_type="application/json", headers=delivery.headers
    )
    return str(response.json()["status"])


def django(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


cli = payhooks_command


def mismatches(url: str) -> list[tuple[str, str | None]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT event_id, resolution FROM payhooks_amount_mismatches ORDER BY event_id"
        )
        return rows.fetchall()


@pytest.fixture
def parked_and_paid(django_db: str) -> str:
    Order.objects.create(reference="order_paid", amount_paise=100)
    assert deliver(capture("order_paid", "evt_paid")) == "processed"
    assert deliver(capture("order_late", "evt_late")) == "parked"
    assert deliver(capture("order_later", "evt_later", 250)) == "parked"
    return django_db


# --- parked ------------------------------------------------------------------------------------


def test_parked_lists_the_same_deliveries_through_the_command_and_django(
    parked_and_paid: str, tmp_path: Path
) -> None:
    done = cli(parked_and_paid, tmp_path, "parked", "--json", "--database-url", parked_and_paid)
    assert done.exit_code == 0, done.output
    through_cli = json.loads(done.stdout)
    through_django = json.loads(django("payhooks_parked", "--json"))
    with psycopg.connect(parked_and_paid) as conn:
        listed = parked.waiting(conn)
    assert [row["event_id"] for row in through_cli] == ["evt_late", "evt_later"]
    assert through_django == through_cli  # every field, merchant_ref too
    assert [(p.event_id, p.merchant_ref, p.body_bytes) for p in listed] == [
        (row["event_id"], row["merchant_ref"], row["body_bytes"]) for row in through_django
    ]


def test_the_parked_alert_names_djangos_commands_beside_the_payhooks_command(
    parked_and_paid: str,
) -> None:
    """``payhooks alerts`` runs beside a Django app too: its parked alert says how a Django
    app replays, not only the command a Django app cannot replay with."""
    with psycopg.connect(parked_and_paid) as conn:
        [alert] = alerts.parked(conn, datetime.now(UTC) + alerts.PARKED_WAIT)
    assert "`manage.py payhooks_replay KEY`" in alert.body
    assert "`payhooks replay KEY --hooks module:attribute`" in alert.body
    # and the reference service's own replay, which takes no hooks (operations check)
    assert "`payhooks replay KEY` (the reference service)" in alert.body


def test_parked_prints_each_key_whole_to_a_pipe(django_db: str, tmp_path: Path) -> None:
    """Run from cron or into a pipe, the table is not cut to 80 columns: the key is what
    ``replay`` takes."""
    key = "PAYMENT_SUCCESS_WEBHOOK:" + "9" * 40
    assert deliver(capture("order_nowhere", key)) == "parked"
    done = cli(django_db, tmp_path, "parked", "--database-url", django_db)
    assert done.exit_code == 0, done.output
    assert key in done.stdout


# --- replay ------------------------------------------------------------------------------------


def console_replay(url: str, event_id: str) -> actions.Result:
    """The console's replay button, as ``payhooks console --hooks`` wires it."""
    served = conf.current().served()
    apply = through(sql_hooks.hooks, url)

    def replay(conn: psycopg.Connection, provider: str, key: str) -> payhooks.Receipt:
        return replays.replay(conn, served, apply, event_id=key, provider=provider)

    with psycopg.connect(url, autocommit=True) as conn:
        return actions.replay_parked(
            conn, replay, provider="razorpay", event_id=event_id, operator="asha"
        )


def test_a_replay_answers_alike_through_the_command_django_and_the_console(
    parked_and_paid: str, tmp_path: Path
) -> None:
    url = parked_and_paid
    answers = [
        json.loads(django("payhooks_replay", key))
        for key in ("evt_paid", "evt_late")  # applied already; still matching no order
    ]
    for key, answer in zip(("evt_paid", "evt_late"), answers, strict=True):
        done = cli(url, tmp_path, "replay", key, "--hooks", HOOKS, "--database-url", url)
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout) == answer
    assert [a["status"] for a in answers] == ["duplicate", "parked"]
    assert console_replay(url, "evt_paid").done is Done.ALREADY_APPLIED
    assert console_replay(url, "evt_late").done is Done.STILL_PARKED


def test_a_parked_delivery_replayed_through_one_door_is_a_duplicate_through_the_others(
    parked_and_paid: str, tmp_path: Path
) -> None:
    url = parked_and_paid
    Order.objects.create(reference="order_late", amount_paise=100)
    Order.objects.create(reference="order_later", amount_paise=250)
    done = cli(url, tmp_path, "replay", "evt_late", "--hooks", HOOKS, "--database-url", url)
    assert json.loads(done.stdout)["status"] == "processed"
    assert json.loads(django("payhooks_replay", "evt_late"))["status"] == "duplicate"
    assert console_replay(url, "evt_later") == actions.Result(
        done=Done.APPLIED, order_id="order_later"
    )
    assert json.loads(django("payhooks_replay", "evt_later"))["status"] == "duplicate"
    assert ("razorpay", "evt_later", "processed") in records(url)


def test_a_replay_of_no_delivery_is_refused_by_every_door(
    parked_and_paid: str, tmp_path: Path
) -> None:
    url = parked_and_paid
    with pytest.raises(CommandError, match="no delivery 'evt_nothing'"):
        django("payhooks_replay", "evt_nothing")
    done = cli(url, tmp_path, "replay", "evt_nothing", "--hooks", HOOKS, "--database-url", url)
    assert done.exit_code == 1
    assert "payhooks: delivery 'evt_nothing' not found" in done.stderr
    assert console_replay(url, "evt_nothing").done is Done.NOT_FOUND


# --- a registry with no handler ---------------------------------------------------------------


@pytest.fixture
def paid_meanwhile(parked_and_paid: str, gateway_api: tuple[object, str]) -> tuple[str, str]:
    """A parked delivery whose order exists now, and a checkout the gateway's API says paid:
    what a replay, a reconciliation pass and the console's replay would each apply."""
    api, api_url = gateway_api
    Order.objects.create(reference="order_late", amount_paise=100)
    checked_out_and_paid(api, "order_rec", "pay_rec")
    return parked_and_paid, api_url


@pytest.mark.parametrize(
    "door",
    [("replay", "evt_late"), ("reconcile", "--older-than-s", "0"), ("confirm", "--once"),
     ("console", "--port", "9")],
    ids=lambda door: door[0],
)  # fmt: skip
def test_a_registry_with_no_handler_is_refused_by_every_hooks_door(
    paid_meanwhile: tuple[str, str], door: tuple[str, ...]
) -> None:
    """Through a registry nobody filled, every delivery would be recorded ``ignored``: a
    parked payment could never be replayed again, a recovered one never applied."""
    url, api_url = paid_meanwhile
    before = records(url)
    env = {**os.environ, **KEYS.env(), **API_KEYS.env(api_url), "DATABASE_URL": url}
    done = invoke(env, *door, "--hooks", "tests.django.sql_hooks:unfilled", "--database-url", url)
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(
        "payhooks: --hooks tests.django.sql_hooks:unfilled has no handler registered"
    )
    assert done.stderr.count("\n") == 1
    assert records(url) == before
    waiting = Order.objects.filter(reference__in=["order_late", "order_rec"])
    assert [order.status for order in waiting] == ["pending", "pending"]


def outside_django(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``payhooks *args`` from the shop's directory in a process of its own, where Django is
    never set up: as a merchant runs it from a shell beside the project."""
    env = {**os.environ, **KEYS.env(), "DATABASE_URL": url}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "-m", "payhooks", *args],
        cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("target", ["payhooks.django:hooks", "orders.webhooks:hooks"])
def test_the_command_replaying_through_djangos_hooks_outside_django_says_to_use_manage_py(
    parked_and_paid: str, target: str
) -> None:
    """Outside Django, ``payhooks.django.hooks`` is empty (the app fills it in ``ready()``)
    and an app's ``webhooks.py`` cannot be imported: the parked payment is left parked, for
    ``manage.py payhooks_replay`` to apply, not recorded ignored for ever."""
    url = parked_and_paid
    done = outside_django(url, "replay", "evt_late", "--hooks", target, "--database-url", url)
    assert done.returncode == 1, done.stdout
    [said] = done.stderr.splitlines()
    assert said.startswith(f"payhooks: --hooks {target}") and "manage.py payhooks_replay" in said
    assert ("razorpay", "evt_late", "parked") in records(url)
    Order.objects.create(reference="order_late", amount_paise=100)
    assert json.loads(django("payhooks_replay", "evt_late"))["status"] == "processed"
    assert Order.objects.get(reference="order_late").status == "paid"


def test_the_command_refuses_djangos_hooks_even_filled(
    parked_and_paid: str, tmp_path: Path
) -> None:
    """Django's handlers use the ORM, on Django's connection: run by the command, on a
    connection of its own, they would write outside the claim's transaction."""
    url = parked_and_paid
    Order.objects.create(reference="order_late", amount_paise=100)
    done = cli(url, tmp_path, "replay", "evt_late", "--hooks", "payhooks.django:hooks",
               "--database-url", url)  # fmt: skip
    assert done.exit_code == 1
    assert "manage.py payhooks_replay" in done.stderr
    assert ("razorpay", "evt_late", "parked") in records(url)
    assert Order.objects.get(reference="order_late").status == "pending"


def test_the_refund_sender_refuses_djangos_hooks_naming_the_webhook_not_a_command(
    parked_and_paid: str, tmp_path: Path
) -> None:
    """``payhooks refunds send --hooks payhooks.django:hooks``: no ``manage.py`` command sends
    refunds; a Django app is told its handlers get refunds from the gateway's webhook."""
    url = parked_and_paid
    keys = {"PAYHOOKS_RAZORPAY_KEY_ID": "rzp_test", "PAYHOOKS_RAZORPAY_KEY_SECRET": "secret"}
    done = cli(url, tmp_path, "refunds", "send", "--once", "--hooks", "payhooks.django:hooks",
               "--database-url", url, **keys)  # fmt: skip
    assert done.exit_code == 1
    assert "without --hooks: the gateway's refund webhook reaches" in done.stderr
    assert "manage.py" not in done.stderr


# --- resolve -----------------------------------------------------------------------------------


@pytest.fixture
def three_short(django_db: str) -> str:
    """Three payments of 100 paise for orders that expect 500: each parked for its amount."""
    for n in "abc":
        Order.objects.create(reference=f"order_short_{n}", amount_paise=500)
        payhooks.expect(payhooks.django.connection(), "razorpay", f"order_short_{n}", 500)
        assert deliver(capture(f"order_short_{n}", f"evt_short_{n}")) == "parked"
    Order.objects.create(reference="order_paid", amount_paise=100)
    assert deliver(capture("order_paid", "evt_paid")) == "processed"
    return django_db


def console_settle(url: str, event_id: str, note: str) -> actions.Result:
    with psycopg.connect(url, autocommit=True) as conn:
        return actions.settle(
            conn, provider="razorpay", event_id=event_id, note=note, operator="asha"
        )


def test_a_payment_parked_for_its_amount_is_resolved_alike_through_every_door(
    three_short: str, tmp_path: Path
) -> None:
    url = three_short
    said = django("payhooks_resolve", "evt_short_a", "--provider", "razorpay", "--note", "one")
    done = cli(url, tmp_path, "resolve", "evt_short_b", "--provider", "razorpay",
               "--note", "two", "--database-url", url)  # fmt: skip
    assert done.exit_code == 0, done.output
    assert (said, done.stdout) == ("resolved razorpay evt_short_a: one\n",
                                   "resolved razorpay evt_short_b: two\n")  # fmt: skip
    assert console_settle(url, "evt_short_c", "three").done is Done.SETTLED
    assert mismatches(url) == [("evt_short_a", "one"), ("evt_short_b", "two"),
                               ("evt_short_c", "three")]  # fmt: skip
    short = [r for r in records(url) if r[1].startswith("evt_short")]
    assert {outcome for _, _, outcome in short} == {"ignored"}


def test_what_one_door_resolved_every_door_refuses_to_resolve_again(
    three_short: str, tmp_path: Path
) -> None:
    url = three_short
    assert console_settle(url, "evt_short_a", "refunded").done is Done.SETTLED
    with pytest.raises(CommandError) as refused:
        django("payhooks_resolve", "evt_short_a", "--provider", "razorpay", "--note", "again")
    done = cli(url, tmp_path, "resolve", "evt_short_a", "--provider", "razorpay",
               "--note", "again", "--database-url", url)  # fmt: skip
    assert done.exit_code == 1
    assert done.stderr == f"payhooks: {refused.value}\n"
    assert console_settle(url, "evt_paid", "again").done is Done.NOT_A_MISMATCH
    assert mismatches(url)[0] == ("evt_short_a", "refunded")


# --- purge -------------------------------------------------------------------------------------


def age(url: str, days: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute(
            "UPDATE processed_webhooks SET processed_at = now() - make_interval(days => %s)"
            " WHERE outcome = 'processed'",
            (days,),
        )


def test_a_purge_counts_and_deletes_alike_through_the_command_and_django(
    parked_and_paid: str, tmp_path: Path
) -> None:
    url = parked_and_paid
    age(url, 100)
    planned = django("payhooks_purge", "--dry-run")
    done = cli(url, tmp_path, "purge", "--dry-run", "--database-url", url)
    assert done.exit_code == 0, done.output
    assert planned.startswith("would delete 1 record(s)")
    assert done.stdout.startswith("would delete 1 record(s) and 0 delivery-log line(s) older")
    done = cli(url, tmp_path, "purge", "--database-url", url)
    assert done.stdout.startswith("deleted 1 record(s)")
    assert django("payhooks_purge").startswith("deleted 0 record(s)")  # the parked are kept
    assert sorted(key for _, key, _ in records(url)) == ["evt_late", "evt_later"]


def test_the_retention_window_set_for_the_deployment_is_the_default_through_both_doors(
    parked_and_paid: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``PAYHOOKS_RETENTION_DAYS`` (operations.md, "Retention"): Django's purge took 90 days
    whatever it said, and accepted a window the command refuses."""
    url = parked_and_paid
    age(url, 40)
    monkeypatch.setenv("PAYHOOKS_RETENTION_DAYS", "30")
    assert django("payhooks_purge", "--dry-run").startswith("would delete 1 record(s)")
    done = cli(url, tmp_path, "purge", "--dry-run", "--database-url", url,
               PAYHOOKS_RETENTION_DAYS="30")  # fmt: skip
    assert (
        done.stdout.startswith("would delete 1 record(s)") and "older than 30 days" in done.stdout
    )
    monkeypatch.setenv("PAYHOOKS_RETENTION_DAYS", "5")
    with pytest.raises(CommandError) as refused:
        django("payhooks_purge")
    assert str(refused.value).startswith("PAYHOOKS_RETENTION_DAYS must be at least 15 days, not 5")
    assert len(records(url)) == 3


def test_a_window_under_the_minimum_is_refused_alike_through_the_command_and_django(
    parked_and_paid: str, tmp_path: Path
) -> None:
    url = parked_and_paid
    age(url, 10)
    with pytest.raises(CommandError) as refused:
        django("payhooks_purge", "--older-than-days", "7")
    done = cli(url, tmp_path, "purge", "--older-than-days", "7", "--database-url", url)
    assert done.exit_code == 1
    assert done.stderr == f"payhooks: {refused.value}\n"
    assert len(records(url)) == 3
    # A dry run deletes nothing: any window may be counted, through either door.
    said = django("payhooks_purge", "--older-than-days", "7", "--dry-run")
    counted = cli(url, tmp_path, "purge", "--older-than-days", "7", "--dry-run",
                  "--database-url", url)  # fmt: skip
    assert counted.exit_code == 0, counted.output
    assert said.startswith("would delete ") and counted.stdout.startswith("would delete ")
    assert len(records(url)) == 3


# --- reconcile and confirm ---------------------------------------------------------------------


def django_keys(api_url: str) -> dict[str, object]:
    """``PAYHOOKS`` with the status APIs' keys, as the command's environment has them."""
    api = {name.removeprefix("PAYHOOKS_"): value for name, value in API_KEYS.env(api_url).items()}
    return {**PAYHOOKS, **api}


def checked_out_and_paid(api: object, reference: str, payment_id: str) -> None:
    from orders.checkout import create_order

    create_order("razorpay", reference, 49_900)
    purchase = Purchase(provider=Provider.RAZORPAY, cart_id=reference, reference=reference,
                        amount_paise=49_900, items={"TEA": 1})  # fmt: skip
    api.pay(purchase, payment_id)  # type: ignore[attr-defined]


def test_a_payment_one_door_recovered_is_not_recovered_again_through_the_other(
    django_db: str, gateway_api: tuple[object, str], tmp_path: Path
) -> None:
    api, api_url = gateway_api
    url, env = django_db, API_KEYS.env(api_url)
    checked_out_and_paid(api, "order_rec_a", "pay_rec_a")
    with override_settings(PAYHOOKS=django_keys(api_url)):
        said = django("payhooks_reconcile", "--older-than-s", "0")
    assert "recovered 1 payment(s) no webhook brought" in said
    checked_out_and_paid(api, "order_rec_b", "pay_rec_b")
    reconciling = ("reconcile", "--older-than-s", "0", "--hooks", HOOKS)
    done = cli(url, tmp_path, *reconciling, "--database-url", url, **env)
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("examined 1 checkout(s), applied 1 payment event(s), "
                                  "recovered 1 payment(s) no webhook brought")  # fmt: skip
    with override_settings(PAYHOOKS=django_keys(api_url)):
        again = django("payhooks_reconcile", "--older-than-s", "0")
    assert again.startswith("examined 0 checkout(s), applied 0 payment event(s)")
    paid = dict(Order.objects.values_list("reference", "payment_id"))
    assert paid == {"order_rec_a": "pay_rec_a", "order_rec_b": "pay_rec_b"}


def test_a_confirmation_pass_is_said_alike_through_the_command_and_django(
    django_db: str, gateway_api: tuple[object, str], tmp_path: Path
) -> None:
    _, api_url = gateway_api
    url = django_db
    with override_settings(PAYHOOKS=django_keys(api_url)):
        said = django("payhooks_confirm", "--once")
    done = cli(url, tmp_path, "confirm", "--once", "--hooks", HOOKS, "--database-url",
               url, **API_KEYS.env(api_url))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert (
        said
        == done.stdout
        == ("0 callback(s) confirmed by the API, 0 refuted, 0 payment event(s) applied\n")
    )


# --- settlements -------------------------------------------------------------------------------


def test_a_settlement_one_door_fetched_is_recorded_once_and_said_alike_by_the_other(
    django_db: str, gateway_api: tuple[object, str], tmp_path: Path
) -> None:
    from datetime import UTC, datetime, timedelta

    api, api_url = gateway_api
    url, env = django_db, API_KEYS.env(api_url)
    Order.objects.create(reference="order_setl", amount_paise=100)
    assert deliver(capture("order_setl", "evt_setl")) == "processed"
    purchase = Purchase(provider=Provider.RAZORPAY, cart_id="c", reference="order_setl",
                        amount_paise=100, items={"TEA": 1})  # fmt: skip
    api.pay(purchase, "pay_evt_setl")  # type: ignore[attr-defined]
    day = datetime.now(UTC).date() - timedelta(days=1)
    at = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=9)
    api.pay_out(Provider.RAZORPAY, at=int(at.timestamp()))  # type: ignore[attr-defined]
    with override_settings(PAYHOOKS=django_keys(api_url)):
        said = django("payhooks_settlements", "--from", str(day), "--to", str(day))
    assert "razorpay: 1 new payout(s), 1 new line(s), 1 matched" in said
    done = cli(url, tmp_path, "settlements", "--from", str(day), "--to", str(day),
               "--database-url", url, **env)  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "razorpay: 0 new payout(s), 0 new line(s), 0 matched" in done.stdout
    others = [line for line in said.splitlines() if "razorpay:" not in line]
    assert others == [line for line in done.stdout.splitlines() if "razorpay:" not in line]
    with override_settings(PAYHOOKS=django_keys(api_url)):
        listed = json.loads(django("payhooks_settlements", "--unmatched"))
    assert listed == json.loads(cli(url, tmp_path, "settlements", "--unmatched",
                                    "--database-url", url).stdout) == []  # fmt: skip


def test_a_catch_up_one_door_ran_is_where_the_others_starts(
    django_db: str, gateway_api: tuple[object, str], tmp_path: Path
) -> None:
    """``--catch-up`` through Django reads each gateway back as the worker's first fetch; the
    command's, on the same database, reads from the day after the last one read whole."""
    from datetime import datetime, timedelta

    from payhooks.gateways._settlements import INDIA

    _, api_url = gateway_api
    today = datetime.now(INDIA).date()
    with override_settings(PAYHOOKS=django_keys(api_url)):
        said = django("payhooks_settlements", "--catch-up")
    back = today - timedelta(days=51)
    assert said.startswith(f"settlements {back} to {back + timedelta(days=30)}:")
    assert f"settlements {back + timedelta(days=31)} to {today}:" in said
    done = cli(django_db, tmp_path, "settlements", "--catch-up", "--database-url", django_db,
               **API_KEYS.env(api_url))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith(f"settlements {today - timedelta(days=2)} to {today}:")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "name the days to fetch: --from YYYY-MM-DD --to YYYY-MM-DD"),
        (("--from", "2026-01-06", "--to", "2026-01-05"), "the range starts (2026-01-06) after"),
    ],
)
def test_a_range_is_refused_alike_through_the_command_and_django(
    django_db: str, gateway_api: tuple[object, str], tmp_path: Path, args, said
) -> None:
    _, api_url = gateway_api
    with override_settings(PAYHOOKS=django_keys(api_url)), pytest.raises(CommandError) as refused:
        django("payhooks_settlements", *args)
    assert str(refused.value).startswith(said)
    done = cli(django_db, tmp_path, "settlements", *args, "--database-url", django_db,
               **API_KEYS.env(api_url))  # fmt: skip
    assert done.exit_code == 1
    assert done.stderr.startswith(f"payhooks: {said}")


def test_days_not_named_are_said_before_missing_credentials_by_both_doors(
    django_db: str, tmp_path: Path
) -> None:
    """What the command lacks first is its days: a merchant without API keys yet, running it
    bare, is told to name them (as ``payhooks settlements`` tells), not sent to find keys."""
    said = "name the days to fetch: --from YYYY-MM-DD --to YYYY-MM-DD"
    with pytest.raises(CommandError) as refused:
        django("payhooks_settlements")
    assert str(refused.value) == said
    done = cli(django_db, tmp_path, "settlements", "--database-url", django_db)
    assert done.exit_code == 1
    assert done.stderr == f"payhooks: {said}\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--unsettled", "--unmatched"), "--unsettled and --unmatched print one list each"),
        (("--unmatched", "--from", "2026-01-05", "--to", "2026-01-05"), "--unmatched prints every"),
        (("--unsettled", "--from", "2026-01-05"), "--from and --to name the days to fetch"),
        (("--unreadable", "--unsettled"), "--unsettled and --unreadable print one list each"),
    ],
)
def test_lists_together_or_beside_days_are_refused_alike_as_a_usage_error(
    django_db: str, tmp_path: Path, args, said
) -> None:
    with pytest.raises(CommandError) as refused:
        django("payhooks_settlements", *args)
    assert said in str(refused.value) and refused.value.returncode == 2
    done = cli(django_db, tmp_path, "settlements", *args, "--database-url", django_db)
    assert done.exit_code == 2
    assert done.stderr == f"payhooks: {refused.value}\n"


def test_the_report_lines_it_could_not_read_are_listed_alike_by_both_doors(
    django_db: str, tmp_path: Path
) -> None:
    from payhooks.gateways.razorpay import settlements
    from payhooks.settlements import records

    item = {"entity_id": "pay_odd", "type": "payment", "settled": "yes"}
    body = json.dumps({"entity": "collection", "count": 1, "items": [item]}).encode()
    with psycopg.connect(django_db, autocommit=True) as conn:
        records.record(conn, [], [], settlements.recon(body).unreadable)
    said = json.loads(django("payhooks_settlements", "--unreadable"))
    done = cli(django_db, tmp_path, "settlements", "--unreadable", "--database-url", django_db)
    assert said == json.loads(done.stdout)
    assert [(row["entry_id"], row["reason"]) for row in said] == [
        ("pay_odd", "a recon item's settled is not true or false")
    ]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("0000000090", None),  # read as 90, as the command reads it
        ("0", "PAYHOOKS_RETENTION_DAYS must be a whole number of days from 15 to 36500"),
        ("ninety", "PAYHOOKS_RETENTION_DAYS must be a whole number of days from 15 to 36500"),
        ("3000000", "PAYHOOKS_RETENTION_DAYS must be at most 36500 days"),
        ("99999999999", "PAYHOOKS_RETENTION_DAYS must be at most 36500 days"),
    ],
)
def test_a_retention_window_is_read_alike_by_django_and_the_service(
    parked_and_paid: str, monkeypatch: pytest.MonkeyPatch, given: str, said: str | None
) -> None:
    """A window of millions of days overflowed PostgreSQL's timestamps: a traceback from
    Django's purge, a database error from the command; leading zeros were refused by Django
    alone, in words that did not fit."""
    from payhooks.service.config import Settings
    from payhooks.service.errors import SettingError

    monkeypatch.setenv("PAYHOOKS_RETENTION_DAYS", given)
    if said is None:
        assert django("payhooks_purge", "--dry-run").startswith("would delete")
        assert Settings.from_env({"PAYHOOKS_RETENTION_DAYS": given}).retention_days == 90
        return
    with pytest.raises(CommandError) as refused:
        django("payhooks_purge", "--dry-run")
    assert str(refused.value).startswith(said)
    with pytest.raises(SettingError) as refused_too:
        Settings.from_env({"PAYHOOKS_RETENTION_DAYS": given})
    assert said.removeprefix("PAYHOOKS_RETENTION_DAYS ") in str(refused_too.value)


def test_a_window_past_a_hundred_years_is_refused_by_both_doors_in_one_line(
    parked_and_paid: str, tmp_path: Path
) -> None:
    url = parked_and_paid
    with pytest.raises(CommandError):
        django("payhooks_purge", "--older-than-days", "3000000", "--dry-run")
    done = cli(url, tmp_path, "purge", "--older-than-days", "3000000", "--database-url", url)
    assert done.exit_code == 2 and "Traceback" not in done.output

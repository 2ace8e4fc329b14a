"""A refund intent stuck ``requested`` is cancelled by one function, ``refunds.cancel``,
whichever door a person uses: ``payhooks refunds cancel`` or the console's button. Each finds
what the other did, and refuses what the other refuses."""

from __future__ import annotations

import json
from pathlib import Path

from payhooks.console import actions
from payhooks.console.actions import Done
from payhooks.events import Provider
from tests.invoking import payhooks_command
from tests.refunds import test_sending as sending_tests
from tests.refunds.test_sending import PAYMENT, ask, paid, send

CF = Provider.CASHFREE
core = sending_tests.core  # its fixtures
gateway_api = sending_tests.gateway_api


def cancel(url: str, home: Path, key: str, by: str = "asha", *more: str):  # type: ignore[no-untyped-def]
    return payhooks_command(
        url, home, "refunds", "cancel", key, "--provider", "cashfree",
        "--reason", "Cashfree keeps failing it", "--by", by, "--database-url", url, *more,
    )  # fmt: skip


def test_an_intent_sent_before_is_cancelled_by_the_command_only_with_not_at_gateway(
    core, database_url: str, tmp_path: Path
) -> None:
    """Once sent, a refund may be at the gateway though its answer was lost: the command
    refuses to cancel it, naming why, until the person says the dashboard has no such refund;
    the shop API likewise (``not_at_gateway``), the console by its ticked box."""
    conn, api, _ = core
    paid(api, CF)
    made = ask(conn, CF, 10_000, key="sent-once")
    conn.execute("UPDATE payhooks_refunds SET attempts = 1")  # its call's answer lost
    refused = cancel(database_url, tmp_path, made.idempotency_key)
    assert refused.exit_code == 1, refused.output
    assert "sent to the gateway 1 time(s) already" in refused.stderr
    done = cancel(database_url, tmp_path, made.idempotency_key, "asha", "--not-at-gateway")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["state"] == "cancelled"


def listed(url: str, home: Path) -> list[dict[str, object]]:
    done = payhooks_command(
        url, home, "refunds", "list", PAYMENT[CF], "--provider", "cashfree", "--database-url", url
    )
    assert done.exit_code == 0, done.output
    found: list[dict[str, object]] = json.loads(done.stdout)
    return found


def test_an_intent_is_cancelled_alike_through_the_command_and_the_console(
    core, database_url: str, tmp_path: Path
) -> None:
    conn, api, _ = core
    paid(api, CF)
    first, second = (ask(conn, CF, 10_000, key=f"part-{n}") for n in (1, 2))
    done = cancel(database_url, tmp_path, first.idempotency_key)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["state"] == "cancelled"
    clicked = actions.cancel_refund(
        conn, "cashfree", second.idempotency_key, reason="stalled", operator="ravi"
    )
    assert clicked.done is Done.REFUND_CANCELLED
    assert sorted((r["state"], r["cancelled_by"]) for r in listed(database_url, tmp_path)) == [
        ("cancelled", "asha"),
        ("cancelled", "ravi"),
    ]


def test_an_intent_one_door_cancelled_is_the_same_cancelled_intent_through_the_other(
    core, database_url: str, tmp_path: Path
) -> None:
    conn, api, _ = core
    paid(api, CF)
    made = ask(conn, CF, 10_000)
    clicked = actions.cancel_refund(
        conn, "cashfree", made.idempotency_key, reason="stuck", operator="ravi"
    )
    assert clicked.done is Done.REFUND_CANCELLED
    done = cancel(database_url, tmp_path, made.idempotency_key)
    assert done.exit_code == 0, done.output
    assert (json.loads(done.stdout)["cancelled_by"], json.loads(done.stdout)["cancel_reason"]) == (
        "ravi",
        "stuck",
    )


def test_an_intent_the_gateway_has_is_refused_through_the_command_and_the_console(
    core, database_url: str, tmp_path: Path
) -> None:
    conn, api, url = core
    paid(api, CF)
    made = ask(conn, CF, 10_000)
    assert send(database_url, url).sent[CF] == 1
    done = cancel(database_url, tmp_path, made.idempotency_key)
    assert done.exit_code == 1
    assert done.stderr.startswith("payhooks: ") and "cancel" in done.stderr
    clicked = actions.cancel_refund(
        conn, "cashfree", made.idempotency_key, reason="stuck", operator="ravi"
    )
    assert clicked.done is Done.REFUND_AT_GATEWAY
    assert [r["state"] for r in listed(database_url, tmp_path)] != ["cancelled"]


def test_an_unknown_gateway_is_refused_with_the_usage_before_anything_runs(
    database_url: str, tmp_path: Path
) -> None:
    """``--provider nosuch`` said Python's own words (``'nosuch' is not a valid Provider``) and
    exited 1 from inside the command; every other command's choice is refused by its parser,
    with the usage and the choices, exit 2, as the README says."""
    for args in (("list", "pay_1"), ("cancel", "ph1", "--reason", "r", "--by", "asha")):
        done = payhooks_command(
            database_url, tmp_path, "refunds", *args, "--provider", "nosuch",
            "--database-url", database_url,
        )  # fmt: skip
        assert done.exit_code == 2, done.output
        assert "Usage:" in done.output and "razorpay" in done.output, done.output
        assert "not a valid Provider" not in done.output

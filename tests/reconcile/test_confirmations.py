"""A callback that proves only who sent it (a static credential, no signature over its fields)
never reaches a handler as it came: it is recorded ``confirming`` and answered at once; the
confirmation pass asks the gateway's status API and applies what the API reports, exactly
once, confirming or refuting the callback. A forged callback under the right credential
changes nothing and is flagged. On real PostgreSQL, through the claim; the status API is the
``StatusClient`` seam (each gateway's client is tested against its HTTP double)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import payhooks
from payhooks import EventKind, Hooks
from payhooks.events import Event, Provider, Received
from payhooks.gateways._reports import Report, received
from payhooks.intake.ingest import Outcome, ingest_received
from payhooks.reconcile.confirming import confirm
from payhooks.reconcile.passes import Tally
from payhooks.reconcile.running import connecting, delivering

ORDER = "M-ORDER-1"
PAYMENT = "OM12345"


def callback(kind: EventKind = EventKind.PAYMENT_CAPTURED, *, key: str = "cb-1") -> Received:
    """What a PhonePe adapter makes of a callback: its content marked unconfirmed."""
    body = f'{{"event": "checkout.order.completed", "key": "{key}"}}'.encode()
    event = Event(
        provider=Provider.PHONEPE, kind=kind, event_type="checkout.order.completed",
        event_id=key, payment_id=PAYMENT, merchant_ref=ORDER, amount_paise=49_900,
        currency="INR", payload_sha256=key, unconfirmed=True,
    )  # fmt: skip
    return Received(event=event, body=body, headers={})


def reported(kind: EventKind = EventKind.PAYMENT_CAPTURED, status: str = "COMPLETED") -> Report:
    entity = {"orderId": PAYMENT, "merchantOrderId": ORDER, "state": status, "amount": 49_900}
    said = received(
        Provider.PHONEPE, entity, kind=kind, status=status.lower(), payment_id=PAYMENT,
        merchant_ref=ORDER, amount_paise=49_900, currency="INR",
    )  # fmt: skip
    return Report(received=(said,))


@dataclass
class Api:
    """The gateway's status API as the pass sees it: what it says of each order, and who asked."""

    says: Report = field(default_factory=Report)
    asked: list[str] = field(default_factory=list)

    def report(self, reference: str) -> Report:
        self.asked.append(reference)
        return self.says


@pytest.fixture
def shop(database_url: str) -> Iterator[tuple[psycopg.Connection, list[Event]]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        payhooks.migrate(conn)
        paid: list[Event] = []
        yield conn, paid


def hooks_noting(paid: list[Event]) -> Hooks:
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        paid.append(event)

    return hooks


def outcome(conn, key: str) -> str:
    row = conn.execute("SELECT outcome FROM processed_webhooks WHERE event_id = %s", (key,))
    return row.fetchone()[0]


def run_pass(database_url: str, paid: list[Event], api: Api, at: datetime | None = None) -> Tally:
    connect = connecting(database_url)
    deliver = delivering(connect, hooks_noting(paid))
    moment = at or datetime.now(UTC)
    return confirm(connect, {Provider.PHONEPE: api}, deliver, Tally(), now=lambda: moment)


def test_a_callback_is_recorded_and_answered_but_never_handed_to_the_handler(shop):
    conn, paid = shop
    receipt = ingest_received(conn, callback(), hooks_noting(paid))
    assert receipt.outcome is Outcome.CONFIRMING and paid == []
    assert outcome(conn, "cb-1") == "confirming"
    again = ingest_received(conn, callback(), hooks_noting(paid))
    assert again.outcome is Outcome.DUPLICATE  # a copy of it, as any other
    waiting = conn.execute("SELECT gateway_order_id, kind FROM payhooks_confirmations")
    assert waiting.fetchall() == [(ORDER, "payment_captured")]


def test_the_api_confirms_it_and_the_payment_is_applied_once(shop, database_url):
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    api = Api(says=reported())
    tally = run_pass(database_url, paid, api)
    assert api.asked == [ORDER]
    assert [e.payment_id for e in paid] == [PAYMENT]  # what the API said, applied
    assert paid[0].event_id.startswith("reconcile:")
    assert tally.confirmed[Provider.PHONEPE] == 1 and outcome(conn, "cb-1") == "confirmed"
    # A second callback for the same payment (another key): confirmed, nothing applied twice.
    ingest_received(conn, callback(key="cb-2"), hooks_noting(paid))
    run_pass(database_url, paid, api)
    assert len(paid) == 1 and outcome(conn, "cb-2") == "confirmed"


def test_a_forged_callback_the_api_contradicts_changes_nothing_and_is_refuted(shop, database_url):
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    tally = run_pass(database_url, paid, Api(says=reported(EventKind.PAYMENT_FAILED, "FAILED")))
    assert paid == []
    assert tally.refuted[Provider.PHONEPE] == 1 and outcome(conn, "cb-1") == "refuted"
    detail = conn.execute("SELECT verdict, detail FROM payhooks_confirmations").fetchone()
    assert detail[0] == "refuted" and "another state" in detail[1]


def test_a_callback_the_api_never_confirms_waits_then_is_refuted(shop, database_url):
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    silent = Api()
    run_pass(database_url, paid, silent)
    assert outcome(conn, "cb-1") == "confirming"  # asked again later
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    later = datetime.now(UTC) + timedelta(hours=1)
    tally = run_pass(database_url, paid, silent, at=later)
    assert len(silent.asked) == 2 and paid == []
    assert tally.refuted[Provider.PHONEPE] == 1 and outcome(conn, "cb-1") == "refuted"


def test_a_real_callback_under_the_key_of_a_refuted_one_is_confirmed_not_a_duplicate(
    shop, database_url
):
    """A callback refuted (a forgery sent before the customer paid, under the credential) took
    its key: the real one, the same key in other bytes, was answered duplicate and dropped, and
    the payment waited for reconciliation. Now it is asked about in its own right; a copy of it
    is a copy."""
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    later = datetime.now(UTC) + timedelta(hours=1)
    assert run_pass(database_url, paid, Api(), at=later).refuted[Provider.PHONEPE] == 1
    real = callback()
    real = replace(real, body=real.body + b" ", event=replace(real.event, payload_sha256="real"))
    receipt = ingest_received(conn, real, hooks_noting(paid))
    assert receipt.outcome is Outcome.CONFIRMING and receipt.event.event_id != "cb-1"
    again = ingest_received(conn, real, hooks_noting(paid))
    assert again.outcome is Outcome.DUPLICATE
    tally = run_pass(database_url, paid, Api(says=reported()))
    assert tally.confirmed[Provider.PHONEPE] == 1 and [e.payment_id for e in paid] == [PAYMENT]
    assert outcome(conn, "cb-1") == "refuted"  # the forgery's word stays what the API said


def test_a_callback_that_names_no_order_is_recorded_ignored(shop):
    conn, paid = shop
    lone = callback(EventKind.OTHER, key="cb-other")
    assert ingest_received(conn, lone, hooks_noting(paid)).outcome is Outcome.IGNORED
    assert conn.execute("SELECT count(*) FROM payhooks_confirmations").fetchone() == (0,)


def test_a_passing_state_is_heard_never_refuted(shop, database_url):
    """A card payment's "pending" callback comes before its capture: once the API answers,
    what it says is applied and the callback settled, though the API says captured."""
    conn, paid = shop
    ingest_received(conn, callback(EventKind.PAYMENT_PENDING, key="cb-pending"), hooks_noting(paid))
    tally = run_pass(database_url, paid, Api(says=reported()))
    assert [e.payment_id for e in paid] == [PAYMENT]
    assert tally.refuted[Provider.PHONEPE] == 0 and outcome(conn, "cb-pending") == "confirmed"


def test_a_capture_the_api_reports_under_another_attempts_id_is_confirmed(shop, database_url):
    """The callback named one attempt, the API the order's capture under another (a retried
    attempt): the same order and amount captured is the capture the callback claimed."""
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    other = reported()
    moved = replace(other.received[0].event, payment_id="OM99999")
    api = Api(says=Report(received=(replace(other.received[0], event=moved),)))
    tally = run_pass(database_url, paid, api)
    assert tally.confirmed[Provider.PHONEPE] == 1 and outcome(conn, "cb-1") == "confirmed"


def test_callbacks_never_asked_about_are_leased_before_those_asked_again(shop):
    """A flood of forged callbacks, each asked about again and again, never stands ahead of a
    new one."""
    from payhooks.intake.confirmations import leased

    conn, paid = shop
    ingest_received(conn, callback(key="cb-old"), hooks_noting(paid))
    conn.execute(
        "UPDATE payhooks_confirmations SET attempts = 5,"
        " next_attempt_at = now() - interval '1 hour'"
    )
    ingest_received(conn, callback(key="cb-new"), hooks_noting(paid))
    assert [p.event_id for p in leased(conn, "phonepe", 1).due] == ["cb-new"]


@dataclass
class Failing:
    """A status API that never answers usefully: a 5xx, or the credentials refused."""

    error: Exception

    def report(self, reference: str) -> Report:
        raise self.error


@pytest.mark.parametrize("refused", [False, True])
def test_a_callback_its_api_never_answers_usefully_for_a_day_waits_and_reaches_a_person(
    shop, database_url, refused
):
    """A day of errors is no word on what the callback claimed, so it is
    never refuted for them (it was, after 24 hours: a real payment lost to an API outage). It
    is asked again, and the alert of callbacks waiting for their API says so."""
    from payhooks.gateways._status import CredentialsRefused
    from payhooks.operations.alerts import core_sources, observe
    from payhooks.plumbing.errors import GatewayApiError

    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    error = (CredentialsRefused if refused else GatewayApiError)("phonepe", "answered 503")
    connect = connecting(database_url)
    deliver = delivering(connect, hooks_noting(paid))
    later = datetime.now(UTC) + timedelta(hours=25)
    confirm(connect, {Provider.PHONEPE: Failing(error)}, deliver, Tally(), now=lambda: later)
    assert outcome(conn, "cb-1") == "confirming" and paid == []
    (waiting,) = conn.execute(
        "SELECT verdict, last_error, next_attempt_at > now() FROM payhooks_confirmations"
    ).fetchall()
    assert waiting[0] is None and "answered 503" in waiting[1] and waiting[2]
    alerts = {a.key: a for a in observe(conn, later, core_sources())}
    assert "answered 503" in alerts["unconfirmed:phonepe"].body


@dataclass
class Orders:
    """A status API that says of each order what ``says`` holds for it."""

    says: dict[str, Report]

    def report(self, reference: str) -> Report:
        return self.says.get(reference, Report())


def for_order(order: str, payment: str, key: str) -> tuple[Received, Report]:
    said = callback(key=key)
    event = replace(said.event, merchant_ref=order, payment_id=payment)
    answer = reported()
    found = answer.received[0]
    api = replace(found, event=replace(found.event, merchant_ref=order, payment_id=payment,
                                       event_id=f"reconcile:{payment}:completed"))  # fmt: skip
    return replace(said, event=event), Report(received=(api,))


def test_one_callback_whose_handler_fails_holds_back_none_of_the_others(shop, database_url):
    """The handler's exception for one callback left the pass, and every
    callback after it waited out its lease, every pass."""
    conn, paid = shop
    bad, bad_said = for_order("M-BAD", "OM-BAD", "cb-bad")
    good, good_said = for_order("M-GOOD", "OM-GOOD", "cb-good")
    for each in (bad, good):
        ingest_received(conn, each, hooks_noting(paid))
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def fail_on_one(conn, event):
        if event.payment_id == "OM-BAD":
            raise RuntimeError("the shop cannot take this one")
        paid.append(event)

    connect = connecting(database_url)
    api = Orders(says={"M-BAD": bad_said, "M-GOOD": good_said})
    tally = confirm(connect, {Provider.PHONEPE: api}, delivering(connect, hooks), Tally())
    assert [e.payment_id for e in paid] == ["OM-GOOD"]
    assert outcome(conn, "cb-good") == "confirmed" and outcome(conn, "cb-bad") == "confirming"
    assert tally.unapplied[Provider.PHONEPE] == 1
    waiting = conn.execute(
        "SELECT last_error, next_attempt_at > now() FROM payhooks_confirmations "
        "WHERE event_id = 'cb-bad'"
    ).fetchone()
    assert "the shop cannot take this one" in waiting[0] and waiting[1]  # said, and backed off


def test_a_callback_this_release_cannot_read_is_set_aside_and_the_others_are_asked_about(
    shop, database_url
):
    """A waiting callback whose kind this release does not know (a newer release wrote it
    before a rollback) raised as the leased batch was read: every callback of the gateway
    stayed leased, none asked about, every pass. It is set aside saying why, and reaches a
    person past the bound; the others are asked about and applied."""
    from payhooks.operations.alerts import core_sources, observe

    conn, paid = shop
    odd, _ = for_order("M-ODD", "OM-ODD", "cb-odd")
    good, good_said = for_order("M-GOOD", "OM-GOOD", "cb-good")
    for each in (odd, good):
        ingest_received(conn, each, hooks_noting(paid))
    conn.execute(
        "UPDATE payhooks_confirmations SET kind = 'payment_voided' WHERE event_id = 'cb-odd'"
    )
    api = Orders(says={"M-GOOD": good_said})
    connect = connecting(database_url)
    tally = confirm(connect, {Provider.PHONEPE: api}, delivering(connect, hooks_noting(paid)),
                    Tally())  # fmt: skip
    assert [e.payment_id for e in paid] == ["OM-GOOD"]
    assert outcome(conn, "cb-good") == "confirmed" and outcome(conn, "cb-odd") == "confirming"
    assert tally.confirmed[Provider.PHONEPE] == 1 and tally.unreadable[Provider.PHONEPE] == 1
    error, later = conn.execute(
        "SELECT last_error, next_attempt_at > now() FROM payhooks_confirmations"
        " WHERE event_id = 'cb-odd'"
    ).fetchone()
    assert "payment_voided" in error and later  # said why, and backed off
    alerts = {a.key: a for a in observe(conn, datetime.now(UTC) + timedelta(hours=1),
                                        core_sources())}  # fmt: skip
    assert "payment_voided" in alerts["unconfirmed:phonepe"].body


def test_a_payment_the_handler_fails_on_never_holds_back_the_next_of_the_callbacks_order(
    shop, database_url
):
    """The API reports a failed attempt, then the capture the callback claimed; the handler
    fails on the failed attempt. The capture is applied all the same; the callback waits, saying
    which payment failed, and is never settled while one of its order's payments is not
    applied."""
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    entity = {"orderId": "OM-FAILED", "merchantOrderId": ORDER, "state": "FAILED"}
    failed = received(
        Provider.PHONEPE, entity, kind=EventKind.PAYMENT_FAILED, status="failed",
        payment_id="OM-FAILED", merchant_ref=ORDER, amount_paise=49_900, currency="INR",
    )  # fmt: skip
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_FAILED)
    def refuse(conn, event):
        raise RuntimeError("the shop cannot take this one")

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        paid.append(event)

    connect = connecting(database_url)
    api = Api(says=Report(received=(failed, *reported().received)))
    tally = confirm(connect, {Provider.PHONEPE: api}, delivering(connect, hooks), Tally())
    assert [e.payment_id for e in paid] == [PAYMENT]
    assert tally.applied[Provider.PHONEPE] == 1 and tally.unapplied[Provider.PHONEPE] == 1
    assert outcome(conn, "cb-1") == "confirming"
    error, later = conn.execute(
        "SELECT last_error, next_attempt_at > now() FROM payhooks_confirmations"
    ).fetchone()
    assert "OM-FAILED" in error and "the shop cannot take this one" in error and later
    assert PAYMENT not in error


def test_a_callback_waiting_for_its_api_past_the_bound_reaches_a_person(shop):
    """No credentials (no pass asks) or an API down: the callback waits in
    silence. Past the bound it is an alert, and a banner on the console."""
    from payhooks.operations.alarms import alarms
    from payhooks.operations.alerts import core_sources, observe

    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    now = datetime.now(UTC)
    assert "unconfirmed:phonepe" not in [a.key for a in observe(conn, now, core_sources())]
    later = now + timedelta(hours=1)
    found = {a.key: a for a in observe(conn, later, core_sources())}
    assert "unconfirmed:phonepe" in found
    assert "1 PhonePe callback" in found["unconfirmed:phonepe"].body
    assert any(a.kind == "unconfirmed" for a in alarms(conn, later))  # the console's banner


def test_the_alert_of_callbacks_waiting_gives_the_oldest_in_utc_whatever_the_sessions_zone(shop):
    """The alert writes its times in UTC: the oldest's time was written as the database
    session gave it, labelled UTC, on a database whose zone is India's."""
    from payhooks.operations.alerts import core_sources, observe

    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    conn.execute("SET TimeZone = 'Asia/Kolkata'")
    [(since,)] = conn.execute("SELECT requested_at FROM payhooks_confirmations").fetchall()
    later = datetime.now(UTC) + timedelta(hours=1)
    found = {a.key: a for a in observe(conn, later, core_sources())}
    said = f"(the oldest since {since.astimezone(UTC):%Y-%m-%d %H:%M} UTC)"
    assert said in found["unconfirmed:phonepe"].body


def settled_detail(conn, key: str = "cb-1") -> tuple[str, str]:
    row = conn.execute(
        "SELECT verdict, detail FROM payhooks_confirmations WHERE event_id = %s", (key,)
    ).fetchone()
    return row[0], row[1]


def forged_amount(amount_paise: int) -> Received:
    said = callback()
    return replace(said, event=replace(said.event, amount_paise=amount_paise))


def test_a_confirmed_capture_whose_amount_was_forged_says_both_figures(shop, database_url):
    """The callback claimed 1.00 for the payment the API reports captured for 499.00: the API's
    figures are applied, and the record says so, with both (never plainly "confirmed")."""
    conn, paid = shop
    ingest_received(conn, forged_amount(100), hooks_noting(paid))
    run_pass(database_url, paid, Api(says=reported()))
    assert [e.amount_paise for e in paid] == [49_900]
    verdict, detail = settled_detail(conn)
    assert verdict == "confirmed"
    assert "callback claimed payment captured of OM12345 for 1.00 INR" in detail
    assert "API's figures applied: payment captured of OM12345 for 499.00 INR" in detail


def test_a_forged_failure_of_a_charged_order_says_what_the_api_applied(shop, database_url):
    conn, paid = shop
    ingest_received(conn, callback(EventKind.PAYMENT_FAILED, key="cb-failed"), hooks_noting(paid))
    run_pass(database_url, paid, Api(says=reported()))
    assert [e.payment_id for e in paid] == [PAYMENT]
    verdict, detail = settled_detail(conn, "cb-failed")
    assert verdict == "confirmed"
    assert "callback claimed payment failed of OM12345" in detail
    assert "API's figures applied: payment captured of OM12345 for 499.00 INR" in detail


def test_a_confirmed_capture_with_the_same_figures_says_so_plainly(shop, database_url):
    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    run_pass(database_url, paid, Api(says=reported()))
    verdict, detail = settled_detail(conn)
    assert verdict == "confirmed" and "figures applied" not in detail
    assert "reports the payment captured" in detail


def test_a_callback_its_api_never_settles_is_settled_by_hand_refuted_with_the_note(
    shop, database_url
):
    """A forged refund callback whose status API only ever answers an error waits for ever,
    holding its order's and its gateway's places (docs/security.md): a person settles it with
    ``resolve``, refuted, nothing applied, the note kept; a later pass asks nothing of it."""
    from payhooks.intake.expectations import NotAMismatch, resolve

    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))
    resolve(conn, "phonepe", "cb-1", "forged: PhonePe's dashboard shows no such refund")
    assert outcome(conn, "cb-1") == "refuted"
    verdict = conn.execute("SELECT verdict, detail FROM payhooks_confirmations").fetchall()
    assert verdict == [
        ("refuted", "settled by hand: forged: PhonePe's dashboard shows no such refund")
    ]
    kept = conn.execute("SELECT resolution FROM payhooks_resolutions").fetchall()
    assert kept == [("forged: PhonePe's dashboard shows no such refund",)]
    api = Api(says=reported())
    run_pass(database_url, paid, api)
    assert api.asked == [] and paid == []
    with pytest.raises(NotAMismatch, match="not parked"):
        resolve(conn, "phonepe", "cb-1", "again")


def test_a_callback_settled_by_hand_while_a_pass_asks_keeps_the_persons_word(shop, database_url):
    """The pass holds no lock while the API answers: a person refutes the callback meanwhile,
    then the API reports the payment. The payment is applied (the API's word: it is real), the
    callback stays as the person settled it, and the pass counts no confirmation of it."""
    from payhooks.intake.expectations import resolve
    from payhooks.operations import health

    conn, paid = shop
    ingest_received(conn, callback(), hooks_noting(paid))

    class Resolving(Api):
        def report(self, reference: str) -> Report:
            with psycopg.connect(database_url, autocommit=True) as other:
                resolve(other, "phonepe", "cb-1", "forged: the dashboard shows nothing")
            return super().report(reference)

    tally = run_pass(database_url, paid, Resolving(says=reported()))
    assert tally.confirmed[Provider.PHONEPE] == 0 and tally.refuted[Provider.PHONEPE] == 0
    assert [e.payment_id for e in paid] == [PAYMENT]
    assert outcome(conn, "cb-1") == "refuted"
    assert health.refuted_last_day(conn, datetime.now(UTC)) == {}  # no word of the API's


@dataclass
class RefundApi(Api):
    """A gateway whose order status lists no refunds (PhonePe): a refund is asked about by
    its own id."""

    refund_says: Report = field(default_factory=Report)

    def refund(
        self, refund_id: str, order_id: str, *, claimed_paise: int | None = None, asked=None
    ) -> Report:
        self.asked.append(refund_id)
        return self.refund_says


def test_a_refund_callback_the_api_reports_failed_is_refuted_at_once(shop, database_url):
    """PhonePe's refund status FAILED is final (a refund failed is never made under its id
    again): a callback claiming that refund completed is contradicted, refuted at the first
    pass. It waited the 30 minutes of a refund the API had never heard of."""
    conn, paid = shop
    said = callback(EventKind.REFUND_PROCESSED, key="cb-r1")
    claimed = replace(said.event, refund_id="rf_1", refund_amount_paise=49_900)
    assert ingest_received(conn, replace(said, event=claimed), hooks_noting(paid)).outcome is (
        Outcome.CONFIRMING
    )
    failed = Report(skipped=("rf_1:FAILED",), contradicted=True)
    api = RefundApi(says=reported(), refund_says=failed)
    tally = run_pass(database_url, paid, api)
    assert "rf_1" in api.asked
    assert tally.refuted[Provider.PHONEPE] == 1 and outcome(conn, "cb-r1") == "refuted"
    (detail,) = conn.execute("SELECT detail FROM payhooks_confirmations").fetchone()
    assert "in a final state of its own: rf_1:FAILED" in detail, detail
    assert "30 minutes" not in detail
    # It read "the status API reports the refund processed of ...", as if the API had.
    assert detail.startswith("the callback claimed the refund processed of "), detail
    assert "the status API reports the refund processed" not in detail


def test_a_refund_callback_the_api_reports_underway_waits_past_the_patience(shop, database_url):
    """A callback claiming a refund done that the API reports still on its way (PhonePe's
    PENDING, PayU's queued) was refuted after 30 minutes, as one the API never heard of; the
    gateway's own callback, when the refund completes days later, comes under the same key and
    was answered ``duplicate``: the app never heard of a refund made. It waits, and is
    confirmed once the API reports the refund done."""
    from payhooks.intake.confirmations import PATIENCE

    conn, paid = shop
    said = callback(EventKind.REFUND_PROCESSED, key="cb-r2")
    claimed = replace(said.event, refund_id="rf_2", refund_amount_paise=49_900)
    ingest_received(conn, replace(said, event=claimed), hooks_noting(paid))
    api = RefundApi(says=reported(), refund_says=Report(skipped=("rf_2:PENDING",), underway=True))
    later = datetime.now(UTC) + PATIENCE * 10
    tally = run_pass(database_url, paid, api, at=later)
    assert tally.refuted[Provider.PHONEPE] == 0 and outcome(conn, "cb-r2") == "confirming"
    done = reported(EventKind.REFUND_PROCESSED, "COMPLETED")
    api.refund_says = Report(received=(replace(done.received[0], event=replace(
        done.received[0].event, refund_id="rf_2", refund_amount_paise=49_900)),))  # fmt: skip
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    tally = run_pass(database_url, paid, api, at=later)
    assert tally.confirmed[Provider.PHONEPE] == 1 and outcome(conn, "cb-r2") == "confirmed"


@dataclass
class Troubled:
    """A status API that raises ``errors`` in turn, then says of each order what ``says``
    holds for it; who asked is kept."""

    errors: list[Exception]
    says: dict[str, Report]
    asked: list[str] = field(default_factory=list)

    def report(self, reference: str) -> Report:
        self.asked.append(reference)
        if self.errors:
            raise self.errors.pop(0)
        return self.says.get(reference, Report())


def _waiting_callbacks(conn, n: int) -> dict[str, Report]:
    says = {}
    for i in range(n):
        said, answer = for_order(f"M-{i}", f"OM-{i}", f"cb-{i}")
        ingest_received(conn, said, Hooks())
        says[f"M-{i}"] = answer
    return says


def _waits(conn) -> list[tuple[str, int, float]]:
    rows = conn.execute(
        "SELECT event_id, attempts, extract(epoch FROM next_attempt_at - now()) "
        "FROM payhooks_confirmations ORDER BY event_id"
    ).fetchall()
    return [(key, attempts, float(wait)) for key, attempts, wait in rows]


@pytest.mark.parametrize("retry_after_s", [90.0, 1.0, None])
def test_a_rate_limit_stops_asking_its_gateway_for_the_rest_of_the_pass(
    shop, database_url, retry_after_s
):
    """A 429 stops the pass asking that gateway, as it stops reconciliation's (docs/providers.md,
    "Status APIs"): the callbacks not asked wait what the gateway asked for, at least a minute,
    and are not counted asked; so does the one asked (a Retry-After of 1 s had it asked again 2 s
    later, its own backoff). The pass asked every leased callback after a 429."""
    from payhooks.plumbing.errors import GatewayApiError

    conn, paid = shop
    says = _waiting_callbacks(conn, 3)
    limit = GatewayApiError("phonepe", "answered 429", status=429, retry_after_s=retry_after_s)
    api = Troubled(errors=[limit], says=says)
    connect = connecting(database_url)
    tally = confirm(
        connect, {Provider.PHONEPE: api}, delivering(connect, hooks_noting(paid)), Tally()
    )
    assert len(api.asked) == 1 and tally.api_errors[Provider.PHONEPE] == 1
    assert tally.callbacks_deferred[Provider.PHONEPE] == 2 and tally.deferred == {}
    assert "2 callback(s) deferred to a later pass" in tally.confirmations()  # payhooks confirm
    assert "2 callback(s) deferred to a later pass" in tally.summary()
    waited = max(retry_after_s or 0, 60)
    for key, attempts, wait in _waits(conn):
        asked = f"M-{key.removeprefix('cb-')}" in api.asked
        assert attempts == (1 if asked else 0), key  # a deferred callback was not asked
        assert waited - 2 < wait <= max(waited, 300) + 1, (key, wait)
    conn.execute("UPDATE payhooks_confirmations SET next_attempt_at = now()")
    confirm(connect, {Provider.PHONEPE: api}, delivering(connect, hooks_noting(paid)), Tally())
    assert sorted(e.payment_id for e in paid) == ["OM-0", "OM-1", "OM-2"]


def test_outages_in_a_row_pause_the_gateway_for_the_rest_of_the_pass(shop, database_url):
    """Three outages in a row (5xx, no answer) pause the gateway as they pause
    reconciliation's (docs/operations.md): the rest wait a minute; a 4xx about one order does
    not count, nor does an outage followed by an answer."""
    from payhooks.plumbing.errors import GatewayApiError

    conn, paid = shop
    says = _waiting_callbacks(conn, 7)
    down = [GatewayApiError("phonepe", "answered 503", status=503) for _ in range(4)]
    refused = GatewayApiError("phonepe", "answered 400: no such order", status=400)
    api = Troubled(errors=[down[0], refused, down[1], down[2], down[3]], says=says)
    connect = connecting(database_url)
    tally = confirm(
        connect, {Provider.PHONEPE: api}, delivering(connect, hooks_noting(paid)), Tally()
    )
    assert len(api.asked) == 5  # 503, 400, then three 503s in a row: paused
    assert (
        tally.api_errors[Provider.PHONEPE] == 5 and tally.callbacks_deferred[Provider.PHONEPE] == 2
    )
    deferred = [(k, a, w) for k, a, w in _waits(conn) if a == 0]
    assert len(deferred) == 2 and all(58 < w <= 61 for _, _, w in deferred)
    assert paid == []


def test_a_gateway_its_checkouts_paused_is_not_asked_about_its_callbacks_in_that_pass(
    shop, database_url
):
    """The pass's confirmation step called the gateway again right after its checkouts' 429
    (which asked for two minutes), charging a callback an attempt: one pause for the pass."""
    from payhooks.plumbing.errors import GatewayApiError
    from payhooks.reconcile.passes import Options, Reconciler
    from tests.factories import purchase

    conn, paid = shop
    purchase(conn, Provider.PHONEPE)
    says = _waiting_callbacks(conn, 2)
    limit = GatewayApiError("phonepe", "answered 429", status=429, retry_after_s=120)
    api = Troubled(errors=[limit], says=says)
    connect = connecting(database_url)
    reconciler = Reconciler(connect, {Provider.PHONEPE: api}, Options(after_s=0, window_s=3600),
                            deliver=delivering(connect, hooks_noting(paid)))  # fmt: skip
    tally = reconciler.run()
    assert len(api.asked) == 1 and set(tally.paused) == {Provider.PHONEPE}, api.asked
    assert [a for _, a, _ in _waits(conn)] == [0, 0]  # no callback charged an attempt


def test_a_release_leaves_a_callback_another_pass_has_leased_since_to_it(shop, database_url):
    """A pass slower than the lease: a second pass leased the callbacks meanwhile; the first,
    paused then, gave back the second's attempt and cut its lease short."""
    from payhooks.intake import confirmations
    from payhooks.plumbing.errors import GatewayApiError

    conn, paid = shop
    _waiting_callbacks(conn, 3)
    second: list[str] = []

    class Slow:
        def report(self, reference: str) -> Report:
            conn.execute(  # the first pass's lease runs out; a second pass leases the rest
                "UPDATE payhooks_confirmations SET next_attempt_at = now()"
                " WHERE attempts = 1 AND gateway_order_id <> %s",
                (reference,),
            )
            second.extend(p.event_id for p in confirmations.leased(conn, "phonepe", 10).due)
            raise GatewayApiError("phonepe", "answered 429", status=429)

    connect = connecting(database_url)
    tally = confirm(connect, {Provider.PHONEPE: Slow()}, delivering(connect, hooks_noting(paid)),
                    Tally())  # fmt: skip
    assert len(second) == 2 and tally.callbacks_deferred == {}
    held = {k: (a, w) for k, a, w in _waits(conn) if k in second}
    assert all(a == 2 and w > 100 for a, w in held.values()), held  # the second pass's lease


def test_a_429_whose_write_is_refused_still_pauses_its_gateway(shop, database_url, monkeypatch):
    """The database refused to write down a 429's wait (a row locked): the error left as a
    database one, counted "not applied", and the pass asked the next callback of the gateway
    that had just asked it to stop."""
    from payhooks.intake import confirmations
    from payhooks.plumbing.errors import GatewayApiError
    from tests.racing import refused_once

    conn, paid = shop
    says = _waiting_callbacks(conn, 3)
    limits = [GatewayApiError("phonepe", "answered 429", status=429, retry_after_s=120)]
    api = Troubled(errors=limits, says=says)
    refused_once(monkeypatch, confirmations, "again")
    connect = connecting(database_url)
    tally = confirm(connect, {Provider.PHONEPE: api}, delivering(connect, hooks_noting(paid)),
                    Tally())  # fmt: skip
    assert len(api.asked) == 1 and set(tally.paused) == {Provider.PHONEPE}
    assert tally.api_errors[Provider.PHONEPE] == 1 and not tally.unapplied
    assert tally.callbacks_deferred[Provider.PHONEPE] == 2

"""payhooks.flask.blueprint in a small Flask app, served over a real socket, on the merchant's
SQLAlchemy engine and real PostgreSQL."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterator

import httpx
import pytest
import sqlalchemy
from flask import Flask, request
from sqlalchemy import text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

import payhooks.flask
from payhooks import Applied, EventKind, Hooks, Outcome, header_map
from payhooks.events import Provider
from payhooks.intake.endpoint import MAX_GATEWAY_CHARS
from payhooks.sim.gateway import Delivery
from tests import loopback
from tests.factories import ADAPTERS, GATEWAY
from tests.fastapi.test_delivery_health import noted
from tests.flask.conftest import claimed, engine_for, serving


class Base(DeclarativeBase):
    pass


class Note(Base):
    """A merchant's ORM table, written through ``session_for(conn)``."""

    __tablename__ = "merchant_notes"
    id: Mapped[int] = mapped_column(primary_key=True)
    ref: Mapped[str]


CLIPPED = "a" * (MAX_GATEWAY_CHARS - 1) + "\u2026"  # an unknown gateway's name, quoted
ORDERS = "CREATE TABLE merchant_orders (ref text PRIMARY KEY, paid_by text)"


@pytest.fixture
def shop(conn, engine):
    conn.execute(ORDERS)
    Base.metadata.create_all(engine)
    return conn


def capture(payment_id: str = "pay_flask0000001", ref: str = "order_flask1") -> Delivery:
    return GATEWAY.razorpay(
        "payment.captured", payment_id=payment_id, order_id=ref, amount_paise=100
    )


def payu_capture(txnid: str = "txn_flask_1") -> Delivery:
    return GATEWAY.payu(txnid=txnid, mihpayid="403993715500000001", amount="1.00")


def raw_hooks() -> Hooks:
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        conn.execute(
            "INSERT INTO merchant_orders VALUES (%s, %s)", (event.merchant_ref, event.payment_id)
        )

    return hooks


def orm_hooks() -> Hooks:
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def note(conn, event):
        payhooks.flask.session_for(conn).add(Note(ref=event.merchant_ref))

    return hooks


def flask_app(webhooks, *, reads_form: bool = False) -> Flask:
    """A merchant's app (with payhooks' blueprint, unless None); with ``reads_form``, an
    app-wide hook reads ``request.form`` first."""
    app = Flask(__name__)
    if reads_form:

        @app.before_request
        def spam_check():
            request.form.get("website")

    if webhooks is not None:
        app.register_blueprint(webhooks)
    return app


@pytest.fixture
def served(shop, engine) -> Iterator[Callable[..., str]]:
    """Serve an app with the blueprint over ``hooks``; yields ``serve(hooks, **options)``."""
    stack = []

    def serve(hooks, *, reads_form=False, **options):
        options.setdefault("engine", engine)
        webhooks = payhooks.flask.blueprint(adapters=ADAPTERS.values(), hooks=hooks, **options)
        running = serving(flask_app(webhooks, reads_form=reads_form))
        stack.append(running)
        return running.__enter__()

    yield serve
    for running in reversed(stack):
        running.__exit__(None, None, None)


def post(base: str, delivery: Delivery, headers=None) -> httpx.Response:
    return loopback.post(
        base + delivery.path, content=delivery.body, headers=headers or delivery.headers
    )


def order_rows(conn) -> list[tuple[object, ...]]:
    return conn.execute("SELECT ref, paid_by FROM merchant_orders").fetchall()


def note_refs(conn) -> list[str]:
    return [row[0] for row in conn.execute("SELECT ref FROM merchant_notes")]


# --- processing -------------------------------------------------------------------------------


def test_a_capture_runs_the_hook_and_commits_it_with_the_claim(shop, served):
    delivery = capture()
    response = post(served(raw_hooks()), delivery)
    assert response.status_code == 200
    assert response.json() == {
        "status": "processed",
        "event_id": delivery.headers["x-razorpay-event-id"],
        "order_id": None,
    }
    assert order_rows(shop) == [("order_flask1", "pay_flask0000001")] and claimed(shop) == 1


def test_an_orm_write_through_session_for_commits_with_the_claim(shop, served):
    assert post(served(orm_hooks()), capture()).json()["status"] == "processed"
    assert note_refs(shop) == ["order_flask1"]


def test_the_session_shares_the_hooks_connection_and_its_transaction(shop, served):
    seen = []
    hooks = raw_hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def look(conn, event):
        session = payhooks.flask.session_for(conn)
        count = session.scalar(text("SELECT count(*) FROM merchant_orders"))
        seen.append((session.connection().connection.driver_connection is conn, count))

    post(served(hooks), capture())
    assert seen == [(True, 1)]  # the first hook's uncommitted row, seen through the session


def test_a_second_copy_is_answered_duplicate_and_changes_nothing(shop, served):
    base, delivery = served(raw_hooks()), capture()
    answers = [post(base, delivery).json()["status"] for _ in range(2)]
    assert answers == ["processed", "duplicate"] and len(order_rows(shop)) == 1


def test_a_hook_returning_applied_answers_with_its_order_id(shop, served):
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def placed(conn, event):
        return Applied(outcome=Outcome.PROCESSED, order_id="merchant-order-7")

    assert post(served(hooks), capture()).json()["order_id"] == "merchant-order-7"


def test_a_sessionmaker_is_taken_in_place_of_the_engine(shop, served, engine):
    base = served(orm_hooks(), engine=None, session_factory=sessionmaker(bind=engine))
    assert post(base, capture()).json()["status"] == "processed"
    assert note_refs(shop) == ["order_flask1"]


# --- nothing half-done ------------------------------------------------------------------------


def test_a_hook_that_raises_answers_500_and_leaves_nothing(shop, served):
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def writes_then_fails(conn, event):
        conn.execute("INSERT INTO merchant_orders VALUES ('half-done', null)")
        payhooks.flask.session_for(conn).add(Note(ref="half-done"))
        raise RuntimeError("the merchant's code failed")

    assert post(served(hooks), capture()).status_code == 500
    assert (order_rows(shop), note_refs(shop), claimed(shop)) == ([], [], 0)


def ending(end: Callable[[object], None]) -> Hooks:
    """A hook that writes through its session, then ends the transaction as told."""
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def note_then_end(conn, event):
        payhooks.flask.session_for(conn).add(Note(ref=event.merchant_ref))
        end(conn)

    return hooks


def swallowed(end: Callable[[object], None]) -> Callable[[object], None]:
    def run(conn: object) -> None:
        with contextlib.suppress(Exception):  # a hook that carries on whatever it was told
            end(conn)

    return run


ENDINGS = {
    "session.commit()": lambda conn: payhooks.flask.session_for(conn).commit(),
    "session.rollback()": lambda conn: payhooks.flask.session_for(conn).rollback(),
    "conn.commit()": lambda conn: conn.commit(),
    "conn.rollback()": lambda conn: conn.rollback(),
    "session.connection().commit()": lambda conn: (
        payhooks.flask.session_for(conn).connection().commit()
    ),
    "session.connection().rollback()": lambda conn: (
        payhooks.flask.session_for(conn).connection().rollback()
    ),
}


@pytest.mark.parametrize("call", [*ENDINGS, *(f"{call} caught" for call in ENDINGS)])
def test_a_hook_that_ends_the_claims_transaction_is_refused_500_and_leaves_nothing(
    shop, served, call
):
    """Refused even when the hook catches the error and carries on (docs/flask.md, §6)."""
    named = call.removesuffix(" caught")
    end = swallowed(ENDINGS[named]) if call.endswith("caught") else ENDINGS[named]
    response = post(served(ending(end)), capture())
    assert (response.status_code, response.json()["error"]) == (500, "handler_committed")
    assert "commit()" in response.json()["detail"] or "rollback()" in response.json()["detail"]
    assert (note_refs(shop), claimed(shop)) == ([], 0)


def committing_as_sql(how: str) -> Hooks:
    """A hook that sends ``COMMIT`` as SQL (past every commit() guard), then writes, or not."""
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def commit_then_write(conn, event):
        session = payhooks.flask.session_for(conn)
        if how.startswith("session"):
            session.execute(text("COMMIT"))
        else:
            conn.execute("COMMIT")
        if how.endswith("then write"):
            session.add(Note(ref=event.merchant_ref))
            session.flush()

    return hooks


@pytest.mark.parametrize(
    "how", ["session COMMIT then write", "conn COMMIT then write", "session COMMIT", "conn COMMIT"]
)
def test_a_hook_that_commits_as_sql_is_refused_500_and_the_retry_is_applied(shop, served, how):
    delivery = capture()
    response = post(served(committing_as_sql(how)), delivery)
    assert (response.status_code, response.json()["error"]) == (500, "handler_committed")
    assert claimed(shop) == 0  # the claim it committed is undone: not final
    retry = post(served(orm_hooks()), delivery)
    assert (retry.status_code, retry.json()["status"]) == (200, "processed")
    assert claimed(shop) == 1


def test_a_savepoint_of_the_hooks_own_may_commit_and_roll_back(shop, served):
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def kept_and_undone(conn, event):
        session = payhooks.flask.session_for(conn)
        with session.begin_nested():
            session.add(Note(ref="kept"))
        undone = session.begin_nested()
        session.add(Note(ref="undone"))
        undone.rollback()

    assert post(served(hooks), capture()).json()["status"] == "processed"
    assert note_refs(shop) == ["kept"]


def test_orm_writes_of_a_redelivery_that_parks_again_are_undone_with_it(shop, served):
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def nothing_to_apply_it_to(conn, event):
        payhooks.flask.session_for(conn).add(Note(ref=event.merchant_ref))
        return Applied(outcome=Outcome.PARKED)

    base, delivery = served(hooks), capture()
    answers = [post(base, delivery).json()["status"] for _ in range(2)]
    assert answers == ["parked", "parked"]
    assert note_refs(shop) == ["order_flask1"]  # the second note went with the savepoint


def test_a_commit_that_fails_answers_500_and_records_nothing(shop, served):
    shop.execute(
        "CREATE TABLE merchant_ledger (ref text,"
        " CONSTRAINT one_entry UNIQUE (ref) DEFERRABLE INITIALLY DEFERRED)"
    )
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def twice(conn, event):
        for _ in range(2):  # checked only at COMMIT
            conn.execute("INSERT INTO merchant_ledger VALUES (%s)", (event.merchant_ref,))

    assert post(served(hooks), capture()).status_code == 500
    assert claimed(shop) == 0


def test_a_commit_the_database_cannot_finish_answers_503(shop, served):
    shop.execute(
        """
        CREATE TABLE merchant_audit (ref text);
        CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'try again' USING ERRCODE = 'serialization_failure'; END $$;
        CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON merchant_audit
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();
        """
    )
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def audit(conn, event):
        conn.execute("INSERT INTO merchant_audit VALUES (%s)", (event.merchant_ref,))

    response = post(served(hooks), capture())
    assert response.status_code == 503 and response.json()["error"] == "database_unavailable"
    assert claimed(shop) == 0


def test_a_database_that_cannot_be_reached_answers_503(shop, served, database_url):
    away = engine_for(database_url + " dbname=payhooks_no_such_database")
    try:
        response = post(served(raw_hooks(), engine=away), capture())
    finally:
        away.dispose()
    assert response.status_code == 503
    assert response.json()["error"] == "database_unavailable"


# --- what is refused --------------------------------------------------------------------------


def test_a_forged_signature_answers_401_and_records_nothing(shop, served):
    delivery = capture()
    forged = {**delivery.headers, "x-razorpay-signature": "0" * 64}
    response = post(served(raw_hooks()), delivery, forged)
    assert response.status_code == 401 and response.json()["error"] == "signature_mismatch"
    assert claimed(shop) == 0


def test_an_unknown_gateway_answers_404(shop, served):
    response = loopback.post(served(raw_hooks()) + "/webhooks/stripe", content=b"{}")
    assert response.status_code == 404
    assert response.json()["error"] == "provider_not_configured"


def test_an_unknown_gateways_name_is_quoted_to_the_shared_limit(shop, served):
    response = loopback.post(served(raw_hooks()) + "/webhooks/" + "a" * 100, content=b"{}")
    assert response.json()["detail"] == f"provider {CLIPPED!r} is not configured"


def test_a_body_over_the_gateways_bound_answers_413(shop, served):
    size = ADAPTERS[Provider.PAYU].max_body_bytes + 1
    response = loopback.post(
        served(raw_hooks()) + "/webhooks/payu",
        content=b"a" * size,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"


def test_a_declared_length_over_the_bound_is_refused_before_the_body_is_read(shop, served):
    base = served(raw_hooks())
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /webhooks/razorpay HTTP/1.1\r\nHost: shop\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{"
        )
        status_line = sock.makefile("rb").readline()
    assert status_line.split()[1] == b"413"


def test_a_signature_header_sent_twice_with_different_values_answers_401(shop, served):
    delivery = capture()
    twice = [*delivery.headers.items(), ("x-razorpay-signature", "0" * 64)]
    response = post(served(raw_hooks()), delivery, twice)
    assert response.status_code == 401 and "more than once" in response.json()["detail"]


def test_a_signature_header_sent_twice_alike_is_accepted(shop, served):
    delivery = capture()
    twice = [
        *delivery.headers.items(),
        ("x-razorpay-signature", delivery.headers["x-razorpay-signature"]),
    ]
    assert post(served(raw_hooks()), delivery, twice).json()["status"] == "processed"


# --- the form trap ----------------------------------------------------------------------------


def test_a_payu_post_verifies_though_the_app_reads_request_form_first(shop, served):
    response = post(served(raw_hooks(), reads_form=True), payu_capture())
    assert response.status_code == 200 and response.json()["status"] == "processed"
    assert order_rows(shop) == [("txn_flask_1", "txn_flask_1")]


def test_a_body_over_the_bound_is_answered_and_noted_by_payhooks_though_the_app_reads_the_form(
    shop, served, database_url
):
    """The app's hook parses the form after payhooks refused the body: Werkzeug's 413 (an
    HTML page, nothing noted) must not stand in for payhooks' own."""
    size = ADAPTERS[Provider.PAYU].max_body_bytes * 2  # past what payhooks reads to tell
    response = loopback.post(
        served(raw_hooks(), reads_form=True) + "/webhooks/payu",
        content=b"a" * size,
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    assert [row[:3] for row in noted(database_url, 1)] == [("payu", 413, "payload_too_large")]


def test_a_page_of_the_apps_marked_to_read_first_gets_the_exact_body_though_a_hook_reads_the_form(
    shop, engine
):
    """PayU's surl/furl: a page of the merchant's own hands the post to ``payhooks.ingest``."""
    payu, hooks = ADAPTERS[Provider.PAYU], raw_hooks()
    app = flask_app(None, reads_form=True)

    @app.post("/payu/return")
    @payhooks.flask.reads_body_first(payu)
    def payu_return() -> str:
        headers = header_map(request.headers.items(), payu)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as sa_conn:
            conn = sa_conn.connection.driver_connection
            receipt = payhooks.ingest(conn, payu, request.get_data(), headers, hooks)
        return receipt.outcome.value

    delivery = payu_capture()
    with serving(app) as base:
        response = loopback.post(
            base + "/payu/return", content=delivery.body, headers=delivery.headers
        )
    assert (response.status_code, response.text) == (200, "processed")
    assert order_rows(shop) == [("txn_flask_1", "txn_flask_1")]


def test_a_renamed_registration_still_reads_the_body_first(shop, served):
    base = served(raw_hooks(), reads_form=True, name="gateways", url_prefix="/pay/hooks")
    delivery = payu_capture()
    response = loopback.post(
        base + "/pay/hooks/payu", content=delivery.body, headers=delivery.headers
    )
    assert response.json()["status"] == "processed"


# --- configuration ----------------------------------------------------------------------------


def test_an_engine_not_on_psycopg_is_refused():
    with pytest.raises(ValueError, match="psycopg"):
        payhooks.flask.blueprint(
            adapters=[], hooks=Hooks(), engine=sqlalchemy.create_engine("sqlite://")
        )


def test_an_unbound_sessionmaker_is_refused():
    with pytest.raises(ValueError, match="bound to an Engine"):
        payhooks.flask.blueprint(adapters=[], hooks=Hooks(), session_factory=sessionmaker())


def test_neither_engine_nor_sessionmaker_is_refused():
    with pytest.raises(ValueError, match="engine= or session_factory="):
        payhooks.flask.blueprint(adapters=[], hooks=Hooks())


def test_session_for_a_connection_no_hook_was_given_is_refused(conn):
    with pytest.raises(RuntimeError, match="a payhooks hook was given"):
        payhooks.flask.session_for(conn)

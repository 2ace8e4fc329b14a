"""``payhooks.flask.timeline_blueprint`` in a merchant's Flask app, served on a real socket and
asked over HTTP: a payment id answers its gateway order's story, the expectation and what each
delivery did, from the core's tables."""

from __future__ import annotations

import flask
import pytest
import sqlalchemy
from flask import Flask

import payhooks
import payhooks.flask
from payhooks import EventKind, Hooks
from tests import loopback
from tests.factories import ADAPTERS
from tests.flask.conftest import serving
from tests.flask.test_flask_blueprint import capture

OPERATOR = {"x-operator-token": "t0ken"}


def operator() -> bool:
    """The app's operators' auth, as a merchant passes it: here a token header."""
    return flask.request.headers.get("x-operator-token") == "t0ken"


PAYMENT, REF = "pay_flask0000001", "order_flask1"


def paying() -> Hooks:
    hooks = Hooks()

    @hooks.on(EventKind.PAYMENT_CAPTURED)
    def mark_paid(conn, event):
        return None  # applied: the merchant's order paid

    return hooks


def app_for(engine: sqlalchemy.Engine) -> Flask:
    app = Flask(__name__)
    app.register_blueprint(
        payhooks.flask.blueprint(adapters=ADAPTERS.values(), hooks=paying(), engine=engine)
    )
    app.register_blueprint(payhooks.flask.timeline_blueprint(engine=engine, allow=operator))
    return app


def test_a_payment_id_answers_its_orders_expectation_and_deliveries(conn, engine):
    payhooks.expect(conn, "razorpay", REF, 100, "INR", "F-1")
    delivery = capture()
    with serving(app_for(engine)) as base, loopback.Client(base_url=base) as client:
        answered = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        found = client.get("/payhooks/timeline", headers=OPERATOR, params={"q": PAYMENT})
    assert answered.status_code == 200 and found.status_code == 200
    [order] = found.json()["orders"]
    assert (order["matched"], order["gateway_order_id"]) == ("payment id", REF)
    assert (order["expected"]["amount_paise"], order["expected"]["reference"]) == (100, "F-1")
    [record] = order["records"]
    assert (record["payment_id"], record["outcome"]) == (PAYMENT, "processed")
    assert [p["by"] for p in order["payments"]] == ["webhook"]


def test_text_that_names_nothing_answers_no_orders(engine):
    with serving(app_for(engine)) as base, loopback.Client(base_url=base) as client:
        found = client.get("/payhooks/timeline", headers=OPERATOR, params={"q": "nothing_here"})
    assert found.json() == {"query": "nothing_here", "orders": []}


def test_a_caller_the_apps_auth_does_not_allow_is_refused_403_and_reads_nothing(conn, engine):
    payhooks.expect(conn, "razorpay", REF, 100, "INR", "F-1")
    with serving(app_for(engine)) as base, loopback.Client(base_url=base) as client:
        stranger = client.get("/payhooks/timeline", params={"q": "F-1"})
    assert stranger.status_code == 403 and stranger.json() == {"error": "forbidden"}


@pytest.mark.parametrize("q", ["\x00", "pay_\x00x", "\x01", "\x1b[31m", "\x7f", "\x85"])
def test_a_query_holding_a_control_character_is_refused_400(engine, q):
    with serving(app_for(engine)) as base, loopback.Client(base_url=base) as client:
        found = client.get("/payhooks/timeline", headers=OPERATOR, params={"q": q})
    assert found.status_code == 400
    assert found.json() == {"error": "the query holds a control character"}

"""Every request to the Flask blueprint is noted in the core's delivery log, a forged one as its
size, hash and 401, and shown by ``payhooks.flask.health_blueprint``; the answer never waits
for, nor depends on, the log's database."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import flask
import psycopg
import sqlalchemy
from flask import Flask

import payhooks.flask
from payhooks import Hooks
from tests import loopback
from tests.factories import ADAPTERS
from tests.fastapi.test_delivery_health import AWAY, lines_now, noted
from tests.flask.conftest import serving, sqlalchemy_url
from tests.flask.test_flask_blueprint import capture
from tests.wsgi_server import gunicorn_serving

ROOT = Path(__file__).resolve().parents[2]

OPERATOR = {"x-operator-token": "t0ken"}


def operator() -> bool:
    """The app's operators' auth, as a merchant passes it: here a token header."""
    return flask.request.headers.get("x-operator-token") == "t0ken"


def app_for(engine: sqlalchemy.Engine, **options: object) -> Flask:
    app = Flask(__name__)
    webhooks = payhooks.flask.blueprint(
        adapters=ADAPTERS.values(),
        hooks=Hooks(),
        engine=engine,
        **options,  # type: ignore[arg-type]
    )
    app.register_blueprint(webhooks)
    app.register_blueprint(payhooks.flask.health_blueprint(engine=engine, allow=operator))
    return app


def test_a_forged_and_a_good_delivery_are_noted_and_the_forged_one_shown(engine, database_url):
    delivery = capture()
    forged = {**delivery.headers, "x-razorpay-signature": "0" * 64}
    with serving(app_for(engine)) as base, loopback.Client(base_url=base) as client:
        good = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        for _ in range(5):
            refused = client.post(delivery.path, content=delivery.body, headers=forged)
        rows = noted(database_url, 6)
        shown = client.get("/payhooks/health", headers=OPERATOR).json()
    assert (good.status_code, refused.status_code) == (200, 401)
    sha = hashlib.sha256(delivery.body).hexdigest()
    assert rows[0][:4] == ("razorpay", 200, good.json()["status"], True) and rows[0][4]
    assert (
        rows[1:]
        == [("razorpay", 401, "signature_mismatch", False, None, len(delivery.body), sha)] * 5
    )
    razorpay = next(g for g in shown["gateways"] if g["provider"] == "razorpay")
    assert razorpay["last_hour"] == {"200": 1, "401": 5}
    assert shown["forged_signatures"] == ["razorpay"]


def test_the_answer_is_the_same_with_the_logs_database_away(engine):
    delivery = capture()
    with (
        serving(app_for(engine, delivery_log=AWAY)) as base,
        loopback.Client(base_url=base) as client,
    ):
        first = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
        again = client.post(delivery.path, content=delivery.body, headers=delivery.headers)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["status"] == "duplicate"


def test_a_gunicorn_workers_exit_writes_every_line_it_answered(database_url):
    """The log's thread is a daemon: without a close at exit, the lines of its last half second
    would go with the process."""
    url = sqlalchemy_url(database_url).render_as_string(hide_password=False)
    env = {**os.environ, "DATABASE_URL": url}
    delivery = capture()
    forged = {**delivery.headers, "x-razorpay-signature": "0" * 64}
    served = gunicorn_serving("tests.flask.logged_app:app", cwd=ROOT, env=env)
    with served as base, loopback.Client(base_url=base) as client:
        for _ in range(5):
            response = client.post(delivery.path, content=delivery.body, headers=forged)
            assert response.status_code == 401
    assert lines_now(database_url) == 5


def test_a_request_for_an_unknown_gateway_is_noted_without_the_name_it_came_under(
    engine, database_url
):
    with serving(app_for(engine)) as base, loopback.Client(base_url=base) as client:
        answered = client.post("/webhooks/forged-name-x1", content=b"{}")
        noted(database_url, 1)
    assert answered.status_code == 404 and "forged-name-x1" in answered.json()["detail"]
    with psycopg.connect(database_url) as conn:
        [(provider, outcome, detail)] = conn.execute(
            "SELECT provider, outcome, detail FROM payhooks_deliveries"
        ).fetchall()
    assert (provider, outcome) == ("unknown", "provider_not_configured")
    assert detail and "forged-name-x1" not in detail

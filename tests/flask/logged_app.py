"""A Flask app holding only payhooks' webhook blueprint and its delivery log, as gunicorn
imports it (``tests.flask.logged_app:app``), on the database ``DATABASE_URL`` names."""

import os

import sqlalchemy
from flask import Flask

import payhooks.flask
from payhooks import Hooks, Razorpay

app = Flask(__name__)
app.register_blueprint(
    payhooks.flask.blueprint(
        adapters=[Razorpay(secrets=("whsec_logged_app",))],
        hooks=Hooks(),
        engine=sqlalchemy.create_engine(os.environ["DATABASE_URL"]),
    )
)

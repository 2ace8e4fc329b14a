"""A shop on Flask and SQLAlchemy whose orders come from payment webhooks, made exactly-once by
payhooks.

Its one table is its own: ``orders``, one row per merchant reference (the order id it gave the
gateway at checkout), written through its SQLAlchemy session in the claim's transaction.
payhooks stops a re-sent delivery; the unique reference stops two *different* deliveries of one
payment (Razorpay's ``payment.captured`` and ``order.paid``).

Run it from the repository's root::

    DATABASE_URL=postgresql://localhost/shop RAZORPAY_WEBHOOK_SECRETS=whsec_... \\
        python -m examples.flask_shop
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy
from flask import Flask, abort, request
from sqlalchemy import BigInteger, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

import payhooks
import payhooks.flask
from payhooks import Adapter, Applied, Cashfree, Event, EventKind, Handler, Outcome, PayU, Razorpay
from payhooks.providers import read_secrets


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    merchant_ref: Mapped[str] = mapped_column(primary_key=True)
    provider: Mapped[str]
    payment_id: Mapped[str]
    amount_paise: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str]
    paid_at: Mapped[datetime] = mapped_column(server_default=func.now())


hooks = payhooks.Hooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
def place_order(conn: Any, event: Event) -> Applied | None:
    """Runs inside the claim's transaction: the order and the claim commit together.

    ``ON CONFLICT DO NOTHING`` rather than ``session.add``: ``order.paid`` after
    ``payment.captured`` is another delivery of the same payment, and must find the order
    placed, not fail on it."""
    if event.merchant_ref is None:
        return Applied(outcome=Outcome.IGNORED)  # a payment not made through our checkout
    placed = insert(Order).values(
        merchant_ref=event.merchant_ref,
        provider=event.provider.value,
        payment_id=event.payment_id,
        amount_paise=event.amount_paise,
        currency=event.currency or "INR",
    )
    payhooks.flask.session_for(conn).execute(placed.on_conflict_do_nothing())
    return Applied(outcome=Outcome.PROCESSED, order_id=event.merchant_ref)


def refuse_bots() -> None:
    """The site's forms carry a hidden ``website`` field people leave empty and bots fill in.

    It reads ``request.form`` on every POST, PayU's form-encoded webhooks included, before any
    view: payhooks.flask has read the exact bytes by then."""
    if request.method == "POST" and request.form.get("website"):
        abort(400)


def create_app(
    engine: sqlalchemy.Engine, adapters: Sequence[Adapter], handler: Handler = hooks
) -> Flask:
    app = Flask("flask_shop")
    app.before_request(refuse_bots)
    app.register_blueprint(
        payhooks.flask.blueprint(adapters=adapters, hooks=handler, engine=engine)
    )
    sessions = sessionmaker(bind=engine)

    @app.get("/orders/<merchant_ref>")
    def show_order(merchant_ref: str) -> dict[str, Any]:
        with sessions() as session:
            order = session.get(Order, merchant_ref)
            if order is None:
                abort(404)
            return {
                "merchant_ref": order.merchant_ref,
                "provider": order.provider,
                "payment_id": order.payment_id,
                "amount_paise": order.amount_paise,
                "currency": order.currency,
            }

    return app


def migrate(engine: sqlalchemy.Engine) -> None:
    """payhooks' table, then the shop's: once per deploy, before serving."""
    with engine.connect() as conn:
        payhooks.migrate(conn.connection.driver_connection)
    Base.metadata.create_all(engine)


def adapters_from(env: Mapping[str, str]) -> list[Adapter]:
    """The gateways whose secrets are set. A variable holds one secret exactly as written,
    or several (while one is rotated out) as a JSON array: '["whsec_new", "whsec_old"]'."""
    found: list[Adapter] = []
    if env.get("RAZORPAY_WEBHOOK_SECRETS"):
        found.append(Razorpay(secrets=_listed(env["RAZORPAY_WEBHOOK_SECRETS"])))
    if env.get("CASHFREE_CLIENT_SECRETS"):
        found.append(Cashfree(secrets=_listed(env["CASHFREE_CLIENT_SECRETS"])))
    if env.get("PAYU_MERCHANT_KEY") and env.get("PAYU_SALTS"):
        found.append(PayU(merchant_key=env["PAYU_MERCHANT_KEY"], salts=_listed(env["PAYU_SALTS"])))
    return found


def _listed(value: str) -> tuple[str, ...]:
    return read_secrets(value)  # never split on commas: a secret may hold one


def engine_from(url: str) -> sqlalchemy.Engine:
    """``postgresql://`` would pick psycopg2; payhooks runs on psycopg (3)."""
    return sqlalchemy.create_engine(sqlalchemy.make_url(url).set(drivername="postgresql+psycopg"))


def main() -> None:
    engine = engine_from(os.environ["DATABASE_URL"])
    migrate(engine)
    app = create_app(engine, adapters_from(os.environ))
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)

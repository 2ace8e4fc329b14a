"""A shop on Flask and SQLAlchemy whose orders are paid by payment webhooks, made exactly-once
by payhooks.

Its one table is its own: ``orders``, written at checkout (``POST /orders``) through the shop's
SQLAlchemy session with what the order costs, under the reference the shop gives the gateway
(Razorpay order id, Cashfree order id, PayU txnid, PhonePe merchantOrderId, Juspay order_id).
In the same transaction the checkout tells payhooks what the order must be paid
(``payhooks.expect`` on ``payhooks.flask.connection_of``), so a capture of another amount or
currency is parked by payhooks and never reaches ``mark_paid``, and
``payhooks reconcile --hooks examples.flask_shop.app:hooks`` can ask the gateway about an order
whose webhook never came. A capture pays the order in the claim's transaction, only once:
payhooks stops a re-sent delivery; the order's status stops two *different* deliveries of one
payment (Razorpay's ``payment.captured`` and ``order.paid``) and a second payment from
replacing the first.

``POST /orders`` takes ``{merchant_ref, amount_paise, currency}`` (and ``gateway``: ``razorpay``,
the default, ``cashfree``, ``payu``, ``phonepe`` or ``juspay``) and answers 201 with the order,
pending; 400 for a body that is not that, 409 for a reference already used.
``GET /orders/<merchant_ref>`` shows the order: ``status`` (``pending``, ``paid``),
``payment_id``, ``paid_at``. A capture for another amount or currency is answered ``parked``
and kept in ``payhooks_amount_mismatches`` with both amounts; a second payment for a paid order
is answered ``ignored`` and logged for a person to refund; a capture for a reference no
checkout wrote is ``parked`` until it is replayed.

PhonePe's and Juspay's callbacks carry only the ``username:password`` set in their dashboards,
no signature over what they say: each is answered ``confirming`` and pays nothing by itself.
``payhooks confirm --hooks examples.flask_shop.app:hooks``, run beside the app, asks the
gateway's status API every 2 s and hands ``mark_paid`` what the API reports, once; a forged
callback under the right credential is refuted and changes nothing.

Run it from the repository's root::

    DATABASE_URL=postgresql://localhost/shop RAZORPAY_WEBHOOK_SECRETS=whsec_... \\
        python -m examples.flask_shop
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy
from flask import Flask, abort, request
from sqlalchemy import BigInteger, CheckConstraint, func
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

import payhooks
import payhooks.flask
from payhooks import Adapter, Applied, Cashfree, Event, EventKind, Handler, Outcome, PayU, Razorpay
from payhooks.gateways import read_secrets
from payhooks.gateways.juspay import Juspay
from payhooks.gateways.phonepe import PhonePe

log = logging.getLogger("flask_shop")

# What every gateway accepts as an order id: letters, digits, "_" and "-".
REFERENCE = re.compile(r"[A-Za-z0-9_-]{1,64}")
CURRENCY = re.compile(r"[A-Z]{3}")
MAX_PAISE = 2**63 - 1  # the column's bigint
FIELDS = {"merchant_ref", "amount_paise", "currency"}
GATEWAYS = ("razorpay", "cashfree", "payu", "phonepe", "juspay")


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    __table_args__ = (
        CheckConstraint("amount_paise > 0", name="orders_amount_positive"),
        CheckConstraint("status IN ('pending', 'paid')", name="orders_status_known"),
    )

    merchant_ref: Mapped[str] = mapped_column(primary_key=True)
    amount_paise: Mapped[int] = mapped_column(BigInteger)
    currency: Mapped[str]
    status: Mapped[str] = mapped_column(server_default="pending")
    provider: Mapped[str | None]
    payment_id: Mapped[str | None]
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    paid_at: Mapped[datetime | None]


LOCK_ORDER = """
SELECT amount_paise, currency, status, payment_id FROM orders WHERE merchant_ref = %s FOR UPDATE
"""
MARK_PAID = """
UPDATE orders SET status = 'paid', provider = %s, payment_id = %s, paid_at = now()
WHERE merchant_ref = %s AND status = 'pending'
"""

hooks = payhooks.Hooks()


@hooks.on(EventKind.PAYMENT_CAPTURED)
def mark_paid(conn: psycopg.Connection[Any], event: Event) -> Applied | None:
    """Runs inside the claim's transaction: the order's change and the claim commit together.

    Written on ``conn``, the claim's psycopg connection, rather than through
    ``payhooks.flask.session_for(conn)``: ``payhooks reconcile`` and ``replay`` (from
    ``payhooks.intake.ingest``) run these hooks outside a request, where only ``conn`` exists.
    The row lock makes ``payment.captured`` and ``order.paid`` of one payment, or two payments,
    arriving together take turns; the second then finds the order paid."""
    if event.merchant_ref is None:
        return Applied(outcome=Outcome.IGNORED)  # a payment not made through our checkout
    order = conn.execute(LOCK_ORDER, (event.merchant_ref,)).fetchone()
    if order is None:
        return Applied(outcome=Outcome.PARKED)  # no checkout (yet): kept, to be replayed
    amount_paise, currency, status, payment_id = order
    if (event.amount_paise, event.currency) != (amount_paise, currency):
        # Captured, but not what the order costs (payhooks parks these for the orders it was
        # told of at checkout; this catches the rest): never mark it paid. The order stays
        # pending and a person decides: refund the payment, or collect the difference.
        _flag("payment_amount_mismatch", event)
        return Applied(outcome=Outcome.IGNORED, order_id=event.merchant_ref)
    if status == "paid" and payment_id != event.payment_id:
        # Paid already, by another payment: this one is the customer's money twice. The order
        # keeps its first payment; a person refunds the second.
        _flag("payment_for_paid_order", event)
        return Applied(outcome=Outcome.IGNORED, order_id=event.merchant_ref)
    conn.execute(MARK_PAID, (event.provider.value, event.payment_id, event.merchant_ref))
    return Applied(outcome=Outcome.PROCESSED, order_id=event.merchant_ref)


def _flag(name: str, event: Event) -> None:
    log.warning(
        name,
        extra={
            "order": event.merchant_ref,
            "payment_id": event.payment_id,
            "paid": event.amount_paise,
            "currency": event.currency,
        },
    )


def refuse_bots() -> None:
    """The site's forms carry a hidden ``website`` field people leave empty and bots fill in.

    It reads ``request.form`` on every POST, PayU's form-encoded webhooks included, before any
    view: payhooks.flask has read the exact bytes by then."""
    if request.method == "POST" and request.form.get("website"):
        abort(400)


def checkout_from(body: object) -> tuple[str, int, str, str] | None:
    """The checkout page's JSON, or None when it is not exactly ``{merchant_ref, amount_paise,
    currency}`` (and ``gateway``, Razorpay unless said) with a gateway-safe reference, whole
    positive paise (never a float) and an ISO currency code."""
    if not isinstance(body, dict) or not FIELDS <= body.keys() <= {*FIELDS, "gateway"}:
        return None
    ref, amount, currency = body["merchant_ref"], body["amount_paise"], body["currency"]
    gateway = body.get("gateway", "razorpay")
    if gateway not in GATEWAYS:
        return None
    if not (isinstance(ref, str) and REFERENCE.fullmatch(ref)):
        return None
    if type(amount) is not int or not 0 < amount <= MAX_PAISE:
        return None
    if not (isinstance(currency, str) and CURRENCY.fullmatch(currency)):
        return None
    return ref, amount, currency, gateway


def shown(order: Order) -> dict[str, Any]:
    return {
        "merchant_ref": order.merchant_ref,
        "amount_paise": order.amount_paise,
        "currency": order.currency,
        "status": order.status,
        "provider": order.provider,
        "payment_id": order.payment_id,
        "created_at": order.created_at.isoformat(),
        "paid_at": order.paid_at.isoformat() if order.paid_at else None,
    }


def create_app(
    engine: sqlalchemy.Engine, adapters: Sequence[Adapter], handler: Handler = hooks
) -> Flask:
    app = Flask("flask_shop")
    app.before_request(refuse_bots)
    app.register_blueprint(
        payhooks.flask.blueprint(adapters=adapters, hooks=handler, engine=engine)
    )
    sessions = sessionmaker(bind=engine)

    @app.post("/orders")
    def checkout() -> tuple[dict[str, Any], int]:
        """Checkout: the order, pending, with what it costs, before the customer pays."""
        placed = checkout_from(request.get_json(silent=True))
        if placed is None:
            return {"error": "bad_order", "detail": CHECKOUT_HELP}, 400
        ref, amount, currency, gateway = placed
        with sessions.begin() as session:
            created = session.scalar(
                insert(Order)
                .values(merchant_ref=ref, amount_paise=amount, currency=currency)
                .on_conflict_do_nothing()
                .returning(Order.merchant_ref)
            )
            if created is not None:
                conn = payhooks.flask.connection_of(session)
                payhooks.expect(conn, gateway, ref, amount, currency)
        if created is None:
            return {
                "error": "order_exists",
                "detail": "an order with this merchant_ref exists",
            }, 409
        return show(ref), 201

    @app.get("/orders/<merchant_ref>")
    def show_order(merchant_ref: str) -> dict[str, Any]:
        return show(merchant_ref)

    def show(merchant_ref: str) -> dict[str, Any]:
        with sessions() as session:
            order = session.get(Order, merchant_ref)
            if order is None:
                abort(404)
            return shown(order)

    return app


CHECKOUT_HELP = (
    "a JSON object {merchant_ref, amount_paise, currency}: merchant_ref 1 to 64 letters, digits,"
    " '_' or '-'; amount_paise a positive integer; currency three capital letters (INR);"
    " optionally gateway: razorpay (the default), cashfree, payu, phonepe or juspay"
)


def migrate(engine: sqlalchemy.Engine) -> None:
    """payhooks' table, then the shop's: once per deploy, before serving."""
    with engine.connect() as conn:
        payhooks.migrate(conn.connection.driver_connection)
    Base.metadata.create_all(engine)


def adapters_from(env: Mapping[str, str]) -> list[Adapter]:
    """The gateways whose secrets are set. A variable holds one secret exactly as written,
    or several (while one is rotated out) as a JSON array: '["whsec_new", "whsec_old"]'.
    What payhooks refuses in one (an array that is not JSON, a credential without its ``:``)
    is a ``ValueError`` naming the variable, as the app starts."""
    found: list[Adapter] = []
    if env.get("RAZORPAY_WEBHOOK_SECRETS"):
        found.append(_read(env, "RAZORPAY_WEBHOOK_SECRETS", lambda given: Razorpay(secrets=given)))
    if env.get("CASHFREE_CLIENT_SECRETS"):
        found.append(_read(env, "CASHFREE_CLIENT_SECRETS", lambda given: Cashfree(secrets=given)))
    if env.get("PAYU_MERCHANT_KEY") and env.get("PAYU_SALTS"):
        key = env["PAYU_MERCHANT_KEY"]
        found.append(_read(env, "PAYU_SALTS", lambda given: PayU(merchant_key=key, salts=given)))
    # PhonePe and Juspay callbacks carry only the username:password set in their dashboards:
    # each takes effect when the gateway's status API confirms it (`payhooks confirm`).
    if env.get("PHONEPE_WEBHOOK_CREDENTIALS"):
        found.append(
            _read(env, "PHONEPE_WEBHOOK_CREDENTIALS", lambda given: PhonePe(credentials=given))
        )
    if env.get("JUSPAY_WEBHOOK_CREDENTIALS"):
        found.append(
            _read(env, "JUSPAY_WEBHOOK_CREDENTIALS", lambda given: Juspay(credentials=given))
        )
    return found


def _read(
    env: Mapping[str, str], variable: str, adapter: Callable[[tuple[str, ...]], Adapter]
) -> Adapter:
    """``adapter`` given what ``variable`` holds, never split on commas (a secret may hold
    one); what payhooks refuses in it is said naming the variable, never quoting it."""
    try:
        return adapter(read_secrets(env[variable]))
    except ValueError as exc:
        raise ValueError(f"{variable} is refused: {exc}") from None


def engine_from(url: str) -> sqlalchemy.Engine:
    """``postgresql://`` would pick psycopg2; payhooks runs on psycopg (3)."""
    return sqlalchemy.create_engine(sqlalchemy.make_url(url).set(drivername="postgresql+psycopg"))


def main() -> None:
    try:
        adapters = adapters_from(os.environ)
    except ValueError as exc:  # one line naming the variable, before the database is touched
        raise SystemExit(f"flask_shop: {exc}") from None
    engine = engine_from(os.environ["DATABASE_URL"])
    migrate(engine)
    app = create_app(engine, adapters)
    app.run(host="127.0.0.1", port=int(os.environ.get("PORT", "5000")), threaded=True)

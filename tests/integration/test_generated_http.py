"""Generated delivery schedules and fuzzed bodies against the real service over HTTP."""

from __future__ import annotations

import json
from decimal import Decimal

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from payhooks.events import Provider
from payhooks.gateways import cashfree, payu, razorpay
from payhooks.sim.gateway import Delivery
from tests import loopback
from tests.conftest import released_together
from tests.factories import GATEWAY, KEYS, Purchase, purchase

SLOW = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def story(buy: Purchase) -> list[Delivery]:
    """Every delivery a gateway might send for one cart, in no particular order."""
    second = buy.payment_id[:-1] + "z"
    if buy.provider is Provider.RAZORPAY:
        return [
            buy.delivery("failed", payment_id=buy.payment_id[:-1] + "f"),
            buy.delivery("authorized"),
            buy.captured(),
            buy.delivery("captured", event="order.paid"),
            buy.captured(payment_id=second),
            GATEWAY.razorpay(
                "refund.processed",
                payment_id=second,
                order_id=buy.reference,
                amount_paise=buy.amount_paise,
                refund_id="rfnd_" + second,
            ),
        ]
    amount = Decimal(buy.amount_paise) / 100
    return [
        buy.delivery("failed", payment_id=buy.payment_id[:-1] + "7"),
        buy.captured(),
        GATEWAY.cashfree(
            "PAYMENT_SUCCESS_WEBHOOK",
            order_id=buy.reference,
            cf_payment_id=buy.payment_id,
            order_amount=amount,
            version="2022-09-01",
        ),
    ]


def send_together(base: str, deliveries: list[Delivery]) -> list[httpx.Response]:
    """A group of deliveries at the same moment (twins, two URLs, racing event types)."""
    return released_together(
        deliveries,
        lambda _: loopback.Client(base_url=base, timeout=30),
        lambda client, d: client.post(d.path, content=d.body, headers=d.headers),
    )


group = st.lists(st.integers(0, 8), min_size=1, max_size=4)


@SLOW
@given(schedule=st.lists(group, min_size=1, max_size=8))
def test_generated_schedules_keep_every_invariant(service, conn, schedule):
    buys = [purchase(conn, Provider.RAZORPAY, stock=1), purchase(conn, Provider.CASHFREE)]
    pool = story(buys[0]) + story(buys[1])
    sent: set[int] = set()
    for indices in schedule:
        answers = send_together(service.base_url, [pool[i] for i in indices])
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        sent.update(indices)
    carts = [b.cart_id for b in buys]
    assert_one_order_per_paid_cart(conn, carts)
    assert_stock_never_negative_and_matches_ledger(conn, [b.sku for b in buys])
    assert_captured_payments_accounted_for(conn, carts)


def assert_one_order_per_paid_cart(conn, carts):
    for status, orders in conn.execute(
        "SELECT c.status, count(o.id) FROM carts c LEFT JOIN orders o ON o.cart_id = c.id "
        "WHERE c.id = ANY(%s) GROUP BY c.id, c.status",
        (carts,),
    ):
        assert orders == (1 if status == "paid" else 0)


def assert_stock_never_negative_and_matches_ledger(conn, skus):
    for stock, ledger in conn.execute(
        "SELECT p.stock, (SELECT sum(delta) FROM inventory_movements m WHERE m.sku = p.sku) "
        "FROM products p WHERE sku = ANY(%s)",
        (skus,),
    ):
        assert stock == ledger and stock >= 0


def assert_captured_payments_accounted_for(conn, carts):
    lost = conn.execute(
        "SELECT p.payment_id FROM payments p LEFT JOIN orders o "
        "ON o.cart_id = p.cart_id AND o.payment_id = p.payment_id "
        "WHERE p.cart_id = ANY(%s) AND p.status = 'captured' AND o.id IS NULL "
        "AND NOT p.needs_refund",
        (carts,),
    ).fetchall()
    assert lost == []


# --- fuzzing: nothing a client sends yields a 500 or a traceback ---------------------------

PATHS = st.sampled_from(["/webhooks/razorpay", "/webhooks/cashfree", "/webhooks/payu"])
HEADER_NAMES = st.sampled_from(
    [
        "x-razorpay-signature",
        "x-razorpay-event-id",
        "x-webhook-signature",
        "x-webhook-timestamp",
        "x-idempotency-key",
        "content-type",
    ]
)
# What an HTTP client can send at all: printable, no leading or trailing blank.
header_values = st.from_regex(r"[!-~]([ -~]{0,78}[!-~])?", fullmatch=True)

VOCABULARY = [
    "event",
    "payload",
    "payment",
    "entity",
    "id",
    "amount",
    "order_id",
    "currency",
    "refund",
    "payment_id",
    "data",
    "order",
    "type",
    "cf_payment_id",
    "order_amount",
    "order_currency",
    "payment_status",
    "payment_amount",
    "cf_refund_id",
    "refund_status",
    "refund_amount",
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=20)
    | st.sampled_from(
        [
            "payment.captured",
            "order.paid",
            "refund.processed",
            "PAYMENT_SUCCESS_WEBHOOK",
            "REFUND_STATUS_WEBHOOK",
            "SUCCESS",
            "INR",
            "1e400",
            "-0",
        ]
    )
)
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(VOCABULARY), inner, max_size=5)
    ),
    max_leaves=25,
)


def assert_clean(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text


@SLOW
@given(
    path=PATHS,
    body=st.binary(max_size=2000),
    headers=st.dictionaries(HEADER_NAMES, header_values, max_size=4),
)
def test_arbitrary_bytes_and_headers_never_cause_a_server_error(service, path, body, headers):
    with loopback.Client(base_url=service.base_url) as client:
        assert_clean(client.post(path, content=body, headers=headers))


@SLOW
@given(document=documents)
def test_correctly_signed_arbitrary_json_is_answered_without_a_server_error(service, document):
    body = json.dumps(document).encode()
    stamp = "1746427759733"
    with loopback.Client(base_url=service.base_url) as client:
        assert_clean(
            client.post(
                "/webhooks/razorpay",
                content=body,
                headers={"x-razorpay-signature": razorpay.sign(body, KEYS.razorpay)},
            )
        )
        assert_clean(
            client.post(
                "/webhooks/cashfree",
                content=body,
                headers={
                    "x-webhook-timestamp": stamp,
                    "x-webhook-signature": cashfree.sign(body, stamp, KEYS.cashfree),
                },
            )
        )


form_fields = st.dictionaries(
    st.sampled_from(
        [
            "mihpayid",
            "status",
            "txnid",
            "amount",
            "email",
            "firstname",
            "productinfo",
            "udf1",
            "additionalCharges",
        ]
    ),
    st.text(max_size=12),
    max_size=8,
)


@SLOW
@given(fields=form_fields)
def test_correctly_hashed_arbitrary_payu_posts_are_answered_without_a_server_error(service, fields):
    post = {**fields, "key": KEYS.payu_key}
    post["hash"] = payu.reverse_hash(post, KEYS.payu_salt)
    with loopback.Client(base_url=service.base_url) as client:
        assert_clean(client.post("/webhooks/payu", content=payu.encode(post)))

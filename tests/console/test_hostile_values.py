"""Every console page, list, export and shop API route answers a value it cannot take with a
4xx, never a 500: times at the calendar's edges (year 1, year 9999, an offset that carries
them past it, year 10000), control characters and NUL, a lone surrogate, numbers past any
column. A table of hostile values sent to every route's every parameter over real HTTP, as an
operator and as a stranger."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

from tests import loopback
from tests.console.conftest import Console, csrf_of

# Times a form or a hand-made link may carry, at and past the calendar's edges.
EDGE_TIMES = [
    "0000-01-01",
    "0001-01-01",
    "0001-01-01T00:00",
    "0001-01-01T00:00+14:00",
    "0001-01-02T00:00",
    "9999-12-31",
    "9999-12-31T23:59",
    "9999-12-31T23:59-14:00",
    "9999-12-25T00:00",
    "10000-01-01",
]
TEXT = ["\x00", "a\x00b", "\x01", "\x1b[31m", "\x7f", "\x85", "\ud800", "%", "|", " ", "x" * 5000]
NUMBERS = ["-1", "0", "99999999999999999999999", "1e400", "nan", "0001-01-01T00:00+00:00|k"]
HOSTILE = EDGE_TIMES + TEXT + NUMBERS

# Each GET route and the query parameters it reads.
ROUTES = {
    "/console/": ["notice", "sig"],
    "/console/search": ["q"],
    "/console/actions": ["operator", "before"],
    "/console/parked": ["notice", "provider", "event_id", "sig"],
    "/console/dead": ["notice", "sig"],
    "/console/carts": ["email", "before"],
    "/console/deliveries": ["gateway", "outcome", "amount", "confirmation", "from", "to", "before"],
    "/console/deliveries.csv": ["gateway", "outcome", "amount", "confirmation", "from", "to"],
    "/console/payments": ["gateway", "status", "amount", "refund", "from", "to", "before"],
    "/console/payments.csv": ["gateway", "status", "amount", "refund", "from", "to", "before"],
    "/console/parked/bulk": ["gateway", "from", "to", "replayed", "applied", "waiting", "sig"],
    "/api/orders": ["cart_id"],
}
# Both ends of a window at an edge: each alone can be taken, the window they make cannot.
WINDOWS = [
    ("", "0001-01-01T00:00"),
    ("0001-01-01T00:00", "0001-01-01T00:01"),
    ("9999-12-31T23:58", "9999-12-31T23:59"),
    ("9999-12-31T23:59", ""),
]
PATHS = ["/console/carts/{v}", "/console/references/razorpay/{v}",
         "/console/deliveries/razorpay/{v}", "/console/orders/razorpay/{v}",
         "/console/references/{v}/x", "/api/orders/{v}", "/api/carts/{v}",
         "/api/products/{v}", "/api/payments/razorpay/{v}", "/api/orders/{v}/refunds"]  # fmt: skip
ENCODED = ["%00", "a%01", "%ED%A0%80", "%FF", "%7F"]


def answers(client: httpx.Client, route: str, **params: str) -> int:
    """The status, or 599 when the server closed the connection instead (its 500)."""
    query = "&".join(f"{quote(k)}={quote(v, safe='', errors='surrogatepass')}"
                     for k, v in params.items())  # fmt: skip
    try:
        return client.get(f"{route}?{query}").status_code
    except httpx.TransportError:
        return 599


def clients(console: Console) -> dict[str, httpx.Client]:
    api = loopback.Client(base_url=console.base_url, timeout=20,
                       headers={"authorization": "Bearer api-token"})  # fmt: skip
    return {"operator": console.logged_in(), "stranger": console.client(), "api": api}


def client_for(route: str, made: dict[str, httpx.Client], who: str) -> httpx.Client:
    return made["api"] if route.startswith("/api") and who == "operator" else made[who]


@pytest.mark.parametrize("who", ["operator", "stranger"])
@pytest.mark.parametrize("route", list(ROUTES))
def test_every_parameter_of_every_route_answers_a_hostile_value_below_500(console, route, who):
    made = clients(console)
    failed = [
        (name, value[:30], status)
        for name in ROUTES[route]
        for value in HOSTILE
        if (status := answers(client_for(route, made, who), route, **{name: value})) >= 500
    ]
    assert failed == []


@pytest.mark.parametrize("who", ["operator", "stranger"])
@pytest.mark.parametrize("route", [r for r, names in ROUTES.items() if "from" in names])
def test_a_window_at_the_calendars_edge_answers_400(console, route, who):
    made = clients(console)
    statuses = [answers(made[who], route, **{"from": a, "to": b}) for a, b in WINDOWS]
    expected = 400 if who == "operator" else 303
    assert statuses == [expected] * len(WINDOWS)


@pytest.mark.parametrize("who", ["operator", "stranger"])
def test_every_address_answers_a_hostile_segment_below_500(console, who):
    made = clients(console)
    failed = []
    for template in PATHS:
        for value in ENCODED:
            path = template.format(v=value)
            client = client_for(path, made, who)
            try:
                status = client.get(path).status_code
            except httpx.TransportError:
                status = 599
            if status >= 500:
                failed.append((path, status))
    assert failed == []


# Each action form and the fields it reads (the CSRF token and the ticked box added).
FORMS = {
    "/console/payments/refund": {"provider": "razorpay", "payment_id": "pay_x"},
    "/console/payments/refund/cancel": {"provider": "razorpay", "idempotency_key": "ph0",
                                        "reason": "stuck"},
    "/console/parked/replay": {"provider": "razorpay", "event_id": "evt_x"},
    "/console/parked/settle": {"provider": "razorpay", "event_id": "evt_x", "note": "refunded"},
    "/console/parked/link": {"provider": "razorpay", "event_id": "evt_x", "cart_id": "cart_x"},
}  # fmt: skip
FORM_VALUES = ["zzz", "RAZORPAY", "", " ", "x" * 300, "%", "|", "\u00e9", "0"]


@pytest.mark.parametrize("route", list(FORMS))
def test_every_field_of_every_action_form_answers_a_hostile_value_below_500(console, route):
    client = console.logged_in()
    token = csrf_of(client.get("/console/").text)
    failed = []
    for name in FORMS[route]:
        for value in FORM_VALUES:
            form = {**FORMS[route], name: value, "csrf": token, "confirm": "yes"}
            try:
                status = client.post(route, data=form).status_code
            except httpx.TransportError:
                status = 599
            if status >= 500:
                failed.append((name, value[:20], status))
    assert failed == []

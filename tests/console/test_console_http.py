"""The console over real HTTP: who gets in, what every search key finds, what a timeline says,
and that every action is deliberate (CSRF, same site) and idempotent."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

import httpx
import psycopg
import pytest

from payhooks.console import auth
from payhooks.events import Provider
from payhooks.gateways import razorpay
from payhooks.operations import operators
from payhooks.service.shop import carts
from payhooks.sim.deliveries import Disputed
from payhooks.sim.gateway import Delivery, bank_reference
from payhooks.sim.gateways import razorpay as razorpay_sim
from payhooks.sim.storm import SIGNED
from tests import loopback
from tests.console.conftest import OPERATOR, PASSWORD, Console, csrf_of, said
from tests.factories import GATEWAY, KEYS, purchase

PRIVATE_GETS = [
    "/console",
    "/console/",
    "/console/search?q=anything",
    "/console/carts/cart_1",
    "/console/carts?email=buyer@example.com",
    "/console/references/razorpay/order_1",
    "/console/deliveries/razorpay/evt_1",
    "/console/parked",
    "/console/dead",
    "/console/deliveries",
    "/console/deliveries.csv",
    "/console/payments",
    "/console/payments.csv",
    "/console/parked/bulk",
]
PRIVATE_POSTS = [
    "/console/logout",
    "/console/parked/replay",
    "/console/parked/link",
    "/console/dead/retry",
    "/console/parked/bulk",
]


def send(console: Console, delivery: Delivery) -> httpx.Response:
    with loopback.Client(base_url=console.base_url, timeout=10) as client:
        return client.post(delivery.path, content=delivery.body, headers=delivery.headers)


def logged(console: Console, count: int) -> None:
    """The delivery log is written a moment after each answer: wait for ``count`` lines."""
    deadline = time.monotonic() + 10
    with psycopg.connect(console.database_url) as conn:
        while conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()[0] < count:
            assert time.monotonic() < deadline, "the delivery log was not written"
            time.sleep(0.05)


def rows(console: Console, sql: str) -> list[tuple]:
    with psycopg.connect(console.database_url) as conn:
        return conn.execute(sql).fetchall()


# --- who gets in -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PRIVATE_GETS)
def test_every_page_sends_a_stranger_to_the_login_form(console, path):
    with console.client() as client:
        answer = client.get(path)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/console/login?next=")


@pytest.mark.parametrize("path", PRIVATE_POSTS)
def test_every_action_refuses_a_stranger_and_does_nothing(console, path):
    with console.client() as client:
        answer = client.post(path, data={"provider": "razorpay", "event_id": "e", "message_id": 1})
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/console/login")
    assert rows(console, "SELECT * FROM payhooks_console_actions") == []


@pytest.mark.parametrize("path", [p for p in PRIVATE_POSTS if p != "/console/logout"])
def test_an_action_whose_session_ended_leads_back_to_its_page_saying_it_was_not_done(console, path):
    """A session that lapsed (or was ended) while the page was open: the action's form posts
    with no session. The login sent the operator on to the action's own address, which
    answers only its form's post: a 405 page after logging in, and no word that the action
    was never done. Now the page it was asked from opens again, and the login says so."""
    came_from = f"{console.base_url}/console/parked?provider=razorpay"
    with console.client() as client:
        answer = client.post(path, data={"provider": "razorpay", "event_id": "e"},
                             headers={"referer": came_from})  # fmt: skip
        assert answer.status_code == 303
        assert (
            answer.headers["location"]
            == "/console/login?next=/console/parked%3Fprovider%3Drazorpay&undone=1"
        )
        form = client.get(answer.headers["location"])
    assert "what you asked for was not done" in form.text
    assert 'name="next" value="/console/parked?provider=razorpay"' in form.text
    with console.client() as client:  # no page to go back to (no referer): the console's home
        answer = client.post(path, data={"provider": "razorpay"})
    assert answer.headers["location"] == "/console/login?next=/console/&undone=1"


def test_logging_out_with_no_session_leads_to_the_login_form_not_back_to_log_out(console):
    with console.client() as client:
        answer = client.post("/console/logout", headers={"referer": console.base_url + "/console/"})
    assert answer.headers["location"] == "/console/login?next=/console/"


def test_the_lists_above_cover_every_console_route(database_url):
    from payhooks.service.web import create_app
    from tests.factories import SETTINGS

    app = create_app(SETTINGS, api_token="t", url=database_url)
    routes = {
        (method, route.path)
        for route in app.routes
        if getattr(route, "path", "").startswith("/console")
        for method in getattr(route, "methods", ())
    }
    covered = {("GET", "/console/login"), ("POST", "/console/login")}
    covered |= {("GET", p.split("?")[0]) for p in PRIVATE_GETS}
    covered |= {("POST", p) for p in PRIVATE_POSTS}
    templates = {
        "/console/carts/cart_1": "/console/carts/{cart_id}",
        "/console/references/razorpay/order_1": "/console/references/{provider}/{reference:path}",
        "/console/deliveries/razorpay/evt_1": "/console/deliveries/{provider}/{event_id:path}",
    }
    covered = {(m, templates.get(p, p)) for m, p in covered}
    assert routes - covered == set()


def test_a_wrong_password_and_an_unknown_name_read_the_same(console):
    with console.client() as client:
        wrong = client.post("/console/login", data={"name": OPERATOR, "password": "x" * 20})
        unknown = client.post("/console/login", data={"name": "nobody", "password": "x" * 20})
    assert wrong.status_code == unknown.status_code == 401
    assert "do not match an operator" in wrong.text and "do not match an operator" in unknown.text
    assert "set-cookie" not in wrong.headers


def test_logins_are_rate_limited_per_name_even_with_the_right_password(console):
    with console.client() as client:
        for _ in range(auth.FAILURES_PER_NAME):
            assert (
                client.post("/console/login", data={"name": OPERATOR, "password": "no"}).status_code
                == 401
            )
        answer = client.post("/console/login", data={"name": OPERATOR, "password": PASSWORD})
    assert answer.status_code == 429
    assert "Too many failed logins" in answer.text


def test_logins_are_rate_limited_per_client_across_names(console):
    with console.client() as client:
        for n in range(auth.FAILURES_PER_CLIENT):
            client.post("/console/login", data={"name": f"guess{n}", "password": "no"})
        answer = client.post("/console/login", data={"name": OPERATOR, "password": PASSWORD})
    assert answer.status_code == 429


def test_the_session_cookie_is_signed_http_only_and_strict(console):
    with console.client() as client:
        answer = client.post("/console/login", data={"name": OPERATOR, "password": PASSWORD})
    cookie = answer.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/console" in cookie


def test_a_forged_cookie_is_refused(console):
    with console.client() as client:
        client.cookies.set("payhooks_console", "a-token.that-nobody-signed", path="/console")
        assert client.get("/console").status_code == 303


def test_logging_out_ends_the_session_for_a_copied_cookie_too(console):
    client = console.logged_in()
    copied = dict(client.cookies)
    page = client.get("/console").text
    assert client.post("/console/logout", data={"csrf": csrf_of(page)}).status_code == 303
    with console.client() as other:
        for name, value in copied.items():
            other.cookies.set(name, value, path="/console")
        assert other.get("/console").status_code == 303


def test_removing_an_operator_ends_their_sessions(console):
    client = console.logged_in()
    assert client.get("/console").status_code == 200
    with psycopg.connect(console.database_url, autocommit=True) as conn:
        operators.remove_operator(conn, OPERATOR)
    assert client.get("/console").status_code == 303


@pytest.mark.parametrize(
    ("target", "landing"),
    [
        ("/console/parked", "/console/parked"),
        ("//evil.example/console", "/console/"),
        ("https://evil.example/console", "/console/"),
        ("/console//evil.example", "/console/"),
        ("/elsewhere", "/console/"),
        ("/console/../../x", "/console/"),
        ("/console/..", "/console/"),
        ("/console/parked/../../../x", "/console/"),
        ("/console/%2e%2e/x", "/console/"),
        ("/console/%2E%2E/%2e%2E/x", "/console/"),
        ("/console/.%2e/x", "/console/"),
        ("/console/%2e./x", "/console/"),
        ("/console/..%2fx", "/console/"),
        ("/console/%252e%252e/x", "/console/"),
        ("/console\\..\\x", "/console/"),
        ("/console/..\\..\\x", "/console/"),
        ("/console/%5c%5cevil.example", "/console/"),
        ("/console/.//evil.example", "/console/"),
        ("/console/\t/evil.example", "/console/"),
        ("/console/parked/../dead", "/console/dead"),
        ("/console/./parked", "/console/parked"),
        ("/console/search?q=a%2Fb", "/console/search?q=a%2Fb"),
    ],
)
def test_after_login_only_a_console_address_is_followed(console, target, landing):
    with console.client() as client:
        answer = client.post(
            "/console/login", data={"name": OPERATOR, "password": PASSWORD, "next": target}
        )
    assert answer.headers["location"] == landing


@pytest.mark.parametrize("target", ["/console/../../x", "/console/%2e%2e/x", "/console\\..\\x"])
def test_the_login_form_keeps_only_a_console_address_as_next(console, target):
    with console.client() as client:
        page = client.get("/console/login", params={"next": target}).text
    assert 'name="next" value="/console/"' in page


def test_pages_forbid_framing_and_script(console):
    answer = console.logged_in().get("/console")
    assert answer.headers["x-frame-options"] == "DENY"
    assert "script-src" not in answer.headers["content-security-policy"]
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["cache-control"] == "no-store"


# --- actions are deliberate ------------------------------------------------------------------


def parked_delivery(console: Console) -> tuple[Delivery, str]:
    """A capture for a gateway order no checkout names yet: answered parked."""
    reference = "order_" + "P" * 14
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id="pay_parked0001", order_id=reference, amount_paise=49_900
    )
    assert send(console, delivery).json()["status"] == "parked"
    return delivery, reference


def test_an_action_without_the_sessions_csrf_token_is_refused(console, conn):
    delivery, _ = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    for data in ({}, {"csrf": "guess"}):
        answer = client.post(
            "/console/parked/replay", data={"provider": "razorpay", "event_id": event_id, **data}
        )
        assert answer.status_code == 403
    assert rows(console, "SELECT * FROM payhooks_console_actions") == []


def test_an_action_sent_from_another_site_is_refused(console):
    client = console.logged_in()
    csrf = csrf_of(client.get("/console/parked").text)
    answer = client.post(
        "/console/dead/retry",
        data={"csrf": csrf, "message_id": 1},
        headers={"origin": "https://evil.example"},
    )
    assert answer.status_code == 403


def test_replaying_a_parked_delivery_twice_applies_it_once(console, conn):
    delivery, reference = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    buy = purchase(conn)
    conn.execute("DELETE FROM checkouts WHERE cart_id = %s", (buy.cart_id,))
    carts.checkout(conn, buy.cart_id, Provider.RAZORPAY, reference)
    client = console.logged_in()
    csrf = csrf_of(client.get("/console/parked").text)
    form = {"csrf": csrf, "provider": "razorpay", "event_id": event_id}
    first = client.post("/console/parked/replay", data=form)
    second = client.post("/console/parked/replay", data=form)
    named = f"provider=razorpay&event_id={event_id}"
    assert said(first) == f"/console/parked?notice=applied&{named}"
    assert said(second) == f"/console/parked?notice=already_applied&{named}"
    assert "the delivery was applied" in client.get(first.headers["location"]).text
    assert rows(console, "SELECT cart_id FROM orders") == [(buy.cart_id,)]
    done = "SELECT operator, action, result FROM payhooks_console_actions ORDER BY id"
    assert rows(console, done) == [
        (OPERATOR, "replay", "applied"),
        (OPERATOR, "replay", "already_applied"),
    ]


def test_two_replays_released_together_make_one_order(console, conn):
    delivery, reference = parked_delivery(console)
    buy = purchase(conn)
    conn.execute("DELETE FROM checkouts WHERE cart_id = %s", (buy.cart_id,))
    carts.checkout(conn, buy.cart_id, Provider.RAZORPAY, reference)
    client = console.logged_in()
    csrf = csrf_of(client.get("/console/parked").text)
    form = {
        "csrf": csrf,
        "provider": "razorpay",
        "event_id": delivery.headers["x-razorpay-event-id"],
    }
    barrier, answers = threading.Barrier(2), []

    def click() -> None:
        with loopback.Client(base_url=console.base_url, cookies=client.cookies) as double:
            barrier.wait()
            answers.append(said(double.post("/console/parked/replay", data=form)))

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    named = f"provider=razorpay&event_id={form['event_id']}"
    assert sorted(answers) == [
        f"/console/parked?notice=already_applied&{named}",
        f"/console/parked?notice=applied&{named}",
    ]
    assert rows(console, "SELECT count(*) FROM orders") == [(1,)]


def test_retrying_a_dead_letter_twice_queues_it_once(console, conn):
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, failed_at, attempts,"
        " last_error) VALUES ('email', 'k1', 'a@example.com', 's', 'b', now(), 8, '550 no')"
    )
    [(message_id,)] = rows(console, "SELECT id FROM outbox")
    client = console.logged_in()
    page = client.get("/console/dead").text
    assert "550 no" in page
    form = {"csrf": csrf_of(page), "message_id": message_id}
    assert said(client.post("/console/dead/retry", data=form)).endswith("=queued")
    again = client.post("/console/dead/retry", data=form)
    assert said(again).endswith("=already_queued")
    assert rows(console, "SELECT failed_at, attempts FROM outbox") == [(None, 0)]


# --- search keys -----------------------------------------------------------------------------


def paid(console: Console, conn, provider: Provider):
    buy = purchase(conn, provider)
    assert send(console, buy.captured()).json()["status"] == "processed"
    return buy


def found(console: Console, query: str) -> str:
    answer = console.logged_in().get("/console/search", params={"q": query})
    assert answer.status_code == 303, f"{query!r} found {answer.status_code}"
    address, _, kept = answer.headers["location"].partition("?")
    assert kept == urlencode({"q": query.strip()}), "the page opened does not keep the search"
    return address


@pytest.mark.parametrize("provider", SIGNED)
def test_every_search_key_finds_the_cart(console, conn, provider):
    buy = paid(console, conn, provider)
    [(order_id, email)] = rows(
        console,
        "SELECT o.id, c.customer_email FROM orders o JOIN carts c ON c.id = o.cart_id",
    )
    [(event_id, bank_ref)] = rows(console, "SELECT event_id, bank_ref FROM processed_webhooks")
    assert bank_ref == bank_reference(buy.payment_id)  # PayU: its mihpayid's reference
    page = f"/console/carts/{buy.cart_id}"
    for query in (
        order_id,
        buy.cart_id,
        buy.reference,
        buy.payment_id if provider is not Provider.PAYU else buy.reference,
        event_id,
        email.upper(),
        bank_ref,
    ):
        assert found(console, query) == page


@pytest.mark.parametrize("provider", [p for p in Provider if p not in SIGNED])
def test_a_callback_waiting_for_its_api_is_found_and_says_it_waits(console, conn, provider):
    """PhonePe's and Juspay's callbacks order nothing by themselves: the cart's page shows the
    callback, found by its key, reference and cart, and that the API has not confirmed it."""
    buy = purchase(conn, provider)
    assert send(console, buy.captured()).json()["status"] == "confirming"
    assert rows(console, "SELECT count(*) FROM orders") == [(0,)]
    [(event_id,)] = rows(console, "SELECT event_id FROM processed_webhooks")
    page = f"/console/carts/{buy.cart_id}"
    for query in (buy.cart_id, buy.reference, event_id):
        assert found(console, query) == page
    assert "not confirmed yet (asked 0 times)" in console.logged_in().get(page).text


def test_a_delivery_that_matches_no_checkout_is_found_by_its_key_and_reference(console):
    delivery, reference = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    assert found(console, event_id) == f"/console/references/razorpay/{reference}"
    assert (
        found(console, bank_reference("pay_parked0001"))
        == f"/console/references/razorpay/{reference}"
    )


def test_a_reference_page_links_to_the_cart_whose_checkout_it_is(console, conn):
    """A payout line links to its gateway order's reference page: it leads on to the cart."""
    buy = purchase(conn)
    send(console, buy.captured())
    client = console.logged_in()
    page = client.get(f"/console/references/razorpay/{buy.reference}").text
    assert f'href="/console/carts/{buy.cart_id}"' in page
    _, reference = parked_delivery(console)  # a reference no checkout names: no cart to link
    assert 'id="its-cart"' not in client.get(f"/console/references/razorpay/{reference}").text


def test_an_unknown_query_says_nothing_matches(console):
    answer = console.logged_in().get("/console/search", params={"q": "no-such-thing"})
    assert answer.status_code == 200
    assert "0 results" in answer.text and "Nothing matches" in answer.text
    hint = html.unescape(answer.text[answer.text.index("Nothing matches") :])
    assert "dispute id" in hint  # every kind the search finds is named


def test_one_email_with_two_carts_lists_both(console, conn):
    first, second = purchase(conn), purchase(conn)
    answer = console.logged_in().get("/console/search", params={"q": "buyer@example.com"})
    assert answer.status_code == 200
    assert first.cart_id in answer.text and second.cart_id in answer.text


def test_an_email_with_more_carts_than_the_search_lists_says_so_and_pages_through_them(
    console, conn
):
    start = datetime(2026, 3, 1, tzinfo=UTC)
    conn.execute(
        "INSERT INTO carts (id, customer_email, amount_paise, created_at) "
        "SELECT 'cart_storm' || lpad(n::text, 3, '0'), 'Storm@example.com', 23200, "
        "%s + n * interval '1 minute' FROM generate_series(1, 230) n",
        (start,),
    )
    client = console.logged_in()
    answer = client.get("/console/search", params={"q": "storm@example.com"})
    assert answer.status_code == 200
    listed = re.findall(r'href="/console/carts/(cart_storm\d+)\?', answer.text)
    assert listed == [f"cart_storm{n:03}" for n in range(230, 180, -1)]  # the newest 50
    assert "The newest 50 of the 230 carts of this email are listed" in answer.text
    more = re.search(r'id="more">[^<]*<a href="([^"]+)"', answer.text).group(1)
    pages = []
    while more:
        shown = client.get(html.unescape(more))
        assert shown.status_code == 200 and "230 carts of Storm@example.com" not in shown.text
        assert "230 carts of storm@example.com" in shown.text
        pages.append(re.findall(r'href="/console/carts/(cart_storm\d+)"', shown.text))
        older = re.search(r'href="([^"]+)" id="older"', shown.text)
        more = older and older.group(1)
    assert [len(p) for p in pages] == [100, 100, 30]
    listed_all = [cart_id for shown in pages for cart_id in shown]
    assert listed_all == [f"cart_storm{n:03}" for n in range(230, 0, -1)]  # each once


def test_an_email_with_few_carts_says_nothing_is_left_out(console, conn):
    purchase(conn), purchase(conn)
    answer = console.logged_in().get("/console/search", params={"q": "buyer@example.com"})
    assert "2 results" in answer.text and 'id="more"' not in answer.text


# --- the timeline ----------------------------------------------------------------------------


def test_a_duplicated_reordered_refunded_payment_reads_in_arrival_order(console, conn):
    buy = purchase(conn)
    pid, ref, amount = buy.payment_id, buy.reference, buy.amount_paise
    sequence = [
        GATEWAY.razorpay("payment.captured", payment_id=pid, order_id=ref, amount_paise=amount),
        GATEWAY.razorpay("payment.authorized", payment_id=pid, order_id=ref, amount_paise=amount),
        GATEWAY.razorpay(
            "refund.processed",
            payment_id=pid,
            order_id=ref,
            amount_paise=amount,
            refund_id="rfnd_timeline01",
            refund_amount_paise=10_000,
        ),
    ]
    sequence.insert(1, sequence[0])  # the capture again: a duplicate
    answers = [send(console, d).json()["status"] for d in sequence]
    assert answers == ["processed", "duplicate", "processed", "processed"]
    logged(console, 4)
    page = console.logged_in().get(f"/console/carts/{buy.cart_id}").text
    order = [
        "Checkout with Razorpay",
        "HTTP 200 processed",
        "the last answered HTTP 200 duplicate",  # the capture's retry, within its one entry
        "2 attempts of this delivery",
        f"Payment {pid}: new → captured",
        "Order ord_",
        "(sale)",
        "Your order",
        "Razorpay payment.authorized",
        "Razorpay refund.processed",
        f"Payment {pid}: captured → refunded",
    ]
    positions = [page.index(text) for text in order]
    assert positions == sorted(positions)
    assert "HTTP 200 processed" in page[page.index("Razorpay payment.authorized") :]


def test_the_raw_body_and_kept_headers_are_one_click_away_and_secrets_never(console, conn):
    buy = paid(console, conn, Provider.RAZORPAY)
    [(event_id,)] = rows(console, "SELECT event_id FROM processed_webhooks")
    client = console.logged_in()
    story = client.get(f"/console/carts/{buy.cart_id}").text
    link = f"/console/deliveries/razorpay/{quote(event_id, safe='')}"
    assert link in story
    page = client.get(link).text
    assert "x-razorpay-signature" in page and buy.payment_id in page
    for secret in (KEYS.razorpay, KEYS.cashfree, KEYS.payu_salt, "api-token"):
        assert secret not in page and secret not in story


def captured_with_notes(buy, notes: str) -> Delivery:
    """A signed capture whose payment carries ``notes`` as a customer typed them."""
    entity = {
        "id": buy.payment_id,
        "entity": "payment",
        "amount": buy.amount_paise,
        "currency": "INR",
        "status": "captured",
        "order_id": buy.reference,
        "notes": {"address": notes},
    }
    body = json.dumps({"event": "payment.captured", "payload": {"payment": {"entity": entity}}})
    signed = {"x-razorpay-signature": razorpay.sign(body.encode(), KEYS.razorpay)}
    return Delivery(provider=Provider.RAZORPAY, body=body.encode(), headers=signed, label=notes)


def test_customer_typed_markup_is_shown_as_text(console, conn):
    buy = purchase(conn)
    delivery = captured_with_notes(buy, "<script>document.title='owned'</script>")
    assert send(console, delivery).json()["status"] == "processed"
    [(event_id,)] = rows(console, "SELECT event_id FROM processed_webhooks")
    client = console.logged_in()
    page = client.get(f"/console/deliveries/razorpay/{quote(event_id, safe='')}").text
    assert "<script>document" not in page
    assert "&lt;script&gt;document.title=&#39;owned&#39;&lt;/script&gt;" in page
    echoed = client.get("/console/search", params={"q": "<script>x</script>"}).text
    assert "<script>x" not in echoed and "&lt;script&gt;x&lt;/script&gt;" in echoed


# --- health ----------------------------------------------------------------------------------


def log_lines(conn, provider: str, status: int, outcome: str, count: int) -> None:
    for _ in range(count):
        conn.execute(
            "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
            " body_bytes,"
            " duration_ms) VALUES (now(), %s, %s, %s, false, 10, 1)",
            (provider, status, outcome),
        )


def test_repeated_5xx_and_a_signature_spike_raise_banners(console, conn):
    log_lines(conn, "razorpay", 503, "database_unavailable", 3)
    log_lines(conn, "cashfree", 401, "signature_mismatch", 5)
    log_lines(conn, "cashfree", 200, "processed", 10)
    page = console.logged_in().get("/console").text
    assert "Razorpay: 3 of 3 deliveries in the last hour were answered 5xx" in page
    assert "Cashfree: 5 of 15 deliveries in the last hour failed the signature check" in page


def test_a_few_stray_failures_raise_no_banner(console, conn):
    log_lines(conn, "razorpay", 503, "database_unavailable", 2)
    log_lines(conn, "payu", 401, "signature_mismatch", 5)
    log_lines(conn, "payu", 200, "processed", 30)  # 5 of 35 is under a fifth
    page = console.logged_in().get("/console").text
    assert 'role="alert"' not in page


def log_lines_ago(conn, provider: str, status: int, count: int, ago: timedelta) -> None:
    outcome = "processed" if status < 300 else "database_unavailable"
    for _ in range(count):
        conn.execute(
            "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
            " body_bytes,"
            " duration_ms) VALUES (now() - %s, %s, %s, %s, true, 10, 1)",
            (ago, provider, status, outcome),
        )


def test_a_slow_failure_over_the_gateways_retry_window_raises_a_banner(console, conn):
    """One 5xx every other hour for a day, none in the last hour: the failure that gets a
    Razorpay endpoint disabled."""
    for hour in range(1, 24, 2):
        log_lines_ago(conn, "razorpay", 503, 1, timedelta(hours=hour, minutes=30))
        log_lines_ago(conn, "razorpay", 200, 20, timedelta(hours=hour, minutes=30))
    page = console.logged_in().get("/console").text
    assert 'role="alert"' in page
    assert (
        "Razorpay: 12 of 252 deliveries in the last 24 hours were answered 5xx, in 12 different "
        "hours" in page
    )


def test_a_burst_of_5xx_long_past_raises_no_banner(console, conn):
    """A restart's few failures, all in one hour: the hourly rule saw them then."""
    log_lines_ago(conn, "razorpay", 503, 8, timedelta(hours=5))
    log_lines_ago(conn, "razorpay", 200, 100, timedelta(hours=4))
    page = console.logged_in().get("/console").text
    assert 'role="alert"' not in page


def test_rare_5xx_on_a_busy_gateway_raise_no_banner(console, conn):
    """One answer in 500 a 503 (a pod restarting now and then) over a busy day: healthy."""
    conn.execute(
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " body_bytes,"
        " duration_ms) SELECT now() - interval '10 minutes' - n * interval '16 seconds',"
        " 'razorpay', CASE WHEN n % 500 = 0 THEN 503 ELSE 200 END, 'processed', true, 10, 1"
        " FROM generate_series(1, 5000) n"
    )
    page = console.logged_in().get("/console").text
    assert 'role="alert"' not in page


def when(at: datetime) -> str:
    """As the console shows a time: in IST by default, never broken across lines."""
    local = at.astimezone(ZoneInfo("Asia/Kolkata"))
    shown = f"{local:%Y-%m-%d %H:%M:%S}.{local.microsecond // 1000:03d} IST"
    return shown.replace(" ", "\u00a0")


def when_kept(at: datetime) -> str:
    """``when`` as a template writes it: its date kept whole as well (no wrap at a hyphen)."""
    return f'<span class="at">{when(at)}</span>'


def test_each_gateway_shows_when_it_last_answered_2xx(console, conn):
    log_lines_ago(conn, "payu", 200, 2, timedelta(hours=30))
    log_lines_ago(conn, "payu", 503, 4, timedelta(hours=2))
    [(last,)] = rows(
        console,
        "SELECT max(received_at) FROM payhooks_deliveries WHERE provider = 'payu' AND status = 200",
    )
    page = console.logged_in().get("/console").text
    payu = page[page.index('data-provider="payu"') :]
    assert f"last 2xx at {when_kept(last)}" in payu.split("</div>")[0]
    cashfree = page[page.index('data-provider="cashfree"') :]
    assert "last 2xx: none recorded" in cashfree.split("</div>")[0]


def test_the_chart_counts_each_class_of_answer(console, conn):
    log_lines(conn, "payu", 200, "processed", 4)
    log_lines(conn, "payu", 200, "duplicate", 2)
    log_lines(conn, "payu", 401, "signature_mismatch", 1)
    page = console.logged_in().get("/console").text
    card = page[page.index('data-provider="payu"') :]
    assert "applied 4 · waiting 0 · duplicate 2 · parked 0 · signature refused 1" in card
    assert card.count('<rect class="applied"') == 1


def test_the_chart_counts_callbacks_waiting_for_the_status_api_apart_from_those_applied(
    console, conn
):
    """A PhonePe callback answered ``confirming`` has changed nothing yet (the status API
    decides): the chart counts it as waiting, in its figures, its bars and its hourly table,
    never as applied."""
    buy = purchase(conn, Provider.PHONEPE)
    assert send(console, buy.captured()).json()["status"] == "confirming"
    logged(console, 1)
    page = console.logged_in().get("/console").text
    card = page[page.index('data-provider="phonepe"') :].split("</details>")[0]
    assert "applied 0 · waiting 1 · duplicate 0" in card
    assert card.count('<rect class="waiting"') == 1 and '<rect class="applied"' not in card
    figures = re.findall(r"<td>(\d+)</td>", card)
    header = re.findall(r'<th scope="col">([^<]+)</th>', card)
    assert dict(zip(header[1:], figures, strict=True)) == {
        "applied": "0", "waiting": "1", "duplicate": "0", "parked": "0",
        "signature refused": "0", "refused": "0", "failed": "0",
    }  # fmt: skip
    legend = page[page.index('class="legend') :].split("</p>")[0]
    assert "waiting for the status API" in legend


def test_the_home_page_says_which_gateways_reconciliation_is_off_for(console):
    """The console's settings carry no status API credentials: reconciliation is off for all."""
    page = console.logged_in().get("/console").text
    assert "reconciliation off (no API credentials) for:" in page
    assert "Razorpay, Cashfree, PayU" in page


# --- found in review -------------------------------------------------------------------------


def test_hours_are_utc_hours_in_a_database_on_india_time(conn):
    """date_trunc in the session's zone would start IST hours at :30 UTC: no bar would match."""
    from datetime import datetime

    from payhooks.console import health

    log_lines(conn, "razorpay", 200, "processed", 1)
    conn.execute("SET TimeZone = 'Asia/Kolkata'")
    report = health.health(conn, datetime.now(UTC))
    [razorpay] = [g for g in report.gateways if g.provider == "razorpay"]
    assert razorpay.totals[health.Answer.APPLIED] == 1


def test_a_parked_delivery_is_found_by_its_payment_id_and_gateway_order_id(console):
    _, reference = parked_delivery(console)
    page = f"/console/references/razorpay/{reference}"
    assert found(console, "pay_parked0001") == page
    assert found(console, reference) == page


def test_a_delivery_key_holding_a_slash_opens_from_the_timeline(console, conn):
    buy = purchase(conn, Provider.CASHFREE)
    delivery = buy.captured()
    key = "6AEXLJyl/6HWQ+key/with/slashes="
    headers = {**delivery.headers, "x-idempotency-key": key}
    keyed = Delivery(provider=delivery.provider, body=delivery.body, headers=headers, label="k")
    assert send(console, keyed).json()["event_id"] == key
    client = console.logged_in()
    story = client.get(f"/console/carts/{buy.cart_id}").text
    link = re.search(r'href="(/console/deliveries/cashfree/[^"]+)"', story).group(1)
    page = client.get(html.unescape(link))
    assert page.status_code == 200 and key in html.unescape(page.text)


def test_parallel_guesses_get_no_more_tries_than_a_sequence(console):
    barrier, answers = threading.Barrier(12), []

    def guess(n: int) -> None:
        with console.client() as client:
            barrier.wait()
            form = {"name": OPERATOR, "password": f"wrong guess {n}"}
            answers.append(client.post("/console/login", data=form).status_code)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers.count(401) == auth.FAILURES_PER_NAME
    assert answers.count(429) == 12 - auth.FAILURES_PER_NAME


# --- answers are console pages -----------------------------------------------------------


def test_a_field_too_long_is_named_without_echoing_it(console):
    """Every field the console takes is named when it is refused, never "a field"."""
    client = console.logged_in()
    token = csrf_of(client.get("/console/").text)
    long = "needle-" * 200
    answers = {
        "The email searched for": client.get("/console/carts", params={"email": long}),
        "The reason": client.post(
            "/console/payments/refund/cancel",
            data={
                "csrf": token,
                "provider": "razorpay",
                "idempotency_key": "K-1",
                "reason": long,
                "confirm": "yes",
            },
        ),
    }
    for field, answer in answers.items():
        assert answer.status_code == 400, field
        assert f"{field} is too long" in answer.text, answer.text
        assert "needle-needle-" not in answer.text


def test_a_search_too_long_answers_a_console_page_without_echoing_it(console):
    query = "needle-" * 200
    answer = console.logged_in().get("/console/search", params={"q": query})
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert "The search is too long" in answer.text
    assert "needle-needle-" not in answer.text


@pytest.mark.parametrize(
    ("path", "form"),
    [
        ("/console/dead/retry", {"message_id": "not-a-number"}),
        ("/console/dead/retry", {"message_id": str(2**64)}),
        ("/console/dead/retry", {}),
        ("/console/parked/replay", {"provider": "razorpay", "event_id": "needle-" * 200}),
        ("/console/parked/replay", {"provider": "razorpay"}),
        ("/console/parked/replay", {"provider": "razorpay", "event_id": "e", "back": "n" * 2000}),
    ],
)
def test_an_action_with_a_field_it_cannot_take_answers_a_console_page(console, path, form):
    client = console.logged_in()
    csrf = csrf_of(client.get("/console/parked").text)
    answer = client.post(path, data={"csrf": csrf, **form})
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert "needle-needle-" not in answer.text and "nnnnnnnn" not in answer.text
    assert rows(console, "SELECT * FROM payhooks_console_actions") == []


@pytest.mark.parametrize(
    "form",
    [
        {"name": OPERATOR, "password": "needle-" * 200},
        {"name": "needle-" * 200, "password": "x" * 20},
        {"password": "x" * 20},
        {"name": OPERATOR, "password": "x" * 20, "next": "/console/" + "needle-" * 200},
    ],
)
def test_a_login_with_a_field_it_cannot_take_answers_a_console_page(console, form):
    with console.client() as client:
        answer = client.post("/console/login", data=form)
    assert answer.status_code in (400, 401)
    assert answer.headers["content-type"].startswith("text/html")
    assert "needle-needle-" not in answer.text


def is_console_page(answer: httpx.Response, status: int) -> bool:
    return answer.status_code == status and answer.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(
    "path",
    [
        "/console/search?q=%00",
        "/console/search?q=a%01b",
        "/console/search?q=%7F",
        "/console/carts/%00",
        "/console/carts/a%1Bb",
        "/console/references/razorpay/%00",
        "/console/references/%00/x",
        "/console/deliveries/razorpay/%00",
        "/console/deliveries/%00/x",
    ],
)
def test_a_control_character_in_an_address_answers_a_console_page(console, path):
    answer = console.logged_in().get(path)
    assert is_console_page(answer, 400), answer.text[:200]
    assert "control character" in answer.text


@pytest.mark.parametrize(
    "form",
    [
        {"provider": "razorpay", "event_id": "a\x00b"},
        {"provider": "\x00", "event_id": "x"},
    ],
)
def test_a_control_character_in_an_action_answers_a_console_page(console, form):
    client = console.logged_in()
    csrf = csrf_of(client.get("/console/parked").text)
    answer = client.post("/console/parked/replay", data={"csrf": csrf, **form})
    assert is_console_page(answer, 400), answer.text[:200]
    assert rows(console, "SELECT * FROM payhooks_console_actions") == []


@pytest.mark.parametrize(
    "form",
    [
        {"name": "asha\x00", "password": "x" * 20},
        {"name": OPERATOR, "password": "pass\x00word-long"},
    ],
)
def test_a_control_character_in_a_login_answers_a_console_page(console, form):
    with console.client() as client:
        answer = client.post("/console/login", data=form)
    assert is_console_page(answer, 400), answer.text[:200]
    assert "payhooks_console" not in answer.headers.get("set-cookie", "")


def test_a_control_character_in_the_page_to_go_next_lands_on_the_console(console):
    with console.client() as client:
        form = {"name": OPERATOR, "password": PASSWORD, "next": "/console/a\x00b"}
        answer = client.post("/console/login", data=form)
        assert (answer.status_code, answer.headers["location"]) == (303, "/console/")
        csrf = csrf_of(client.get("/console/parked").text)
        form = {"csrf": csrf, "provider": "razorpay", "event_id": "x", "back": "/console/\x00"}
        answer = client.post("/console/parked/replay", data=form)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/console/?notice=")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/console/nonexistent", 404),
        ("GET", "/console/references", 404),
        ("POST", "/console/parked", 405),
        ("GET", "/console/dead/retry", 405),
        ("PUT", "/console/login", 405),
    ],
)
def test_an_unknown_console_address_or_method_answers_a_console_page(console, method, path, status):
    client = console.logged_in()
    data = {"csrf": csrf_of(client.get("/console/parked").text)} if method == "POST" else None
    answer = client.request(method, path, data=data)
    assert is_console_page(answer, status), answer.text[:200]
    assert "default-src 'none'" in answer.headers["content-security-policy"]


def test_the_shop_apis_unknown_addresses_still_answer_json(console):
    headers = {"authorization": "Bearer api-token"}
    answer = console.client().get("/api/nothing-here", headers=headers)
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("application/json")


# --- strangers cannot starve the shop API ----------------------------------------------------


def connections_taken(console: Console) -> dict[str, int]:
    """How many connections each of the server's pools has handed out so far."""
    state = console.app.state
    pools = {"api": state.api_pool, "console": getattr(state, "console_pool", None)}
    return {
        name: pool.get_stats().get("requests_num", 0) if pool is not None else 0
        for name, pool in pools.items()
    }


def worker_threads() -> int:
    return sum(t.name == "AnyIO worker thread" for t in threading.enumerate())


def flooded(
    console: Console, request, clients: int, per_client: int
) -> tuple[list[int], list[int]]:
    """``clients`` keep-alive connections sending ``request(client, n)`` ``per_client`` times
    each, all at once, while the shop API is asked the whole time: every answer of each."""
    barrier = threading.Barrier(clients + 1)
    answers: list[int] = []

    def stranger(n: int) -> None:
        # Thirty logins at once each hash a password: on a loaded machine one waits its turn
        # longer than a client's usual 10 s, and a thread that timed out lost its answer.
        patient = loopback.Client(base_url=console.base_url, timeout=120, follow_redirects=False)
        with patient as client:
            barrier.wait()
            for k in range(per_client):
                answers.append(request(client, n * per_client + k))

    threads = [threading.Thread(target=stranger, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    api_answers = []
    headers = {"authorization": "Bearer api-token"}
    with loopback.Client(base_url=console.base_url, timeout=30, headers=headers) as api:
        barrier.wait()
        while any(t.is_alive() for t in threads):
            api_answers.append(api.get("/api/products/none").status_code)
    for t in threads:
        t.join()
    return answers, api_answers


def test_strangers_flooding_the_console_take_no_connection_and_no_thread(console):
    console.logged_in()  # the cookie key is read once per process, by the first login
    taken, threads = connections_taken(console), worker_threads()
    forged = "InRva2VuIg.aW1.forged"

    def stranger(client: httpx.Client, n: int) -> int:
        if n % 2:
            client.cookies.set("payhooks_console", forged, path="/console")
        return client.get("/console/parked").status_code

    answers, api_answers = flooded(console, stranger, clients=60, per_client=10)
    assert answers == [303] * 600
    assert set(api_answers) == {404}
    now = connections_taken(console)
    assert now["console"] == taken["console"]
    assert now["api"] - taken["api"] == len(api_answers)
    assert worker_threads() <= threads + 1  # the API's own requests, one at a time


def test_a_flood_of_logins_never_takes_the_apis_connections(console):
    taken = connections_taken(console)

    def guess(client: httpx.Client, n: int) -> int:
        form = {"name": f"guess{n}", "password": "wrong password"}
        return client.post("/console/login", data=form).status_code

    answers, api_answers = flooded(console, guess, clients=30, per_client=2)
    assert set(answers) <= {401, 429} and len(answers) == 60
    assert set(api_answers) == {404}
    assert connections_taken(console)["api"] - taken["api"] == len(api_answers)


# --- refunds ---------------------------------------------------------------------------------


def paid_twice(console, conn, second: str):
    """A cart paid twice (its second payment ``second``, flagged for a refund): an operator's
    client, logged in, and the cart's page."""
    buy = purchase(conn, Provider.RAZORPAY)
    send(console, buy.captured())
    send(console, buy.captured(payment_id=second))
    return console.logged_in(), f"/console/carts/{buy.cart_id}"


def test_a_double_payment_is_refunded_from_the_console_once_by_whoever_asks(console, conn):
    """The Refund button of a payment flagged for a refund: the box ticked (CSRF too), an
    intent under the policy's key recorded with the operator's name, asked once however often
    it is pressed; the payment's refunds then show on its cart's page."""
    second = "pay_consolerefund01"
    client, page = paid_twice(console, conn, second)
    shown = client.get(page).text
    assert "Refund ₹499.00" in shown and 'name="confirm"' in shown
    form = {"csrf": csrf_of(shown), "provider": "razorpay", "payment_id": second, "back": page}
    unticked = client.post("/console/payments/refund", data=form)
    assert said(unticked).endswith("?notice=not_confirmed")
    assert rows(console, "SELECT count(*) FROM payhooks_refunds") == [(0,)]
    asked = client.post("/console/payments/refund", data={**form, "confirm": "yes"})
    assert said(asked) == f"{page}?notice=refund_requested"
    again = client.post("/console/payments/refund", data={**form, "confirm": "yes"})
    assert said(again).endswith("?notice=refund_already_requested")
    intents = "SELECT payment_id, amount_paise, state, requested_by FROM payhooks_refunds"
    assert rows(console, intents) == [(second, 49_900, "requested", OPERATOR)]
    done = rows(console, "SELECT operator, action, target, result FROM payhooks_console_actions"
                         " WHERE action = 'refund' ORDER BY at")  # fmt: skip
    assert done == [(OPERATOR, "refund", second, "refund_requested"),
                    (OPERATOR, "refund", second, "refund_already_requested")]  # fmt: skip
    story = client.get(page).text
    assert "Refunds asked for" in story and "requested" in story


def test_a_refund_on_its_way_takes_the_button_away_and_one_that_failed_gives_it_back(console, conn):
    second = "pay_consoleonitsway"
    client, page = paid_twice(console, conn, second)
    form = {"csrf": csrf_of(client.get(page).text), "provider": "razorpay",
            "payment_id": second, "back": page, "confirm": "yes"}  # fmt: skip
    client.post("/console/payments/refund", data=form)
    button = 'action="/console/payments/refund"'
    for state in ("requested", "sent"):
        conn.execute("UPDATE payhooks_refunds SET state = %s", (state,))
        shown = client.get(page).text
        payments = shown[shown.index('id="story-payments"') : shown.index("</table>")]
        assert button not in payments and "Refund ₹499.00" not in payments, state
        assert f"refund already asked for ({state})" in payments, state
    conn.execute("UPDATE payhooks_refunds SET state = 'failed'")
    shown = client.get(page).text
    assert button in shown and "Refund ₹499.00" in shown
    assert "already asked for" not in shown


def test_the_refund_button_asks_for_what_a_lost_dispute_left_of_the_payment(console, conn):
    """A chargeback of ₹100 of the double payment, lost: the button says and asks for the
    ₹399 left, never the ₹499 paid (the card network gave the customer the rest)."""
    buy = purchase(conn, Provider.RAZORPAY)
    second = "pay_consoledisputed"
    send(console, buy.captured())
    send(console, buy.captured(payment_id=second))
    told = Disputed(what="lost", dispute_id="disp_consolelost01", payment_id=second,
                    reference=buy.reference, amount_paise=10_000,
                    respond_by=GATEWAY.now + 86_400, reported_at=GATEWAY.now)  # fmt: skip
    send(console, razorpay_sim.dispute_delivery(GATEWAY, told))
    client = console.logged_in()
    page = f"/console/carts/{buy.cart_id}"
    shown = client.get(page).text
    assert "Refund ₹399.00" in shown and "Refund ₹499.00" not in shown
    form = {"csrf": csrf_of(shown), "provider": "razorpay", "payment_id": second, "back": page,
            "confirm": "yes"}  # fmt: skip
    asked = client.post("/console/payments/refund", data=form)
    assert said(asked) == f"{page}?notice=refund_requested"
    assert rows(console, "SELECT amount_paise FROM payhooks_refunds") == [(39_900,)]


def test_a_refund_stuck_unsent_is_cancelled_from_the_console_with_who_and_why(console, conn):
    """The Cancel refund button of an intent still requested: the box ticked and a reason
    given, the intent cancelled under the operator's name (never sent, its amount free, so
    the Refund button asks again); one the gateway has shows no button and is refused."""
    buy = purchase(conn, Provider.RAZORPAY)
    second = "pay_consolecancel01"
    send(console, buy.captured())
    send(console, buy.captured(payment_id=second))
    client = console.logged_in()
    page = f"/console/carts/{buy.cart_id}"
    token = csrf_of(client.get(page).text)
    asked = {"csrf": token, "provider": "razorpay", "payment_id": second, "back": page,
             "confirm": "yes"}  # fmt: skip
    client.post("/console/payments/refund", data=asked)
    shown = client.get(page).text
    assert "Cancel refund" in shown and "may have it" not in shown  # never sent: no warning
    rows(console, "UPDATE payhooks_refunds SET attempts = 1 RETURNING 1")  # sent, no answer
    warned = " ".join(re.sub(r"<[^>]+>", " ", client.get(page).text).split())
    assert "Sent 1 time already: the gateway may have it" in warned
    (key,) = rows(console, "SELECT idempotency_key FROM payhooks_refunds")[0]
    form = {"csrf": token, "provider": "razorpay", "idempotency_key": key, "back": page,
            "reason": "Razorpay keeps failing it"}  # fmt: skip
    unticked = client.post("/console/payments/refund/cancel", data=form)
    assert said(unticked).endswith("?notice=not_confirmed")
    unsaid = client.post("/console/payments/refund/cancel",
                         data={**form, "reason": "  ", "confirm": "yes"})  # fmt: skip
    assert said(unsaid).endswith("?notice=no_reason")  # ticked: the reason is what is missing
    done = client.post("/console/payments/refund/cancel", data={**form, "confirm": "yes"})
    assert said(done) == f"{page}?notice=refund_cancelled"
    intents = "SELECT state, cancelled_by, cancel_reason FROM payhooks_refunds"
    assert rows(console, intents) == [("cancelled", OPERATOR, "Razorpay keeps failing it")]
    # A second press (a stale tab, a second operator) finds nothing left to do and says so.
    twice = client.post("/console/payments/refund/cancel",
                        data={**form, "reason": "again", "confirm": "yes"})  # fmt: skip
    assert said(twice) == f"{page}?notice=refund_already_cancelled"
    assert rows(console, intents) == [("cancelled", OPERATOR, "Razorpay keeps failing it")]
    logged = "SELECT result FROM payhooks_console_actions WHERE action = 'cancel_refund'"
    assert rows(console, logged) == [("refund_cancelled",), ("refund_already_cancelled",)]
    shown = client.get(page).text
    assert "Cancel refund" not in shown and f"cancelled by {OPERATOR}" in shown
    again = client.post("/console/payments/refund", data=asked)  # a new refund, a new key
    assert said(again).endswith("?notice=refund_requested")
    console_db = "UPDATE payhooks_refunds SET state = 'sent' WHERE state = 'requested'"
    rows(console, console_db + " RETURNING 1")
    (key,) = rows(console, "SELECT idempotency_key FROM payhooks_refunds WHERE state = 'sent'")[0]
    late = client.post("/console/payments/refund/cancel",
                       data={**form, "idempotency_key": key, "confirm": "yes"})  # fmt: skip
    assert said(late).endswith("?notice=refund_at_gateway")


def refund_asked(console, conn, key: str):
    """A Razorpay payment captured through the console's service and a refund of 100.00 of it
    asked under ``key`` (the shop API's way): the purchase and the intent."""
    from payhooks.refunding import refunds

    buy = purchase(conn, Provider.RAZORPAY)
    send(console, buy.captured())
    with psycopg.connect(console.database_url, autocommit=True) as db:
        made = refunds.request(db, "razorpay", buy.payment_id, 10_000, key=key,
                               captured_paise=49_900, reason="one broken cup",
                               requested_by="api")  # fmt: skip
    return buy, made


def test_an_orders_page_lists_its_refunds_and_cancels_one_stuck_unsent(console, conn):
    """The core console's order page (every host's, not only the shop's): the refunds of its
    payments, and Cancel refund on one still requested, with the operator's reason."""
    buy, made = refund_asked(console, conn, "ticket-9")
    client = console.logged_in()
    page = f"/console/orders/razorpay/{buy.reference}"
    shown = client.get(page).text
    assert "Refunds asked for" in shown and "Cancel refund" in shown
    form = {"csrf": csrf_of(shown), "provider": "razorpay", "back": page, "confirm": "yes",
            "idempotency_key": made.idempotency_key, "reason": "refunded in cash"}  # fmt: skip
    done = client.post("/console/payments/refund/cancel", data=form)
    assert said(done) == f"{page}?notice=refund_cancelled"
    intents = "SELECT state, cancelled_by, cancel_reason FROM payhooks_refunds"
    assert rows(console, intents) == [("cancelled", OPERATOR, "refunded in cash")]
    logged = "SELECT action, target, result FROM payhooks_console_actions WHERE action LIKE 'c%'"
    assert rows(console, logged) == [("cancel_refund", buy.payment_id, "refund_cancelled")]


def test_cancelling_a_refund_no_intent_is_recorded_under_says_so_not_that_it_is_in_flight(console):
    """A mistyped key, or a gateway's name mistyped, was told "the worker is calling the
    gateway with this refund right now ... or the gateway already has it", as the command
    says "refund ... not found"; a reason past 255 characters was cut where the command
    refuses it."""
    client = console.logged_in()
    page = "/console/parked"
    form = {"csrf": csrf_of(client.get(page).text), "back": page, "confirm": "yes",
            "reason": "typo"}  # fmt: skip
    for provider, key in (("razorpay", "no-such-key"), ("nope", "no-such-key")):
        asked = {**form, "provider": provider, "idempotency_key": key}
        answer = client.post("/console/payments/refund/cancel", data=asked)
        assert said(answer) == f"{page}?notice=no_such_refund"
    shown = client.get(answer.headers["location"]).text
    assert "no refund is recorded under that key" in shown
    # the action log keeps the mistyped key's try, never a gateway no one serves as its own
    logged = "SELECT provider, result FROM payhooks_console_actions ORDER BY id"
    assert rows(console, logged) == [("razorpay", "no_such_refund")]
    long = client.post("/console/payments/refund/cancel", data={
        **form, "provider": "razorpay", "idempotency_key": "no-such-key", "reason": "x" * 256,
    })  # fmt: skip
    assert said(long) == f"{page}?notice=reason_refused"


def test_cancelling_a_refund_the_gateway_has_says_so_never_to_try_again(console, conn):
    """A refund sent or processed cannot be cancelled: the console told the operator the
    worker might be calling with it, "try again in a minute or two", a cancel that can never
    succeed."""
    from payhooks.refunding import refunds

    buy, made = refund_asked(console, conn, "ticket-10")
    with psycopg.connect(console.database_url, autocommit=True) as db:
        refunds.accepted(db, made, "rfnd_gateway0001", processed=True)
    client = console.logged_in()
    page = f"/console/orders/razorpay/{buy.reference}"
    form = {"csrf": csrf_of(client.get(page).text), "provider": "razorpay", "back": page,
            "confirm": "yes", "idempotency_key": made.idempotency_key,
            "reason": "changed mind"}  # fmt: skip
    answer = client.post("/console/payments/refund/cancel", data=form)
    assert said(answer) == f"{page}?notice=refund_at_gateway"
    shown = client.get(answer.headers["location"]).text
    assert "the gateway has this refund already" in shown and "try again" not in shown


def test_the_console_refunds_only_a_payment_flagged_for_it(console, conn):
    buy = purchase(conn, Provider.RAZORPAY)
    send(console, buy.captured())  # it paid the order: no refund is due
    client = console.logged_in()
    page = f"/console/carts/{buy.cart_id}"
    shown = client.get(page).text
    assert "Refund ₹" not in shown
    form = {"csrf": csrf_of(shown), "provider": "razorpay", "payment_id": buy.payment_id,
            "back": page, "confirm": "yes"}  # fmt: skip
    answer = client.post("/console/payments/refund", data=form)
    assert said(answer).endswith("?notice=refund_not_possible")
    assert rows(console, "SELECT count(*) FROM payhooks_refunds") == [(0,)]
    # one naming a gateway payhooks does not know is refused the same, and recorded nowhere
    forged = client.post("/console/payments/refund", data={**form, "provider": "stripe"})
    assert said(forged).endswith("?notice=refund_not_possible")
    logged = "SELECT provider, action FROM payhooks_console_actions ORDER BY id"
    assert rows(console, logged) == [("razorpay", "refund")]


def test_a_read_only_operator_sees_pages_but_every_action_is_refused(console):
    from payhooks.console.pages import READ_ONLY

    with psycopg.connect(console.database_url, autocommit=True) as db:
        operators.add_operator(db, "ravi", PASSWORD, read_only=True)
    client = console.logged_in("ravi")
    home = client.get("/console/")
    assert home.status_code == 200 and "(read-only)" in home.text
    token = csrf_of(home.text)
    from payhooks.console import listings, pages
    from payhooks.service.console import shop

    posts = [
        route.path
        for route in [*pages._private.routes, *listings.router.routes, *shop._shop.routes]
        if "POST" in getattr(route, "methods", ()) and route.path not in ("/login", "/logout")
    ]
    assert len(posts) >= 5  # replay, settle, retry, refund, bulk replay at least
    for path in posts:
        answer = client.post(f"/console{path}", data={"csrf": token, "provider": "razorpay",
                             "event_id": "evt_x", "message_id": "1", "note": "n",
                             "payment_id": "pay_x", "confirm": "yes", "cart_id": "cart_x",
                             "recipient": "a@example.com",
                             "as_of": "2026-12-03T10:00:00+00:00"})  # fmt: skip
        assert answer.status_code == 403, path
        assert READ_ONLY in answer.text.replace("&#39;", "'")
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]
    assert client.post("/console/logout", data={"csrf": token}).status_code == 303


def test_the_action_log_shows_who_did_what(console):
    client = console.logged_in()
    page = client.get("/console/parked").text
    form = {"csrf": csrf_of(page), "provider": "razorpay", "event_id": "evt_none"}
    client.post("/console/parked/replay", data=form)
    log = client.get("/console/actions").text
    assert "<h1>Action log</h1>" in log and "evt_none" in log and OPERATOR in log
    assert "not found" in log
    assert 'href="/console/deliveries/razorpay/evt_none"' not in log  # no such delivery: no link
    assert "evt_none" not in client.get("/console/actions?operator=nobody").text


def test_an_operator_waits_for_the_consoles_first_connection_to_a_slow_database(
    database_url, proxy
):
    """The console opens its connections at an operator's first page (none kept idle). A
    database slow to take a connection (a loaded or distant server: 1.5 s here) makes that
    page wait, as the merchant's console and the shop API wait, rather than answer 503 after
    the webhook pool's one second."""
    from payhooks.service.web import create_app
    from tests.conftest import serving_app
    from tests.console.conftest import password_hash
    from tests.factories import SETTINGS

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO payhooks_operators (name, password_hash) VALUES (%s, %s)",
            (OPERATOR, password_hash()),
        )
    proxy.connect_delay_s = 1.5
    app = create_app(SETTINGS, api_token="api-token", url=proxy.url)
    with serving_app(app) as base_url:
        console = Console(base_url=base_url, database_url=proxy.url, app=app)
        answer = console.client().post(
            "/console/login", data={"name": OPERATOR, "password": PASSWORD}
        )
    assert answer.status_code == 303, answer.text


def test_the_action_log_says_each_action_and_what_it_came_to_in_words(console, conn):
    """The log showed the names in the code ("bulk_replay", "still_parked") and made every
    underscore of a result a space, the ids in its reason too ("payment pay second000001: a
    refund of ..."): it says each in words, and a reason as it was written."""
    from payhooks.refunding import refunds
    from tests.console.test_console_lists import confirmed_form, listed

    delivery, _ = parked_delivery(console)  # no checkout: still parked when replayed
    buy = purchase(conn)
    send(console, buy.captured())
    send(console, buy.captured(payment_id="pay_second000001"))  # paid twice: a refund is due
    with psycopg.connect(console.database_url, autocommit=True) as db:
        refunds.request(db, "razorpay", "pay_second000001", 10_000, key="ticket-7",
                        captured_paise=49_900, reason="a person's", requested_by="api")  # fmt: skip
        db.execute("UPDATE payhooks_refunds SET state = 'processed'")  # its webhook not come yet
    client = console.logged_in()
    page = client.get("/console/parked/bulk", params={"gateway": "razorpay"}).text
    client.post("/console/parked/bulk", data={"csrf": csrf_of(page), **confirmed_form(page)})
    client.post("/console/parked/replay", data={"csrf": csrf_of(page), "provider": "razorpay",
                "event_id": delivery.headers["x-razorpay-event-id"]})  # fmt: skip
    client.post("/console/payments/refund", data={"csrf": csrf_of(page), "provider": "razorpay",
                "payment_id": "pay_second000001", "confirm": "yes"})  # fmt: skip
    log = [" ".join(row.split()) for row in listed(client.get("/console/actions").text,
                                                    "action-log")]  # fmt: skip
    refunded, replayed, bulk, replayed_in_bulk = log
    assert " refund " in refunded and "refund too large: payment pay_second000001: a refund" in (
        refunded
    )
    assert " replay " in replayed and replayed.endswith(" still parked")
    assert " replay many at once " in bulk and bulk.endswith("1 replayed, 0 applied, 0 left")
    assert replayed_in_bulk.endswith(" still parked")
    assert not any("_parked" in row or "bulk_" in row for row in log), log


def test_a_settle_that_found_nothing_to_settle_says_so_in_the_log(console, conn):
    """A second Settle of a delivery settled already (a stale tab, a colleague first) was
    logged "not a mismatch", of a delivery parked for its amount: the log says it found
    nothing parked to settle."""
    from tests.console.test_console_lists import listed

    delivery, _ = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    page = client.get("/console/parked").text
    form = {"csrf": csrf_of(page), "provider": "razorpay", "event_id": event_id,
            "note": "refunded in the dashboard"}  # fmt: skip
    for _ in range(2):
        client.post("/console/parked/settle", data=form)
    log = [" ".join(row.split()) for row in listed(client.get("/console/actions").text,
                                                    "action-log")]  # fmt: skip
    again, first = log
    assert first.endswith(" settled") and "not a mismatch" not in again
    assert again.endswith(" nothing to settle: not parked (applied, or settled already)"), again


def read_as_shown(page: str) -> str:
    """A page's words as a person reads them: its text and its options, never an address, a
    form's value or the page's style."""
    page = re.sub(r"<style>.*?</style>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_gateways_are_named_by_their_titles_wherever_a_person_reads_them(console, conn):
    """Banners, notices, headings, lists and timelines wrote "razorpay", "payu", "phonepe":
    each gateway is written as its title ("Razorpay", "PayU", "PhonePe"); its name stays in
    addresses and forms' values."""
    buy = purchase(conn)
    send(console, buy.captured())
    payu = purchase(conn, Provider.PAYU)
    send(console, payu.captured())
    delivery, reference = parked_delivery(console)
    logged(console, 3)
    log_lines(conn, "razorpay", 503, "database_unavailable", 3)
    log_lines(conn, "phonepe", 401, "signature_mismatch", 5)
    client = console.logged_in()
    home = client.get("/console/").text
    shown = read_as_shown(home)
    assert "Razorpay: 3 of 5 deliveries in the last hour were answered 5xx" in shown
    assert "PhonePe: 5 of 5 deliveries in the last hour failed the signature check" in shown
    assert "See Razorpay's 5xx answers" in shown and "See PhonePe's signature failures" in shown
    assert "gateways served: Razorpay, Cashfree, PayU, PhonePe, Juspay" in shown
    assert "<strong>PayU</strong>" in home and 'data-provider="payu"' in home
    event_id = delivery.headers["x-razorpay-event-id"]
    replayed = client.post("/console/parked/replay", data={
        "csrf": csrf_of(home), "provider": "razorpay", "event_id": event_id})  # fmt: skip
    notice = read_as_shown(client.get(replayed.headers["location"]).text)
    assert f"Razorpay delivery {event_id} : Replayed: it is still parked" in notice
    [(payu_event,)] = rows(
        console, "SELECT event_id FROM processed_webhooks WHERE provider = 'payu'"
    )
    pages = {
        "/console/": home,
        "/console/parked": None,
        "/console/deliveries": None,
        "/console/payments": None,
        "/console/payments?gateway=payu": None,
        f"/console/orders/razorpay/{buy.reference}": None,
        f"/console/orders/razorpay/{reference}": None,
        f"/console/carts/{payu.cart_id}": None,
        f"/console/deliveries/payu/{quote(payu_event, safe='')}": None,
        f"/console/search?q={reference}": None,
        "/console/actions": None,
        "/console/disputes": None,
        "/console/settlements": None,
        "/console/parked/bulk?gateway=phonepe": None,
    }
    lower = re.compile(r"\b(razorpay|cashfree|payu|phonepe|juspay)\b(?![._/-]\w)")
    for address, page in pages.items():
        if page is None:
            got = client.get(address, follow_redirects=True)
            assert got.status_code == 200, (address, got.status_code)
            page = got.text
        answer = page
        text = read_as_shown(answer.split("<main", 1)[1].split('id="body"')[0])
        assert not lower.findall(text), (address, lower.findall(text), text)

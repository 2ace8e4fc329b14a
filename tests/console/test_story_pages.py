"""Reading one payment's story in the console, over real HTTP: a delivery and its retries as
one entry, an amount mismatch drawn as a warning with both amounts, raw bodies laid out for a
person and linked back to their timeline."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import quote

import pytest

from payhooks.events import Provider
from tests import loopback
from tests.console.conftest import csrf_of
from tests.console.conftest import said as location
from tests.console.test_console_http import logged, parked_delivery, rows, send
from tests.factories import purchase
from tests.reconcile.conftest import paid_at_gateway


def entries(page: str) -> list[str]:
    """The timeline's entries, each as its text."""
    timeline = page[page.index('<ol class="timeline') :]
    items = re.findall(r'<li class="(\w+)" data-kind="(\w+)">(.*?)</li>\s*(?=<li class|</ol>)',
                       timeline, re.S)  # fmt: skip
    return [f"{tone} {kind} " + " ".join(re.sub(r"<[^>]+>", " ", body).split())
            for tone, kind, body in items]  # fmt: skip


def body_of(page: str) -> str:
    """The delivery page's body as the operator reads it."""
    shown = re.search(r'<pre class="card" id="body">(.*?)</pre>', page, re.S)
    assert shown, "no body on the page"
    return html.unescape(re.sub(r"<[^>]+>", "", shown.group(1)))


def test_a_delivery_and_its_retries_are_one_entry_listing_each_attempt(console, conn):
    buy = purchase(conn)
    capture = buy.captured()
    answers = [send(console, capture).json()["status"] for _ in range(3)]
    assert answers == ["processed", "duplicate", "duplicate"]
    logged(console, 3)
    page = console.logged_in().get(f"/console/carts/{buy.cart_id}").text
    deliveries = [e for e in entries(page) if " delivery " in e[:20]]
    assert len(deliveries) == 1, deliveries
    [entry] = deliveries
    assert "attempts 3, the last answered HTTP 200 duplicate" in entry
    assert "3 attempts of this delivery" in entry
    assert entry.count("HTTP 200 duplicate") == 3  # the last attempt, and the two in the list
    assert entry.startswith("good delivery")


def test_the_delivery_page_lists_every_attempt_of_its_key(console, conn):
    buy = purchase(conn)
    capture = buy.captured()
    for _ in range(2):
        send(console, capture)
    logged(console, 2)
    [(event_id,)] = rows(console, "SELECT event_id FROM processed_webhooks")
    page = console.logged_in().get(f"/console/deliveries/razorpay/{quote(event_id)}").text
    table = page[page.index('id="attempts"') : page.index("</table>", page.index('id="attempts"'))]
    answers = re.findall(r"HTTP \d+ \w+", table)
    assert answers == ["HTTP 200 processed", "HTTP 200 duplicate"]


def test_an_amount_mismatch_is_a_warning_with_both_amounts(console, conn):
    buy = purchase(conn)
    assert send(console, buy.captured(amount_paise=100)).json()["status"] == "parked"
    logged(console, 1)
    page = console.logged_in().get(f"/console/carts/{buy.cart_id}").text
    [entry] = [e for e in entries(page) if " delivery " in e[:20]]
    assert entry.startswith("warn delivery")
    assert "amount mismatch captured ₹1.00, expected ₹499.00" in entry


def test_a_capture_the_shop_flagged_for_its_amount_is_not_drawn_as_a_success(console, conn):
    """A checkout from before the expectations: the shop applies the capture and flags it."""
    buy = purchase(conn)
    conn.execute("DELETE FROM payhooks_expectations")
    assert send(console, buy.captured(amount_paise=100)).json()["status"] == "processed"
    [(flags,)] = rows(console, "SELECT flags FROM payments")
    assert "amount_mismatch" in flags
    logged(console, 1)
    page = console.logged_in().get(f"/console/carts/{buy.cart_id}").text
    found = entries(page)
    delivery = next(e for e in found if " delivery " in e[:20])
    payment = next(e for e in found if e.split()[1] == "payment")
    for entry in (delivery, payment):
        assert entry.startswith("warn "), entry
        assert "amount mismatch captured ₹1.00, expected ₹499.00" in entry


def test_the_core_timeline_draws_an_amount_mismatch_as_a_warning(console, conn):
    buy = purchase(conn)
    send(console, buy.captured(amount_paise=100))
    page = console.logged_in().get(f"/console/orders/razorpay/{buy.reference}").text
    row = re.search(r'<tr class="parked warn">(.*?)</tr>', page, re.S)
    assert row, "the mismatched delivery's row is not drawn as a warning"
    text = " ".join(re.sub(r"<[^>]+>", " ", row.group(1)).split())
    assert "amount mismatch: captured ₹1.00 INR, expected ₹499.00 INR" in text


@pytest.mark.parametrize(("status", "verdict"), [(None, "confirmed"), ("FAILED", "refuted")])
def test_what_the_status_api_said_of_a_callback_names_its_kind_in_words(
    console, conn, rig, status, verdict
):
    """A PhonePe capture callback the status API confirmed, or refuted: the order's page and
    the cart's story say so with the kind as the console writes kinds ("payment captured"),
    not its name in code."""
    buy = purchase(conn, Provider.PHONEPE)
    assert send(console, buy.captured()).json()["status"] == "confirming"
    paid_at_gateway(rig.api, buy, status)
    rig.run()
    client = console.logged_in()
    for address in (f"/console/orders/phonepe/{buy.reference}", f"/console/carts/{buy.cart_id}"):
        text = " ".join(re.sub(r"<[^>]+>", " ", html.unescape(client.get(address).text)).split())
        assert f"{verdict}" in text and f"the payment captured of {buy.payment_id}" in text
        assert "payment_captured" not in text, address


def test_a_json_body_is_indented_and_links_back_to_its_timeline(console, conn):
    buy = purchase(conn)
    send(console, buy.captured())
    [(event_id, body)] = rows(console, "SELECT event_id, body FROM processed_webhooks")
    page = console.logged_in().get(f"/console/deliveries/razorpay/{quote(event_id)}").text
    shown = body_of(page)
    assert shown == json.dumps(json.loads(bytes(body)), indent=2, ensure_ascii=False)
    assert '\n  "event": "payment.captured",' in shown
    assert f'href="/console/carts/{buy.cart_id}" id="story-link"' in page


def test_a_form_body_reads_one_field_a_line():
    from payhooks.console.formats import readable_body

    body = b"txnid=order_1&amount=499.00&productinfo=Tea+and+biscuits&email=a%40example.com&udf1="
    assert readable_body(body).splitlines() == [
        "txnid=order_1",
        "amount=499.00",
        "productinfo=Tea and biscuits",
        "email=a@example.com",
        "udf1=",
    ]


def test_a_body_neither_json_nor_a_form_is_shown_as_it_came():
    from payhooks.console.formats import readable_body

    assert readable_body(b"not json, not a form") == "not json, not a form"
    assert readable_body(b"{broken") == "{broken"


def test_only_long_tokens_may_break_anywhere_and_words_stay_whole():
    from payhooks.console.formats import breakable

    shown = str(breakable("paid by <card> " + "a" * 40 + " today"))
    assert shown == ('paid by &lt;card&gt; <span class="long">' + "a" * 40 + "</span> today")


def test_pages_never_break_all(console):
    page = console.logged_in().get("/console/").text
    assert "break-all" not in page
    assert re.search(r"\.long, h1, dd, ol\.timeline \.title \{ overflow-wrap: anywhere; \}", page)
    assert re.search(r"pre \{[^}]*overflow-wrap", page) is None


def test_a_payu_body_on_its_page_reads_one_field_a_line(console, conn):
    buy = purchase(conn, Provider.PAYU)
    send(console, buy.captured())
    [(event_id,)] = rows(console, "SELECT event_id FROM processed_webhooks")
    page = console.logged_in().get(f"/console/deliveries/payu/{quote(event_id, safe='')}").text
    body = body_of(page)
    assert f"txnid={buy.reference}" in body.splitlines()
    assert "&" not in body.split("\n")[0]


# --- search ----------------------------------------------------------------------------------


def cart_for(conn, email: str) -> str:
    from payhooks.service.shop import carts
    from tests.factories import product

    item = carts.LineItem(sku=product(conn).sku, quantity=1)
    return carts.create_cart(conn, email, [item]).cart_id


def test_the_search_box_keeps_the_query_once_a_timeline_opens(console, conn):
    buy = purchase(conn)
    client = console.logged_in()
    answer = client.get("/console/search", params={"q": f" {buy.cart_id} "})
    assert answer.headers["location"] == f"/console/carts/{buy.cart_id}?q={buy.cart_id}"
    page = client.get(answer.headers["location"]).text
    assert f'name="q" value="{buy.cart_id}"' in page


def test_the_start_of_an_email_finds_its_cart(console, conn):
    cart_id = cart_for(conn, "alice.5e9f0c@example.com")
    cart_for(conn, "bob@example.com")
    answer = console.logged_in().get("/console/search", params={"q": "Alice.5e"})
    assert answer.headers["location"] == f"/console/carts/{cart_id}?q=Alice.5e"


def test_the_start_of_an_email_shared_by_carts_lists_each_with_its_email(console, conn):
    first = cart_for(conn, "alice.5e9f0c@example.com")
    second = cart_for(conn, "alice.5eaa@example.org")
    page = console.logged_in().get("/console/search", params={"q": "alice.5e"}).text
    assert "2 results" in page
    for cart_id in (first, second):
        assert cart_id in page
    assert "(alice.5eaa@example.org)" in page and "start of a customer email" in page


def test_a_prefix_shorter_than_the_minimum_finds_nothing_and_says_why(console, conn):
    cart_for(conn, "alice.5e9f0c@example.com")
    page = console.logged_in().get("/console/search", params={"q": "ali"}).text
    assert "0 results" in page
    hint = html.unescape(page[page.index('id="search-hint"') :])
    assert "customer email" in hint and "bank reference (UTR/RRN)" in hint
    assert "dispute id" in hint
    assert "by its first 4 characters or more" in hint


def test_like_wildcards_in_a_prefix_are_taken_literally(console, conn):
    cart_for(conn, "alice.5e9f0c@example.com")
    client = console.logged_in()
    for query in ("alic%", "a___e", "%lice"):
        assert "0 results" in client.get("/console/search", params={"q": query}).text, query
    under = cart_for(conn, "a_b_c@example.com")
    opened = client.get("/console/search", params={"q": "a_b_"}).headers["location"]
    assert opened.startswith(f"/console/carts/{under}?")


def test_the_email_prefix_is_an_index_range_on_a_filled_table(conn):
    from payhooks.service.console import search

    conn.execute(
        "INSERT INTO carts (id, customer_email, amount_paise, currency, status)"
        " SELECT 'cart_fill_' || n, 'user' || n || '@example.com', 100, 'INR', 'open'"
        " FROM generate_series(1, 20000) n"
    )
    conn.execute(  # every cart but the open ones has its checkout, as in a running shop
        "INSERT INTO checkouts (provider, gateway_order_id, cart_id)"
        " SELECT 'razorpay', 'order_fill_' || n, 'cart_fill_' || n"
        " FROM generate_series(1, 20000) n WHERE n % 10 <> 0"
    )
    conn.execute("ANALYZE carts")
    conn.execute("ANALYZE checkouts")
    [(plan,)] = conn.execute(
        "EXPLAIN (FORMAT JSON) " + search._EMAIL_PREFIX,
        {"prefix": search._like_prefix("user1234"), "limit": 50},
    ).fetchall()
    text = json.dumps(plan)
    assert "carts_customer_email_prefix" in text and "Seq Scan" not in text


# --- notices ---------------------------------------------------------------------------------


def test_the_notice_after_a_replay_names_the_delivery_and_links_to_it(console, conn):
    from tests.console.conftest import csrf_of
    from tests.console.test_console_http import parked_delivery

    delivery, _ = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    form = {"csrf": csrf_of(client.get("/console/parked").text), "provider": "razorpay",
            "event_id": event_id}  # fmt: skip
    answer = client.post("/console/parked/replay", data=form)
    notice = re.search(r'role="status">(.*?)</div>', client.get(answer.headers["location"]).text)
    assert notice, "no notice after the replay"
    text = " ".join(re.sub(r"<[^>]+>", " ", notice.group(1)).split())
    assert text.startswith(f"Razorpay delivery {event_id} : Replayed: it is still parked")
    assert f'href="/console/deliveries/razorpay/{event_id}"' in notice.group(1)


def signed_notice(client, **fields: str) -> str:
    """A notice's query string signed for ``client``'s session, as an action's redirect signs it."""
    from types import SimpleNamespace

    from payhooks.console import pages
    from payhooks.console.auth import Session
    from tests.console.conftest import OPERATOR, csrf_of

    token = csrf_of(client.get("/console/parked").text)
    session = Session(operator=OPERATOR, csrf_token=token)
    request = SimpleNamespace(state=SimpleNamespace(session=session))
    return pages.signed(request, fields)  # type: ignore[arg-type]


def test_a_notice_names_no_delivery_of_a_gateway_it_does_not_know(console):
    client = console.logged_in()
    notice = signed_notice(client, notice="applied", provider="nope", event_id="evt_x")
    page = client.get(f"/console/parked?{notice}").text
    assert "Replayed: the delivery was applied." in page and "evt_x" not in page


@pytest.mark.parametrize(
    "query",
    [
        "notice=applied&provider=razorpay&event_id=anything",  # no signature
        "notice=applied&provider=razorpay&event_id=anything&sig=" + "0" * 64,
    ],
)
def test_a_notice_made_by_a_link_is_not_shown(console, query):
    """Only an action's own redirect makes a page say what was done: a link cannot."""
    client = console.logged_in()
    for address in ("/console/parked", "/console/dead", "/console/", "/console/settlements"):
        page = client.get(f"{address}?{query}").text
        assert 'role="status"' not in page and "Replayed" not in page, address
    bulk = client.get("/console/parked/bulk?replayed=40&applied=40").text
    assert "This submit replayed" not in bulk


def test_a_notice_signed_for_another_session_or_altered_is_not_shown(console):
    mine, theirs = console.logged_in(), console.logged_in()
    notice = signed_notice(theirs, notice="applied", provider="razorpay", event_id="evt_1")
    assert "Replayed" not in mine.get(f"/console/parked?{notice}").text
    assert "Replayed" in theirs.get(f"/console/parked?{notice}").text
    altered = notice.replace("evt_1", "evt_2")
    assert "Replayed" not in theirs.get(f"/console/parked?{altered}").text


def test_the_parked_page_says_what_a_candidate_is(console):
    page = console.logged_in().get("/console/parked").text
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "same amount and gateway" not in text
    assert (
        "the candidate shown is the cart named in the delivery's body, else an open cart of the "
        "same amount, opened in the 24 hours before it, that is not checked out with this "
        "gateway already" in text
    )


# --- parked deliveries -----------------------------------------------------------------------


def parked_row(page: str, reference: str) -> str:
    found = re.search(rf"<tr>(?:(?!</tr>).)*{reference}.*?</tr>", page, re.S)
    assert found, f"no parked row for {reference}"
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split()))


def test_a_parked_row_shows_its_amount_and_payment_id(console):
    from tests.console.test_console_http import parked_delivery

    _, reference = parked_delivery(console)
    row = parked_row(console.logged_in().get("/console/parked").text, reference)
    assert "₹499.00" in row and "pay_parked0001" in row
    assert "none found" in row  # no open cart of that amount


@pytest.mark.parametrize("headers", ["[1, 2]", "42", "null"])
def test_a_parked_row_that_does_not_read_is_shown_unread_and_the_others_are_listed(
    console, conn, headers
):
    """A stored delivery whose headers are no JSON object (the worker's parked pass already
    goes on past it) raised as the page read it, and the page listed none of the others; JSON
    ``null`` read as no headers at all, so its amount was shown and its replay failed."""
    from tests.console.test_console_lists import parked_for

    for n in range(3):
        parked_for(console, f"order_UNREAD{n:08d}", f"pay_unread{n:06d}")
    conn.execute(
        "UPDATE processed_webhooks SET headers = %s::jsonb WHERE payment_id = 'pay_unread000001'",
        (headers,),
    )
    page = console.logged_in().get("/console/parked").text
    for n in (0, 2):
        assert "₹499.00" in parked_row(page, f"order_UNREAD{n:08d}")
    odd = parked_row(page, "order_UNREAD00000001")
    assert "₹499.00" not in odd and "unknown" in odd and "pay_unread000001" in odd
    assert "amount unknown: its stored headers are not a JSON object" in odd


@pytest.mark.parametrize("headers", ["[1, 2]", "42", "null"])
def test_a_parked_delivery_that_does_not_read_says_so_on_its_page_and_when_replayed(
    console, conn, headers
):
    """Its page answered a bare "Internal Server Error", and its replay said the handler
    failed, though no handler ran: the stored record does not read."""
    from tests.console.test_console_lists import parked_for

    parked_for(console, "order_UNREAD00000009", "pay_unread000009")
    conn.execute("UPDATE processed_webhooks SET headers = %s::jsonb", (headers,))
    provider, event_id = conn.execute(
        "SELECT provider, event_id FROM processed_webhooks WHERE payment_id = 'pay_unread000009'"
    ).fetchone()
    client = console.logged_in()
    shown = client.get(f"/console/deliveries/{provider}/{event_id}")
    assert shown.status_code == 500
    assert "no longer reads: its stored headers are not a JSON object" in shown.text
    parked = client.get("/console/parked").text
    answer = client.post("/console/parked/replay", data={
        "csrf": csrf_of(parked), "provider": provider, "event_id": event_id})  # fmt: skip
    assert location(answer).startswith("/console/parked?notice=unreadable&")
    said = client.get(answer.headers["location"]).text
    assert "cannot be read any more (its stored headers are not a JSON object)" in said


def test_an_open_cart_of_the_same_amount_is_the_candidate(console, conn):
    from tests.console.test_console_http import parked_delivery

    cart_id = cart_for(conn, "carol@example.com")  # ₹499.00, opened just before, no checkout
    _, reference = parked_delivery(console)
    page = console.logged_in().get("/console/parked").text
    row = parked_row(page, reference)
    assert f"cart {cart_id} same amount (₹499.00), opened 0 min before it" in row
    assert f'name="cart_id" required maxlength="64" size="12" value="{cart_id}"' in page


def test_a_cart_named_in_the_body_is_the_candidate_over_one_of_the_same_amount(console, conn):
    from payhooks.gateways import razorpay
    from payhooks.sim.gateway import Delivery
    from tests.factories import KEYS

    named = cart_for(conn, "dave@example.com")
    cart_for(conn, "erin@example.com")  # the same amount, opened later
    entity = {"id": "pay_named00001", "entity": "payment", "amount": 49_900, "currency": "INR",
              "status": "captured", "order_id": "order_NNNNNNNNNNNNNN",
              "notes": {"cart": named}}  # fmt: skip
    body = json.dumps({"event": "payment.captured", "payload": {"payment": {"entity": entity}}})
    headers = {"x-razorpay-signature": razorpay.sign(body.encode(), KEYS.razorpay),
               "x-razorpay-event-id": "evt_named00001"}  # fmt: skip
    delivery = Delivery(provider=Provider.RAZORPAY, body=body.encode(), headers=headers, label="n")
    assert send(console, delivery).json()["status"] == "parked"
    row = parked_row(console.logged_in().get("/console/parked").text, "order_NNNNNNNNNNNNNN")
    assert f"cart {named} named in the delivery's body" in row


def link_form(console, client, event_id: str, cart_id: str, **extra: str) -> dict[str, str]:
    from tests.console.conftest import csrf_of

    token = csrf_of(client.get("/console/parked").text)
    return {"csrf": token, "provider": "razorpay", "event_id": event_id, "cart_id": cart_id,
            **extra}  # fmt: skip


def test_linking_a_parked_delivery_to_a_cart_orders_it_once_and_is_logged(console, conn):
    from tests.console.conftest import OPERATOR
    from tests.console.test_console_http import parked_delivery

    cart_id = cart_for(conn, "carol@example.com")
    delivery, reference = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    form = link_form(console, client, event_id, cart_id, confirm="yes")
    first = client.post("/console/parked/link", data=form)
    again = client.post("/console/parked/link", data=form)
    named = f"provider=razorpay&event_id={event_id}"
    assert location(first) == f"/console/parked?notice=applied&{named}"
    assert location(again) == f"/console/parked?notice=already_applied&{named}"
    assert rows(console, "SELECT cart_id FROM orders") == [(cart_id,)]
    assert rows(console, "SELECT provider, gateway_order_id FROM checkouts") == [
        ("razorpay", reference)
    ]
    done = "SELECT operator, action, target, result FROM payhooks_console_actions ORDER BY id"
    assert rows(console, done) == [
        (OPERATOR, "link", event_id, "linked"),
        (OPERATOR, "replay", event_id, "applied"),
        (OPERATOR, "link", event_id, "already_applied"),
    ]
    log = client.get("/console/actions").text
    assert f'href="/console/deliveries/razorpay/{event_id}"' in log


def test_a_link_whose_delivery_a_colleague_settles_meanwhile_leaves_the_cart_unchecked_out(
    console, conn
):
    """One operator's Link and another's Settle pressed together: the link checked the cart out
    under the delivery's reference, the settle ("refunded in the dashboard") landed before the
    link's replay, and the replay found nothing parked. The cart stayed checked out, and the
    gateway's next report of that payment (``order.paid``) placed an order for money the
    operator had recorded as refunded (console browser check). The link takes its checkout
    back; the next report is parked, as it is when the settle comes first."""
    from payhooks.console import actions as core_actions
    from payhooks.service.console import actions
    from payhooks.service.console.shop import _replay_with
    from tests.console.conftest import OPERATOR
    from tests.factories import ADAPTERS, GATEWAY

    cart_id = cart_for(conn, "dana@example.com")
    delivery, reference = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    replay = _replay_with(ADAPTERS)

    def settled_first(db, provider: str, key: str):  # the colleague's Settle wins the race
        core_actions.settle(db, provider=provider, event_id=key, note="refunded in the "
                            "dashboard", operator="ravi")  # fmt: skip
        return replay(db, provider, key)

    done = actions.link_parked(conn, settled_first, ADAPTERS, provider="razorpay",
                               event_id=event_id, cart_id=cart_id, operator=OPERATOR)  # fmt: skip
    assert done.done is not core_actions.Done.APPLIED, done
    assert rows(console, "SELECT gateway_order_id FROM checkouts") == []
    later = GATEWAY.razorpay("order.paid", payment_id="pay_parked0001", order_id=reference,
                             amount_paise=49_900)  # fmt: skip
    assert send(console, later).json()["status"] == "parked"
    assert rows(console, "SELECT count(*) FROM orders") == [(0,)]


def test_a_link_not_confirmed_does_nothing(console, conn):
    from tests.console.test_console_http import parked_delivery

    cart_id = cart_for(conn, "carol@example.com")
    delivery, _ = parked_delivery(console)
    client = console.logged_in()
    form = link_form(console, client, delivery.headers["x-razorpay-event-id"], cart_id)
    answer = client.post("/console/parked/link", data=form)
    assert "notice=not_confirmed" in answer.headers["location"]
    assert rows(console, "SELECT count(*) FROM checkouts") == [(0,)]
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]


def test_a_link_to_a_paid_or_unknown_cart_is_refused_and_says_why(console, conn):
    from tests.console.test_console_http import parked_delivery

    paid = purchase(conn)
    assert send(console, paid.captured()).json()["status"] == "processed"
    delivery, _ = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    for cart_id, said in ((paid.cart_id, "cart_taken"), ("cart_0000000000000000", "no_such_cart")):
        answer = client.post(
            "/console/parked/link",
            data=link_form(console, client, event_id, cart_id, confirm="yes"),
        )
        assert f"notice={said}" in answer.headers["location"], cart_id
        if said == "cart_taken":  # which of the three refusals (it listed all three, maybe)
            shown = client.get(answer.headers["location"]).text
            assert f"Nothing done: cart &#39;{paid.cart_id}&#39; is paid." in shown
    assert conn.execute(
        "SELECT outcome FROM processed_webhooks WHERE event_id = %s", (event_id,)
    ).fetchall() == [("parked",)]
    results = "SELECT action, result FROM payhooks_console_actions ORDER BY id"
    assert rows(console, results) == [
        ("link", f"cart_taken: cart '{paid.cart_id}' is paid"), ("link", "no_such_cart"),
    ]  # fmt: skip


def test_a_link_of_a_payment_of_another_amount_is_refused_and_leaves_the_cart_free(console, conn):
    """Linking checked the cart out under the parked payment's order whatever it paid: the
    replay then left it parked (another amount), and the cart, checked out under an order
    that never pays it, could not be checked out at that gateway again. A payment of another
    amount than the cart's is not linked, and the notice says both amounts."""
    from payhooks.console.formats import rupees
    from payhooks.service.shop import carts
    from tests.factories import GATEWAY

    cart_id = cart_for(conn, "carol@example.com")
    costs = conn.execute("SELECT amount_paise FROM carts WHERE id = %s", (cart_id,)).fetchone()[0]
    delivery = GATEWAY.razorpay("payment.captured", payment_id="pay_parked0002",
                                order_id="order_" + "Q" * 14, amount_paise=costs - 100)  # fmt: skip
    assert send(console, delivery).json()["status"] == "parked"
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    answer = client.post(
        "/console/parked/link", data=link_form(console, client, event_id, cart_id, confirm="yes")
    )
    assert "notice=other_amount" in answer.headers["location"]
    shown = html.unescape(client.get(answer.headers["location"]).text)
    assert (
        f"Nothing done: the payment paid {rupees(costs - 100)}; the cart costs {rupees(costs)}."
        in shown
    )
    assert rows(console, "SELECT count(*) FROM checkouts") == [(0,)]
    carts.checkout(conn, cart_id, Provider.RAZORPAY, "order_" + "R" * 14)  # free for its own


def test_a_candidate_of_the_same_amount_is_an_index_range_on_a_filled_table(conn):
    from datetime import UTC, datetime

    from payhooks.service.console import actions

    conn.execute(
        "INSERT INTO carts (id, customer_email, amount_paise, currency, status, created_at)"
        " SELECT 'cart_fill_' || n, 'user' || n || '@example.com', 100 + n % 500, 'INR',"
        " CASE WHEN n % 10 = 0 THEN 'open' ELSE 'paid' END, now() - n * interval '2 minutes'"
        " FROM generate_series(1, 20000) n"
    )
    conn.execute(  # every cart but the open ones has its checkout, as in a running shop
        "INSERT INTO checkouts (provider, gateway_order_id, cart_id)"
        " SELECT 'razorpay', 'order_fill_' || n, 'cart_fill_' || n"
        " FROM generate_series(1, 20000) n WHERE n % 10 <> 0"
    )
    conn.execute("ANALYZE carts")
    conn.execute("ANALYZE checkouts")
    now = datetime.now(UTC)
    params = {"since": now - actions.WINDOW, "until": now, "amount": 110, "provider": "razorpay"}
    [(plan,)] = conn.execute("EXPLAIN (FORMAT JSON) " + actions._SAME_AMOUNT, params).fetchall()
    text = json.dumps(plan)
    assert "carts_amount_created_at" in text, text
    assert '"Node Type": "Seq Scan"' not in text, text


def test_two_links_released_together_make_one_order(console, conn):
    import threading

    from tests.console.test_console_http import parked_delivery

    cart_id = cart_for(conn, "carol@example.com")
    delivery, _ = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    client = console.logged_in()
    form = link_form(console, client, event_id, cart_id, confirm="yes")
    barrier, answers = threading.Barrier(2), []

    def click() -> None:
        with loopback.Client(base_url=console.base_url, cookies=client.cookies) as double:
            barrier.wait()
            answers.append(location(double.post("/console/parked/link", data=form)))

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    named = f"provider=razorpay&event_id={event_id}"
    assert sorted(answers) == [
        f"/console/parked?notice=already_applied&{named}",
        f"/console/parked?notice=applied&{named}",
    ]
    assert rows(console, "SELECT cart_id FROM orders") == [(cart_id,)]


def test_a_copy_with_another_body_is_said_not_applied_not_refused(console, conn):
    """Such a copy is answered 200 duplicate (or taken under a key of its own): nothing was
    refused, and the timeline said "refused"."""
    from dataclasses import replace

    from payhooks.gateways.razorpay import sign
    from tests.factories import KEYS

    buy = purchase(conn)
    capture = buy.captured()
    assert send(console, capture).json()["status"] == "processed"
    body = capture.body + b" "
    secret = KEYS.env()["PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS"]
    headers = {**capture.headers, "x-razorpay-signature": sign(body, secret)}
    assert send(console, replace(capture, body=body, headers=headers)).status_code == 200
    page = console.logged_in().get(f"/console/orders/razorpay/{buy.reference}").text
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())
    assert "1 copy with another body, not applied under this key" in text, text
    assert "another body refused" not in text


@pytest.mark.parametrize("address", ["/console/carts/{}", "/console/references/razorpay/{}"])
def test_a_cart_or_reference_not_found_is_said_without_repeating_the_address(console, address):
    """A link's text was shown back whole: a page wider than any screen for a long one, and
    any sentence a link's author chose inside the console ("cart 'Call +91 ...' not found")."""
    spoof = "Your refund is approved. Call +91 99999 00000 to claim it " + "x" * 200
    answer = console.logged_in().get(address.format(quote(spoof, safe="")))
    assert answer.status_code == 404
    assert "Call +91" not in answer.text and "x" * 50 not in answer.text
    assert "No such" in answer.text and "is recorded" in answer.text


def test_a_utr_found_after_the_purge_is_shown_on_its_cart_which_links_to_its_order(console, conn):
    """After the purge a search by UTR (found from the payment's kept record) opened the cart,
    whose page showed the UTR nowhere (it was on the purged delivery's entry alone) and did not
    link to the gateway order's page, which shows it."""
    from payhooks.operations import retention
    from payhooks.sim.gateway import bank_reference
    from tests.console.test_console_lists import listed

    buy = purchase(conn)
    assert send(console, buy.captured()).json()["status"] == "processed"
    logged(console, 1)
    conn.execute("UPDATE processed_webhooks SET processed_at = now() - interval '100 days'")
    conn.execute("UPDATE payhooks_deliveries SET received_at = now() - interval '100 days'")
    retention.purge(conn, 90)
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (0,)
    utr = bank_reference(buy.payment_id)
    client = console.logged_in()
    found = client.get("/console/search", params={"q": utr})
    assert found.headers["location"] == f"/console/carts/{buy.cart_id}?q={utr}"
    page = client.get(found.headers["location"]).text
    [row] = listed(page, "story-payments")
    assert buy.payment_id in row and utr in row, row
    order = f"/console/orders/razorpay/{buy.reference}"
    table = page.split('id="story-payments"', 1)[1].split("</table>", 1)[0]
    assert f'href="{order}"' in table
    assert utr in listed(client.get(order).text, "payments")[0]


@pytest.mark.parametrize("headers", ["[1, 2]", "null"])
def test_a_parked_delivery_that_does_not_read_is_not_linked_and_the_notice_says_why(
    console, conn, headers
):
    """Link and replay checked the cart out under the delivery's reference, then found the
    stored record unreadable and said only "Cannot replay": the cart stayed checked out with
    this gateway for a delivery that can never apply (refused to any other delivery as taken),
    and the notice did not say it was. Nothing is linked now, and the notice says why."""
    from tests.console.test_console_http import parked_delivery

    cart_id = cart_for(conn, "carol@example.com")
    delivery, _ = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    conn.execute("UPDATE processed_webhooks SET headers = %s::jsonb", (headers,))
    client = console.logged_in()
    answer = client.post(
        "/console/parked/link", data=link_form(console, client, event_id, cart_id, confirm="yes")
    )
    assert rows(console, "SELECT count(*) FROM checkouts") == [(0,)]
    assert rows(console, "SELECT count(*) FROM payhooks_expectations") == [(0,)]
    assert location(answer).startswith("/console/parked?notice=not_replayable&")
    page = client.get(answer.headers["location"]).text
    notice = re.search(r'<div class="card notice" role="status">(.*?)</div>', page, re.S)
    assert notice, "no notice"
    said = html.unescape(" ".join(re.sub(r"<[^>]+>", " ", notice.group(1)).split()))
    assert "Not linked" in said and "the cart is left as it was" in said, said
    assert "its stored headers are not a JSON object" in said, said
    done = "SELECT action, result FROM payhooks_console_actions ORDER BY id"
    assert rows(console, done) == [
        ("link", "not_replayable: its stored headers are not a JSON object")
    ]


def test_a_parked_refund_is_offered_no_link_and_linking_it_checks_out_no_cart(console, conn):
    """A refund of a payment never taken, parked: the Parked page offered it Link and replay as
    a capture, and linking it checked an unrelated cart out under the refund's order and
    recorded the refund as the cart's payment (the cart then refused its own checkout). A
    refund pays no cart: no link is offered, and one asked is refused, the cart left as it was;
    the docs say to settle it."""
    from tests.console.test_console_http import send
    from tests.factories import GATEWAY

    cart_id = cart_for(conn, "carol@example.com")
    refund = GATEWAY.razorpay("refund.processed", payment_id="pay_refundonly0001",
                              order_id="order_refundonly01", amount_paise=49_900,
                              refund_id="rfnd_refundonly01")  # fmt: skip
    assert send(console, refund).json()["status"] == "parked"
    event_id = refund.headers["x-razorpay-event-id"]
    client = console.logged_in()
    page = client.get("/console/parked").text
    row = page.split(event_id, 1)[1].split("</tr>", 1)[0]
    assert "Link and replay" not in row
    # nor a candidate: an unrelated open cart of the refund's amount was shown as the cart it
    # might belong to
    assert cart_id not in row and "none found" not in row
    answer = client.post(
        "/console/parked/link", data=link_form(console, client, event_id, cart_id, confirm="yes")
    )
    assert location(answer).startswith("/console/parked?notice=not_a_payment&")
    assert rows(console, "SELECT count(*) FROM checkouts") == [(0,)]
    assert rows(console, "SELECT outcome FROM processed_webhooks") == [("parked",)]


def test_an_orders_page_links_back_to_its_cart(console, conn):
    """A cart's payments link to their gateway order's page (the core's), which had no link
    back: the operator who followed it lost the cart, its order and its emails. A gateway
    order no checkout names (a parked capture's) links to no cart."""
    buy = purchase(conn)
    assert send(console, buy.captured()).json()["status"] == "processed"
    client = console.logged_in()
    page = client.get(f"/console/orders/razorpay/{buy.reference}").text
    found = re.search(r'<p class="card" id="elsewhere">(.*?)</p>', page, re.S)
    assert found, "the order's page names no cart"
    assert f'<a href="/console/carts/{buy.cart_id}" id="elsewhere-link">' in found.group(1)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())
    assert text.startswith(f"The shop's checkout of this order is cart {buy.cart_id}")
    _, reference = parked_delivery(console)
    alone = client.get(f"/console/orders/razorpay/{reference}").text
    assert 'id="elsewhere"' not in alone


def test_a_payment_refunded_in_part_says_so_beside_its_status(console, conn):
    """A capture of ₹499.00 and a refund of ₹100.00: the cart's Payments table read
    ``refunded`` (the first design's word for a refund in part or in full, which the API keeps)
    and an operator took the customer's money for all returned (console check). It says
    ``refunded (in part)`` until the refunds reach what was paid, then ``refunded``."""
    from tests.factories import GATEWAY

    buy = purchase(conn)
    send(console, buy.captured())
    [(payment_id, order_id)] = rows(
        console, "SELECT payment_id, gateway_order_id FROM payhooks_payments"
    )

    def refunded(refund_id: str, paise: int) -> str:
        refund = GATEWAY.razorpay("refund.processed", payment_id=payment_id, order_id=order_id,
                                  amount_paise=49_900, refund_id=refund_id,
                                  refund_amount_paise=paise)  # fmt: skip
        assert send(console, refund).json()["status"] == "processed"
        page = console.logged_in().get(f"/console/carts/{buy.cart_id}").text
        row = page.split(f"<code>{payment_id}</code>", 1)[1].split("</tr>", 1)[0]
        status = row.split('data-label="status">', 1)[1].split("</td>", 1)[0]
        return html.unescape(re.sub(r"<[^>]+>", "", status))

    assert refunded("rfnd_part00000001", 10_000) == "refunded (in part)"
    assert refunded("rfnd_rest00000001", 39_900) == "refunded"

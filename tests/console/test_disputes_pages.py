"""The console's disputes over real HTTP (the reference service, its shop behind it): disputes
sent to the webhook endpoint as the gateways send them, the open ones listed by deadline with
the gateway's dashboard, the cart's page telling the dispute and its order marked."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import pytest

from payhooks.events import Provider
from payhooks.sim.deliveries import Disputed
from payhooks.sim.gateways import simulator
from tests.console.conftest import Console
from tests.console.test_console_http import send
from tests.factories import GATEWAY, Purchase, purchase

NOW = datetime.now(UTC).replace(microsecond=0)


def dispute(console: Console, buy: Purchase, what: str, dispute_id: str, due: datetime,
            minute: int = 0) -> str:  # fmt: skip
    """The gateway's report that ``buy``'s payment's dispute stands ``what``: its answer."""
    told = Disputed(what=what, dispute_id=dispute_id, payment_id=buy.payment_id,
                    reference=buy.reference, amount_paise=buy.amount_paise,
                    respond_by=int(due.timestamp()),
                    reported_at=int(NOW.timestamp()) + minute * 60)  # fmt: skip
    build = simulator(buy.provider).dispute_delivery
    assert build is not None
    answer = send(console, build(GATEWAY, told))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["status"])


def paid(console: Console, conn, provider: Provider = Provider.RAZORPAY) -> Purchase:
    buy = purchase(conn, provider)
    assert send(console, buy.captured()).json()["status"] == "processed"
    return buy


def test_open_disputes_are_listed_by_deadline_with_the_gateways_dashboard(console, conn):
    later, sooner = paid(console, conn), paid(console, conn, Provider.CASHFREE)
    done = paid(console, conn)
    assert dispute(console, later, "opened", "disp_LATER", NOW + timedelta(days=6)) == "processed"
    assert dispute(console, sooner, "opened", "7700001", NOW + timedelta(hours=5)) == "processed"
    dispute(console, done, "opened", "disp_DONE", NOW + timedelta(days=1))
    dispute(console, done, "won", "disp_DONE", NOW + timedelta(days=1), minute=1)
    client = console.logged_in()
    page = client.get("/console/disputes")
    assert page.status_code == 200
    listed = re.findall(r"<code>(disp_\w+|7700001)</code>", page.text)
    assert listed == ["7700001", "disp_LATER"]  # the nearest deadline first; the won one gone
    assert 'href="https://merchant.cashfree.com/auth/login"' in page.text
    assert 'href="https://dashboard.razorpay.com/"' in page.text
    assert f'href="/console/carts/{sooner.cart_id}"' in page.text
    assert "answer needed" in page.text and "in 4 h" in page.text


def test_the_list_is_filtered_by_gateway_and_refuses_one_it_does_not_know(console, conn):
    buy = paid(console, conn)
    dispute(console, buy, "opened", "disp_F1", NOW + timedelta(days=2))
    client = console.logged_in()
    razorpay = client.get("/console/disputes", params={"gateway": "razorpay"})
    cashfree = client.get("/console/disputes", params={"gateway": "cashfree"})
    unknown = client.get("/console/disputes", params={"gateway": "stripe"})
    assert "disp_F1" in razorpay.text and "disp_F1" not in cashfree.text
    assert "No dispute is open." in cashfree.text
    assert unknown.status_code == 400
    assert "not one the console knows" in unknown.text


def test_a_dispute_past_its_deadline_says_it_is_overdue(console, conn):
    buy = paid(console, conn)
    dispute(console, buy, "opened", "disp_LATE", NOW - timedelta(hours=3))
    client = console.logged_in()
    page = client.get("/console/disputes")
    assert "overdue by 3 h" in page.text


def test_a_dispute_in_a_status_this_release_does_not_know_leaves_the_others_listed(console, conn):
    """A newer release's status (its migration let the table take it, then a rollback): read
    as a status payhooks knows, it raised as the page drew its row, and the Disputes page
    listed none; the alerts read from the same rows fell silent too."""
    from payhooks.operations.alerts import core_sources, observe

    odd, due = paid(console, conn), paid(console, conn)
    dispute(console, odd, "opened", "disp_ODD", NOW + timedelta(days=2))
    dispute(console, due, "opened", "disp_DUE", NOW + timedelta(hours=5))
    conn.execute("ALTER TABLE payhooks_disputes DROP CONSTRAINT payhooks_disputes_status_check")
    conn.execute("UPDATE payhooks_disputes SET status = 'escalated' WHERE dispute_id = 'disp_ODD'")
    page = console.logged_in().get("/console/disputes")
    assert page.status_code == 200
    assert re.findall(r"<code>(disp_\w+)</code>", page.text) == ["disp_DUE", "disp_ODD"]
    assert "escalated" in page.text and page.text.count("answer needed") == 1
    keys = {a.key for a in observe(conn, NOW, core_sources())}
    assert {"dispute_opened:razorpay:disp_ODD", "dispute_due:razorpay:disp_DUE"} <= keys


def test_the_carts_page_tells_its_dispute_and_its_order_is_marked(console, conn):
    buy = paid(console, conn)
    dispute(console, buy, "opened", "disp_CART", NOW + timedelta(days=3))
    dispute(console, buy, "lost", "disp_CART", NOW + timedelta(days=3), minute=1)
    assert dispute(console, buy, "opened", "disp_CART", NOW, minute=2) == "ignored"  # stale
    order = conn.execute("SELECT dispute, dispute_id FROM orders WHERE cart_id = %s",
                         (buy.cart_id,)).fetchone()  # fmt: skip
    assert order == ("lost", "disp_CART")
    client = console.logged_in()
    page = client.get(f"/console/carts/{buy.cart_id}")
    listed = client.get("/console/disputes")
    assert page.status_code == 200
    assert "disputed: lost" in page.text
    assert '<table class="card stacks" id="disputes">' in page.text and "disp_CART" in page.text
    assert "disp_CART" not in listed.text  # lost: no longer open
    found = client_search(console, "disp_CART")
    assert f"/console/carts/{buy.cart_id}" in found


def test_a_dispute_reported_before_its_capture_marks_the_order_once_it_is_placed(console, conn):
    """The storm's reordering: the dispute's reports arrive before the capture that makes the
    order (shop migration 0023), whichever path places it."""
    buy = purchase(conn)
    dispute(console, buy, "opened", "disp_EARLY", NOW + timedelta(days=3))
    dispute(console, buy, "lost", "disp_EARLY", NOW + timedelta(days=3), minute=1)
    assert send(console, buy.captured()).json()["status"] == "processed"
    order = conn.execute("SELECT dispute, dispute_id FROM orders WHERE cart_id = %s",
                         (buy.cart_id,)).fetchone()  # fmt: skip
    assert order == ("lost", "disp_EARLY")


def client_search(console: Console, text: str) -> str:
    """Where the console's search leads for ``text``."""
    client = console.logged_in()
    answer = client.get("/console/search", params={"q": text})
    return answer.headers.get("location", "") + answer.text


def test_a_dispute_of_a_payment_the_shop_never_took_is_parked_and_still_listed(console, conn):
    stranger = Purchase(provider=Provider.RAZORPAY, cart_id="none", reference="order_STRANGER",
                        amount_paise=100, sku="none", payment_id="pay_STRANGER01")  # fmt: skip
    assert dispute(console, stranger, "opened", "disp_X", NOW + timedelta(days=2)) == "parked"
    client = console.logged_in()
    listed = client.get("/console/disputes")
    assert "disp_X" in listed.text


def dispute_row(page: str, dispute_id: str) -> str:
    """The text of the row of ``page``'s disputes table telling ``dispute_id``."""
    found = re.search(rf"<tr[^>]*>(?:(?!</tr>).)*<code>{dispute_id}</code>.*?</tr>", page, re.S)
    assert found, f"no row for {dispute_id}"
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split()))


@pytest.mark.parametrize(
    ("provider", "dispute_id", "stands", "reason"),
    [
        (Provider.RAZORPAY, "disp_WORDS", "opened (chargeback phase; Razorpay: open)",
         "Goods or services not received, or received in part "
         "(goods_or_services_not_received_or_partially_received)"),
        (Provider.CASHFREE, "7700099", "opened (chargeback phase; Cashfree: CHARGEBACK_CREATED)",
         "Goods or Services Not Provided (4855)"),
    ],
)  # fmt: skip
def test_a_dispute_reads_the_same_on_the_disputes_page_and_its_carts_and_orders_pages(
    console, conn, provider, dispute_id, stands, reason
):
    """The Disputes page said "opened (chargeback)", the cart's and the order's pages "opened
    (open)" beside a phase column, and only the Disputes page took the underscores out of a
    gateway's reason code: one dispute, three wordings, and a code no person reads."""
    buy = paid(console, conn, provider)
    dispute(console, buy, "opened", dispute_id, NOW + timedelta(days=3))
    client = console.logged_in()
    pages = {
        "disputes": client.get("/console/disputes").text,
        "cart": client.get(f"/console/carts/{buy.cart_id}").text,
        "order": client.get(f"/console/orders/{provider.value}/{buy.reference}").text,
    }
    for name, page in pages.items():
        row = dispute_row(page, dispute_id)
        assert stands in row, (name, row)
        assert reason in row, (name, row)

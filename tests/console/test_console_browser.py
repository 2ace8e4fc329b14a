"""The console as an operator uses it, in headless Chromium (Playwright driving the system's
browser): log in, search by UTR and by order id, read a troubled payment's timeline, replay a
parked delivery, be refused without a login, see markup a customer typed as text.

The screenshots in docs/console.md are the ones these tests take.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from payhooks.events import Provider
from payhooks.service.shop import carts
from payhooks.sim.gateway import bank_reference
from payhooks.sim.storm import SIGNED
from tests.console.conftest import OPERATOR, PASSWORD, Console
from tests.console.test_console_http import (
    captured_with_notes,
    log_lines,
    logged,
    parked_delivery,
    send,
)
from tests.console.test_disputes_pages import NOW, dispute
from tests.factories import GATEWAY, purchase

SCREENSHOTS = Path(__file__).parents[2] / "docs" / "console"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_path() -> str:
    """The system's Chromium; failing (never skipping) when there is none, since the README's
    test command installs it (scripts/system-packages)."""
    found = os.environ.get("PAYHOOKS_CHROMIUM") or next(
        (path for name in BROWSERS if (path := shutil.which(name))), None
    )
    if not found:
        pytest.fail(
            "no Chromium found: install the system package (Debian: apt-get install chromium) "
            "or set PAYHOOKS_CHROMIUM to a Chromium or Chrome executable"
        )
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium_path(), args=["--no-sandbox"], headless=True
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


def log_in(page: Page, console: Console) -> None:
    page.goto(f"{console.base_url}/console/login")
    page.get_by_label("Operator").fill(OPERATOR)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("search")).to_be_visible()


def search(page: Page, query: str) -> None:
    page.get_by_label("Search").fill(query)
    page.get_by_role("button", name="Search").click()


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_a_stranger_is_refused_and_sent_to_the_login_form(console, page):
    page.goto(f"{console.base_url}/console/carts/cart_anything")
    expect(page).to_have_url(f"{console.base_url}/console/login?next=/console/carts/cart_anything")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    assert "cart_anything" not in page.locator("main").inner_text()
    page.get_by_label("Operator").fill(OPERATOR)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("do not match an operator")
    shot(page, "login")


def test_search_by_utr_shows_a_duplicated_reordered_refunded_payment(console, page, conn):
    buy = purchase(conn)
    pid, ref, amount = buy.payment_id, buy.reference, buy.amount_paise
    captured = GATEWAY.razorpay(
        "payment.captured", payment_id=pid, order_id=ref, amount_paise=amount
    )
    for delivery in (
        captured,
        captured,
        GATEWAY.razorpay("payment.authorized", payment_id=pid, order_id=ref, amount_paise=amount),
        GATEWAY.razorpay(
            "refund.processed",
            payment_id=pid,
            order_id=ref,
            amount_paise=amount,
            refund_id="rfnd_browser0001",
            refund_amount_paise=amount,
        ),
    ):
        send(console, delivery)
    logged(console, 4)
    log_in(page, console)
    search(page, bank_reference(pid))
    expect(page).to_have_url(
        f"{console.base_url}/console/carts/{buy.cart_id}?q={bank_reference(pid)}"
    )
    expect(page.get_by_label("Search")).to_have_value(bank_reference(pid))
    timeline = page.locator("ol.timeline")
    expect(timeline).to_contain_text("HTTP 200 duplicate")
    expect(timeline.locator("details.attempts")).to_have_count(1)  # the capture, twice
    expect(timeline).to_contain_text(f"Payment {pid}: new → captured")
    expect(timeline).to_contain_text(f"Payment {pid}: captured → refunded")
    expect(timeline).to_contain_text("refunded after order")
    expect(page.locator("td.flags")).to_contain_text("refunded_after_order")
    kinds = timeline.locator("li").evaluate_all("items => items.map(i => i.dataset.kind)")
    assert kinds.index("checkout") < kinds.index("delivery") < kinds.index("order")
    shot(page, "timeline")
    page.get_by_role("link", name="raw body and headers").first.click()
    expect(page.locator("#body")).to_contain_text(pid)
    shot(page, "delivery")


def test_search_by_order_id_finds_its_cart(console, page, conn):
    buy = purchase(conn)
    send(console, buy.captured())
    with psycopg.connect(console.database_url) as db:
        [(order_id,)] = db.execute("SELECT id FROM orders").fetchall()
    log_in(page, console)
    search(page, order_id)
    expect(page.get_by_role("heading", name=f"Cart {buy.cart_id}")).to_be_visible()
    expect(page.locator("ol.timeline")).to_contain_text(f"Order {order_id} confirmed")


def test_replaying_a_parked_delivery_gives_its_cart_an_order(console, page, conn):
    delivery, reference = parked_delivery(console)
    event_id = delivery.headers["x-razorpay-event-id"]
    buy = purchase(conn)
    conn.execute("DELETE FROM checkouts WHERE cart_id = %s", (buy.cart_id,))
    carts.checkout(conn, buy.cart_id, Provider.RAZORPAY, reference)
    log_in(page, console)
    page.get_by_role("link", name="Parked", exact=True).click()
    row = page.locator("tr", has_text=reference)
    expect(row).to_be_visible()
    shot(page, "parked")
    row.get_by_role("button", name="Replay", exact=True).click()
    notice = page.get_by_role("status")
    expect(notice).to_have_text(
        f"Razorpay delivery {event_id}: Replayed: the delivery was applied."
    )
    expect(notice.get_by_role("link")).to_have_attribute(
        "href", f"/console/deliveries/razorpay/{event_id}"
    )
    expect(page.locator("tr", has_text=reference)).to_have_count(0)
    search(page, buy.cart_id)
    expect(page.locator("ol.timeline")).to_contain_text("Order ord_")
    expect(page.locator("ol.timeline")).to_contain_text(f"{OPERATOR}: replay")


def test_linking_a_parked_delivery_to_its_candidate_cart_orders_it(console, page, conn):
    cart = carts.create_cart(
        conn, "carol@example.com", [carts.LineItem(sku=purchase(conn).sku, quantity=1)]
    )  # ₹499.00, no checkout: the parked capture's candidate
    _, reference = parked_delivery(console)
    log_in(page, console)
    page.get_by_role("link", name="Parked", exact=True).click()
    row = page.locator("tr", has_text=reference)
    expect(row.locator("td.candidate")).to_contain_text(f"cart {cart.cart_id}")
    expect(row.get_by_label("Cart to link it to")).to_have_value(cart.cart_id)
    row.get_by_label("this delivery pays that cart").check()
    row.get_by_role("button", name="Link and replay").click()
    expect(page.get_by_role("status")).to_contain_text("Replayed: the delivery was applied.")
    page.get_by_role("link", name="Action log", exact=True).click()
    expect(page.locator("#action-log")).to_contain_text("link")
    search(page, cart.cart_id)
    expect(page.locator("ol.timeline")).to_contain_text("Order ord_")


def test_markup_a_customer_typed_is_rendered_as_text(console, page, conn):
    buy = purchase(conn)
    typed = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"
    delivery = captured_with_notes(buy, typed)
    assert send(console, delivery).json()["status"] == "processed"
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, console)
    search(page, buy.cart_id)
    page.get_by_role("link", name="raw body and headers").first.click()
    expect(page.locator("#body")).to_contain_text(typed.replace("'", "'"))
    assert page.locator("#body script, #body img").count() == 0
    assert "owned" not in page.title() and dialogs == []
    search(page, typed)
    expect(page.get_by_role("heading")).to_contain_text(typed)
    assert page.locator("main script, main img").count() == 0 and dialogs == []


def test_health_shows_each_gateway_and_warns_of_5xx_and_signature_failures(console, page, conn):
    for provider in Provider:
        buy = purchase(conn, provider)
        delivery = buy.captured()
        send(console, delivery)
        send(console, delivery)  # the gateway's retry
    logged(console, 2 * len(Provider))
    log_lines(conn, "razorpay", 503, "database_unavailable", 4)
    log_lines(conn, "cashfree", 401, "signature_mismatch", 6)
    log_in(page, console)
    alerts = page.get_by_role("alert")
    expect(alerts).to_have_count(2)
    expect(alerts.nth(0)).to_contain_text("answered 5xx")
    expect(alerts.nth(1)).to_contain_text("failed the signature check")
    for provider in Provider:  # PhonePe's and Juspay's callbacks wait for their status API
        card = page.locator(f'div.health[data-provider="{provider.value}"]')
        expect(card.locator("rect.applied")).to_have_count(1 if provider in SIGNED else 0)
        expect(card.locator("rect.waiting")).to_have_count(0 if provider in SIGNED else 1)
        expect(card.locator("rect.duplicate")).to_have_count(1)
    expect(page.locator("p.legend")).to_contain_text("waiting for the status API")
    shot(page, "health")


def test_a_banner_leads_to_its_deliveries_and_the_parked_ones_are_replayed_in_bulk(
    console, page, conn
):
    _, reference = parked_delivery(console)
    logged(console, 1)
    log_lines(conn, "razorpay", 503, "database_unavailable", 3)
    log_in(page, console)
    page.get_by_role("alert").get_by_role("link", name="See Razorpay's 5xx answers").click()
    rows = page.locator("#deliveries tr.failed")
    expect(rows).to_have_count(3)
    expect(page.get_by_label("Answer")).to_have_value("failed")
    shot(page, "deliveries")
    page.get_by_label("Answer").select_option("parked")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#deliveries")).to_contain_text(reference)
    page.get_by_role("link", name="Replay the parked deliveries of this gateway and time").click()
    expect(page.locator("#confirm")).to_contain_text("1 delivery to replay")
    shot(page, "bulk")
    page.get_by_role("button", name="Replay it").click()
    expect(page.get_by_role("status")).to_contain_text("This submit replayed 1")
    expect(page.locator("#confirm")).to_contain_text("0 deliveries to replay")
    page.get_by_role("link", name="The action log").click()
    expect(page.locator("#action-log")).to_contain_text("replay many at once")


def test_the_banner_of_callbacks_waiting_for_the_status_api_leads_to_them(console, page, conn):
    """A PhonePe callback has waited half an hour for its status API: the banner says since
    when in the console's zone, and its link lists it, still waiting."""
    buy = purchase(conn, Provider.PHONEPE)
    assert send(console, buy.captured()).json()["status"] == "confirming"
    logged(console, 1)
    conn.execute("UPDATE payhooks_confirmations SET requested_at = now() - interval '30 min'")
    conn.execute("UPDATE payhooks_deliveries SET received_at = now() - interval '31 min'")
    log_in(page, console)
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("1 PhonePe callback has waited for PhonePe's status API")
    expect(alert).to_contain_text(" IST)")
    expect(alert).not_to_contain_text("UTC")
    alert.get_by_role("link", name="See PhonePe's callbacks waiting for the status API").click()
    expect(page.get_by_label("Confirmation")).to_have_value("waiting")
    expect(page.locator("#deliveries tr.waiting")).to_have_count(1)
    expect(page.locator("#deliveries")).to_contain_text(buy.reference)


def test_the_disputes_page_lists_them_by_deadline_and_leads_to_the_cart(console, page, conn):
    later, sooner = purchase(conn), purchase(conn, Provider.CASHFREE)
    for buy in (later, sooner):
        send(console, buy.captured())
    dispute(console, later, "opened", "disp_BROWSER1", NOW + timedelta(days=6))
    dispute(console, sooner, "action_required", "7700042", NOW + timedelta(hours=20))
    log_in(page, console)
    page.get_by_role("link", name="Disputes").click()
    table = page.get_by_role("table", name="Open disputes, by deadline")
    expect(table).to_be_visible()
    cells = table.locator("tr td:nth-child(2) code")
    expect(cells).to_have_text(["7700042", "disp_BROWSER1"])
    expect(table.get_by_role("link", name="Cashfree dashboard")).to_have_attribute(
        "href", "https://merchant.cashfree.com/auth/login"
    )
    shot(page, "disputes")
    table.get_by_role("link", name=sooner.reference).click()
    expect(page.get_by_role("heading", name=f"Cart {sooner.cart_id}")).to_be_visible()
    expect(page.get_by_role("table", name="Disputes of this order's payments")).to_contain_text(
        "7700042"
    )


def test_a_carts_disputes_show_their_deadline_on_a_phone(console, browser, conn):
    """At 390 px a cart's Disputes table scrolled sideways: its deadline ("respond by"), the
    one value an operator needs from it, started off the screen (console check). Each dispute
    is a card, every value inside the screen's width."""
    buy = purchase(conn)
    send(console, buy.captured())
    dispute(console, buy, "action_required", "disp_PHONE1", NOW + timedelta(hours=20))
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, console)
        page.goto(f"{console.base_url}/console/carts/{buy.cart_id}")
        deadline = page.locator("#disputes td[data-label='respond by']")
        expect(deadline).to_have_count(1)
        at = deadline.bounding_box()
        assert at is not None and at["x"] >= 0 and at["x"] + at["width"] <= 390, at
        shot(page, "cart-dispute-phone")
    finally:
        context.close()


def axe_source() -> str:
    """axe-core as the axe-playwright-python package ships it (docs/dependencies.md)."""
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text()


def serious_violations(page: Page) -> list[str]:
    """axe-core run in the page (evaluated by the browser's devtools protocol, which the
    page's no-script CSP does not govern): the serious and critical violations, by rule."""
    page.evaluate(axe_source() + ";0")
    found = page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)"
    )
    return [f"{v['id']}: {v['help']}" for v in found if v["impact"] in ("serious", "critical")]


def test_the_accessibility_check_names_a_serious_violation(browser):
    """The check the pages pass is not empty-handed: a nameless button and an image without a
    text alternative (both critical in axe) are named."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content('<html lang="en"><title>t</title><main><h1>t</h1><button></button>'
                         '<img src="data:,"></main></html>')  # fmt: skip
        found = serious_violations(page)
        assert [v.split(":")[0] for v in found] == ["button-name", "image-alt"], found
    finally:
        context.close()


def story_pages(console: Console, conn) -> list[str]:
    """A paid cart whose capture came twice, one of another amount parked, a dead letter and
    a PayU form body: the pages telling them."""
    buy = purchase(conn)
    for _ in range(2):
        send(console, buy.captured())
    short = purchase(conn)
    send(console, short.captured(amount_paise=100))
    payu = purchase(conn, Provider.PAYU)
    send(console, payu.captured())
    parked_delivery(console)
    logged(console, 5)
    conn.execute("UPDATE outbox SET failed_at = now(), last_error = 'recipient refused: [550]'")
    with psycopg.connect(console.database_url) as db:
        [(event_id,)] = db.execute(
            "SELECT event_id FROM processed_webhooks WHERE payment_id = %s", (buy.payment_id,)
        ).fetchall()
        [(form_id,)] = db.execute(
            "SELECT event_id FROM processed_webhooks WHERE provider = 'payu'"
        ).fetchall()
    return [
        f"/console/orders/razorpay/{buy.reference}",
        f"/console/orders/razorpay/{short.reference}",
        f"/console/carts/{buy.cart_id}",
        f"/console/carts/{short.cart_id}",
        f"/console/deliveries/razorpay/{quote(event_id, safe='')}",
        f"/console/deliveries/payu/{quote(form_id, safe='')}",
    ]


def paid_out(conn, payment_id: str) -> None:
    """A payout with its lines: the payment named, one it does not know, an adjustment."""
    from datetime import UTC, datetime, timedelta

    from payhooks.gateways._settlements import Line, LineKind, Settlement, SettlementState
    from payhooks.settlements import records

    def line(entry_id: str, kind: LineKind, paid: str | None, net: int) -> Line:
        return Line(provider=Provider.RAZORPAY, settlement_id="setl_BROWSER", entry_id=entry_id,
                    kind=kind, entry_type=kind.value, payment_id=paid, gateway_order_id=None,
                    amount_paise=abs(net), fee_paise=0, tax_paise=0, net_paise=net)  # fmt: skip

    stated = Settlement(provider=Provider.RAZORPAY, settlement_id="setl_BROWSER",
                        state=SettlementState.SETTLED, status="processed", amount_paise=49_000,
                        fees_paise=980, tax_paise=176, utr="UTRBROWSER01",
                        settled_at=datetime.now(UTC) - timedelta(hours=2))  # fmt: skip
    records.record(conn, [stated], [
        line(payment_id, LineKind.PAYMENT, payment_id, 48_844),
        line("pay_stranger0001", LineKind.PAYMENT, "pay_stranger0001", 1_000),
        line("adj_0001", LineKind.ADJUSTMENT, None, -844),
    ])  # fmt: skip


def test_a_payout_is_read_from_the_settlements_page_down_to_its_payments_order(console, page, conn):
    buy = purchase(conn)
    send(console, buy.captured())
    paid_out(conn, buy.payment_id)
    log_in(page, console)
    page.get_by_role("link", name="Settlements").click()
    expect(page.get_by_role("heading", name="Settlements", level=1)).to_be_visible()
    payouts = page.locator("#settlements")
    expect(payouts).to_contain_text("UTRBROWSER01")
    expect(page.locator("#unmatched")).to_contain_text("pay_stranger0001")
    page.screenshot(path=SCREENSHOTS / "settlements.png", full_page=True)
    payouts.get_by_role("link", name="setl_BROWSER").click()
    lines = page.locator("#lines")
    expect(lines).to_contain_text("not a payment payhooks applied")
    lines.get_by_role("link", name=buy.reference).click()
    expect(page.locator("#story-settled, #settled").first).to_contain_text("setl_BROWSER")


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_every_core_page_passes_axe_and_fits_the_screen(console, browser, conn, width, height):
    stories = story_pages(console, conn)  # rows in the lists too, a parked one, long keys
    log_lines(conn, "razorpay", 503, "database_unavailable", 1)
    paid_out(conn, "pay_" + "a" * 40)  # a payout, a long id on its lines' page
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        page.goto(f"{console.base_url}/console/login")
        assert serious_violations(page) == []
        log_in(page, console)
        for address in ("/console/", "/console/parked", "/console/actions", "/console/dead",
                        "/console/search?q=nothing-matches", "/console/deliveries",
                        "/console/search?q=customer.with.a.long.address@example.com",
                        "/console/payments", "/console/parked/bulk", "/console/disputes",
                        "/console/settlements", "/console/settlements/razorpay/setl_BROWSER",
                        *stories):  # fmt: skip
            page.goto(f"{console.base_url}{address}")
            assert page.locator("h1").count() == 1, address
            assert serious_violations(page) == [], address
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, (address, wide)
            if width >= 768:  # actions kept in sight (a phone's tables are cards)
                assert page.evaluate(UNDER_THE_ACTIONS) == [], address
    finally:
        context.close()


def test_no_value_of_a_carts_payments_lies_under_their_actions_on_a_desktop(console, browser, conn):
    """A cart paid twice at 1280 px: its Payments table (nine columns of ids, amounts, a bank
    reference and flags beside the actions) overflowed its box, and the actions column, kept
    in sight, covered the second payment's flag ``duplicate_payment (needs refund)`` whole and
    the gateway order's last character (console check). Every value is in sight beside it."""
    buy = purchase(conn)
    send(console, buy.captured())
    second = buy.captured(payment_id="pay_RZPA0000000002")  # the customer paid twice
    assert send(console, second).json()["status"] == "processed"
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        log_in(page, console)
        page.goto(f"{console.base_url}/console/carts/{buy.cart_id}")
        expect(page.locator("td.flags").filter(has_text="duplicate_payment")).to_have_count(1)
        expect(page.locator("td.acts button")).to_have_count(1)
        assert page.evaluate(UNDER_THE_ACTIONS) == [], page.url
        shot(page, "cart-paid-twice-desktop")
    finally:
        context.close()


CUT_OFF = """
() => [...document.querySelectorAll(".scroll")].flatMap((box) => {
  const seen = box.getBoundingClientRect();
  return [...box.querySelectorAll("button")].flatMap((button) => {
    const at = button.getBoundingClientRect();
    const said = `${button.textContent} at ${at.right}, box ${seen.right}`;
    return at.right > seen.right + 1 ? [said] : [];
  });
})
"""


def three_parked_on_a_desktop(console, browser, conn):
    """A capture parked for its cart, one parked for its amount and a Cashfree capture (its
    event type one long word), then the Parked page at 1280 px, logged in; the page's context
    is closed with it."""
    parked_delivery(console)
    send(console, purchase(conn).captured(amount_paise=100))
    cashfree = GATEWAY.cashfree("PAYMENT_SUCCESS_WEBHOOK", order_id="ph_parked_cashfree_0001",
                                cf_payment_id="98765432", order_amount=499)  # fmt: skip
    assert send(console, cashfree).json()["status"] == "parked"
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    log_in(page, console)
    page.goto(f"{console.base_url}/console/parked")
    return page


def test_the_parked_pages_buttons_are_in_sight_on_a_desktop(console, browser, conn):
    """A Cashfree capture parked (its event type one long word) beside one parked for its
    amount: the table was 1335 px in a 1195 px box at 1280, its buttons cut to "Re", "Se"."""
    page = three_parked_on_a_desktop(console, browser, conn)
    try:
        assert page.locator("button", has_text="Settle").count() == 3
        assert page.evaluate(CUT_OFF) == []
        # A link in a column beneath the actions (the candidate's, the last before them),
        # focused as Tab focuses it, is scrolled clear of them, not left under them.
        link = page.locator("td.candidate a").first
        link.focus()
        at = link.bounding_box()
        acts = page.locator("td.acts").first.bounding_box()
        assert at is not None and acts is not None and at["x"] + at["width"] <= acts["x"] + 1
    finally:
        page.context.close()


def test_every_action_of_an_order_and_a_cart_is_in_sight_on_a_narrow_desktop(
    console, browser, conn
):
    """A cart's Refund (and the Cancel refund after it) and a parked delivery's Replay and
    Settle on its order's page sat past the right edge of their scrolling box at 1280 px: their
    cells were not the actions column the box keeps in sight. At 800 px, where every such table
    is wider than its box, none is cut."""
    short = purchase(conn)
    send(console, short.captured(amount_paise=100))  # parked for its amount: Replay, Settle
    buy = purchase(conn)
    send(console, buy.captured())
    send(console, buy.captured(payment_id="pay_second000001"))  # a double payment: Refund
    context = browser.new_context(viewport={"width": 800, "height": 800})
    page = context.new_page()
    try:
        log_in(page, console)
        page.goto(f"{console.base_url}/console/orders/razorpay/{short.reference}")
        assert page.locator("main button", has_text="Replay").count() == 1
        assert page.evaluate(CUT_OFF) == [], page.url
        page.goto(f"{console.base_url}/console/carts/{buy.cart_id}")
        assert page.evaluate(CUT_OFF) == [], page.url
        shot(page, "cart-narrow-desktop")
        page.get_by_label("money goes back to the customer").check()
        page.get_by_role("button", name="Refund ₹499.00").click()
        expect(page.get_by_role("status")).to_contain_text("Refund asked for")
        assert page.locator("main button", has_text="Cancel refund").count() == 1
        assert page.evaluate(CUT_OFF) == [], page.url
    finally:
        context.close()


def test_no_value_of_an_orders_deliveries_lies_under_their_actions_on_a_desktop(
    console, browser, conn
):
    """An order's flags holding one long word (a PayU payment id in a confirmation's words, a
    refund id an operator pasted) could not wrap: the table overflowed its box at 1280 px and
    the actions column, kept in sight, covered the flags mid-word (FastAPI shop check)."""
    from payhooks.intake.expectations import resolve

    short = purchase(conn)
    key = send(console, short.captured(amount_paise=100)).json()["event_id"]  # parked
    resolve(conn, "razorpay", key, "refunded at the dashboard as rfnd_" + "0" * 40)
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    try:
        log_in(page, console)
        page.goto(f"{console.base_url}/console/orders/razorpay/{short.reference}")
        expect(page.locator("#records td.flags").first).to_contain_text("rfnd_")
        assert page.evaluate(UNDER_THE_ACTIONS) == [], page.url
        shot(page, "order-long-flags-desktop")
    finally:
        context.close()


OUTSIDE_ITS_CARD = """
() => [...document.querySelectorAll(".card dl.facts dd, .card dl.facts dt")].flatMap((value) => {
  const box = value.closest(".card").getBoundingClientRect();
  const at = value.getBoundingClientRect();
  const out = at.width > 0 && (at.left < box.left + 1 || at.right > box.right - 1);
  const said = `${value.textContent} at ${at.left}..${at.right}, card ${box.left}..${box.right}`;
  return out ? [said] : [];
})
"""


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_every_timeline_value_lies_inside_its_card(console, browser, conn, width, height):
    """A value that wraps onto a line of its own (a delivery key, at a phone's width) starts
    inside its card, its first character shown: on carts' and gateway orders' timelines."""
    stories = [address for address in story_pages(console, conn) if "/deliveries/" not in address]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        log_in(page, console)
        for address in stories:
            page.goto(f"{console.base_url}{address}")
            if "/carts/" in address:
                assert page.locator("ol.timeline dl.facts dd").count() > 0, address
            assert page.evaluate(OUTSIDE_ITS_CARD) == [], address
    finally:
        context.close()


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
def test_a_long_payment_id_in_a_timeline_title_fits_the_screen(console, browser, conn, width,
                                                               height):  # fmt: skip
    """A timeline entry's title ("Payment <id>: new → captured") did not wrap: a 120-character
    payment id made a cart's page 1,450 px wide on a phone (console browser check)."""
    buy = purchase(conn)
    send(console, buy.captured(payment_id="pay_" + "L" * 116))
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    try:
        log_in(page, console)
        page.goto(f"{console.base_url}/console/carts/{buy.cart_id}")
        expect(page.locator("ol.timeline .title").first).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        context.close()


def in_sight(page: Page, expected: set[str]) -> None:
    """Every button of the page's main part is one of ``expected``, all of them are there, and
    each lies inside a 390 px screen's width (its bounding box as the browser lays it out)."""
    buttons = page.locator("main button").all()
    assert {b.inner_text() for b in buttons} == expected, page.url
    for button in buttons:
        at = button.bounding_box()
        assert at is not None, (page.url, button.inner_text())
        said = (page.url, button.inner_text(), at)
        assert at["x"] >= 0 and at["x"] + at["width"] <= 390, said


def test_every_action_is_in_sight_on_a_phone(console, browser, conn):
    """At 390 px the Parked page's Replay, Settle and Link and replay sat 1,040 px from the
    left, and a cart's Refund 850 px, inside tables scrolling sideways with nothing to say
    they were there. A table with actions is one card a row on a phone now: every action of
    the parked, dead letters, order and cart pages is inside the screen's width."""
    parked_delivery(console)  # no checkout: Replay, Settle, Link and replay
    short = purchase(conn)
    send(console, short.captured(amount_paise=100))  # parked for its amount: Replay, Settle
    buy = purchase(conn)
    send(console, buy.captured())
    send(console, buy.captured(payment_id="pay_second000001"))  # a double payment: Refund
    conn.execute("UPDATE outbox SET failed_at = now(), last_error = 'recipient refused: [550]'")
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, console)
        page.goto(f"{console.base_url}/console/parked")
        in_sight(page, {"Replay", "Settle", "Link and replay"})
        shot(page, "parked-phone")
        page.goto(f"{console.base_url}/console/orders/razorpay/{short.reference}")
        in_sight(page, {"Replay", "Settle"})
        page.goto(f"{console.base_url}/console/dead")
        in_sight(page, {"Retry all", "Retry", "Send to this address"})
        page.goto(f"{console.base_url}/console/carts/{buy.cart_id}")
        in_sight(page, {"Refund ₹499.00", "Retry"})  # Retry: the timeline's dead letters
        shot(page, "cart-phone")
        page.get_by_label("money goes back to the customer").check()
        page.get_by_role("button", name="Refund ₹499.00").click()
        expect(page.get_by_role("status")).to_contain_text("Refund asked for")
        in_sight(page, {"Cancel refund", "Retry"})
    finally:
        context.close()


UNDER_THE_ACTIONS = """
() => [...document.querySelectorAll("tr")].flatMap((row) => {
  const acts = row.querySelector("td.acts");
  if (!acts) return [];
  const covered = acts.getBoundingClientRect();
  return [...row.querySelectorAll("td:not(.acts)")].flatMap((cell) => {
    const text = document.createRange();
    text.selectNodeContents(cell);
    return [...text.getClientRects()].flatMap((at) => {
      const under = at.width > 0 && at.right > covered.left + 1 && at.left < covered.right - 1;
      const said = `${cell.dataset.label}: ${at.left}..${at.right}, actions ${covered.left}`;
      return under ? [said] : [];
    });
  });
})
"""


def test_no_parked_rows_text_lies_under_its_actions_on_a_desktop(console, browser, conn):
    """At 1280 px a parked capture with a candidate cart, beside one parked for its amount and
    a Cashfree one: the actions column, kept at the box's right edge, covered the candidate's
    text ("same amount (₹499.00), opened 0 min before it") until the table was scrolled."""
    sku = purchase(conn).sku
    carts.create_cart(conn, "carol@example.com", [carts.LineItem(sku=sku, quantity=1)])
    page = three_parked_on_a_desktop(console, browser, conn)
    try:
        expect(page.locator("td.candidate a")).to_have_count(2)
        assert page.evaluate(UNDER_THE_ACTIONS) == []
    finally:
        page.context.close()


LEGEND_ENTRIES = """
() => {
  const legend = document.querySelector(".legend");
  const swatches = [...legend.querySelectorAll("span")].filter((s) => s.childElementCount === 0
    && s.textContent === "");
  return swatches.map((swatch, n) => {
    const label = document.createRange();
    label.setStartAfter(swatch);
    if (n + 1 < swatches.length) label.setEndBefore(swatches[n + 1]);
    else label.setEndAfter(legend.lastChild);
    const lines = [...label.getClientRects()].filter((r) => r.width > 0);
    const at = swatch.getBoundingClientRect();
    return {answer: swatch.className, label: label.toString().trim(),
            lines: [...new Set(lines.map((r) => Math.round(r.top)))].length,
            beside: lines.length > 0 && lines[0].top < at.bottom && lines[0].bottom > at.top
                    && lines[0].left >= at.right,
            right: Math.max(at.right, ...lines.map((r) => r.right))};
  });
}
"""


def test_the_health_charts_legend_keeps_each_colour_beside_its_words_on_a_phone(console, browser):
    """At 390 px the legend wrapped anywhere: a colour at the end of one line and its words on
    the next, "waiting for the status API" broken across two lines. Each entry is whole, its
    colour before its words, inside the screen."""
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        log_in(page, console)
        entries = page.evaluate(LEGEND_ENTRIES)
        assert [e["label"] for e in entries] == [
            "applied", "waiting for the status API", "duplicate", "parked", "signature refused",
            "refused (4xx)", "failed (5xx)"]  # fmt: skip
        broken = [e for e in entries if e["lines"] != 1 or not e["beside"] or e["right"] > 390]
        assert broken == [], broken
    finally:
        context.close()

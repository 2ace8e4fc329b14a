"""The merchant's console (examples/fastapi_shop, mounted at /payhooks/console) as an operator
uses it, in headless Chromium: a stranger is shown the login form; the home page counts what is
parked and charts each gateway's deliveries; an underpaid capture is settled and a capture that
came before its checkout is replayed from the Parked page; a payment id searched leads to its
order's timeline; markup a gateway sent is shown as text.

The screenshots docs/console/merchant-*.png are the ones these tests take.
"""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page, expect

from tests.console import test_console_browser as in_browser
from tests.console.test_console_browser import shot
from tests.factories import GATEWAY
from tests.fastapi import test_fastapi_example as example
from tests.fastapi.test_fastapi_console import CONSOLE, OPERATOR, PASSWORD, add_operator
from tests.fastapi.test_fastapi_example import (
    PAID,
    PENDING,
    REF,
    checkout,
    orders,
    post,
    razorpay,
)

shop, conn, merchant_url = example.shop, example.conn, example.merchant_url  # their fixtures
browser, page = in_browser.browser, in_browser.page  # and the browser's
PAYMENT = "pay_shop0000001"


def log_in(page: Page, shop, merchant_url: str) -> None:
    """An operator added by the CLI logs in from the console's bare address."""
    add_operator(merchant_url)
    page.goto(f"{shop.base_url}{CONSOLE}")
    expect(page).to_have_url(f"{shop.base_url}{CONSOLE}/login?next={CONSOLE}/")
    page.get_by_label("Operator").fill(OPERATOR)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{shop.base_url}{CONSOLE}/")


def parked_page(page: Page) -> None:
    page.get_by_role("link", name="Parked", exact=True).click()
    expect(page.get_by_role("heading", name="Parked deliveries")).to_be_visible()


def logged(conn, count: int) -> None:
    """The delivery log is written a moment after each answer: wait for ``count`` lines."""
    deadline = time.monotonic() + 10
    while conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone()[0] < count:
        assert time.monotonic() < deadline, "the delivery log was not written"
        time.sleep(0.05)


def replayed(page: Page, shop, merchant_url: str) -> None:
    """A capture posted before its checkout, replayed from the Parked page once it exists."""
    assert post(shop, razorpay()) == (200, "parked")
    checkout(shop)
    log_in(page, shop, merchant_url)
    parked_page(page)
    row = page.locator("tr", has_text=REF)
    expect(row).to_contain_text("parked by the app's handler")
    row.get_by_role("button", name="Replay").click()
    expect(page.get_by_role("status")).to_have_text(
        re.compile(r"^Razorpay delivery \S+: Replayed: the delivery was applied\.$")
    )


def test_a_stranger_is_shown_the_login_form(shop, page):
    page.goto(f"{shop.base_url}{CONSOLE}")
    expect(page).to_have_url(f"{shop.base_url}{CONSOLE}/login?next={CONSOLE}/")
    expect(page.get_by_role("heading", name="payhooks console")).to_be_visible()
    expect(page.get_by_label("Operator")).to_be_visible()
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    expect(page.get_by_role("search")).to_have_count(0)
    expect(page.get_by_role("link", name="Parked")).to_have_count(0)


def test_the_home_page_counts_the_parked_and_charts_each_gateway(shop, conn, page, merchant_url):
    checkout(shop)
    assert post(shop, razorpay(amount_paise=100)) == (200, "parked")
    checkout(shop, "order_cf_home", 100, gateway="cashfree")
    paid = GATEWAY.cashfree(
        "PAYMENT_SUCCESS_WEBHOOK", order_id="order_cf_home", cf_payment_id="5114911", order_amount=1
    )
    assert [post(shop, paid), post(shop, paid)] == [(200, "processed"), (200, "duplicate")]
    logged(conn, 3)
    log_in(page, shop, merchant_url)
    expect(page.locator("#count-parked")).to_have_text("1 parked delivery")
    expect(page.get_by_text("gateways served: razorpay, cashfree, payu")).to_be_visible()
    for provider in ("razorpay", "cashfree", "payu"):
        card = page.locator(f'div.health[data-provider="{provider}"]')
        expect(card.get_by_role("img", name=f"{provider} deliveries by hour")).to_be_visible()
    razorpay_card = page.locator('div.health[data-provider="razorpay"]')
    expect(razorpay_card.locator("rect.parked")).to_have_count(1)
    cashfree_card = page.locator('div.health[data-provider="cashfree"]')
    expect(cashfree_card.locator("rect.applied")).to_have_count(1)
    expect(cashfree_card.locator("rect.duplicate")).to_have_count(1)
    expect(page.locator('div.health[data-provider="payu"] rect')).to_have_count(0)
    shot(page, "merchant-home")
    page.locator("#count-parked").click()
    expect(page.get_by_role("heading", name="Parked deliveries")).to_be_visible()


def test_an_underpaid_capture_is_listed_with_both_amounts_and_settled(
    shop, conn, page, merchant_url
):
    checkout(shop)
    assert post(shop, razorpay(amount_paise=100)) == (200, "parked")
    log_in(page, shop, merchant_url)
    parked_page(page)
    row = page.locator("tr", has_text=REF)
    expect(row).to_contain_text("paid ₹1.00, expected ₹499.00")
    shot(page, "merchant-parked")
    row.get_by_label("How it was settled").fill("refunded in the dashboard")
    row.get_by_role("button", name="Settle").click()
    expect(page.get_by_role("status")).to_have_text(
        re.compile(r"^Razorpay delivery \S+: Settled: the delivery is recorded as handled outside")
    )
    expect(page.locator("tr", has_text=REF)).to_have_count(0)
    expect(page.get_by_text("Nothing is parked.")).to_be_visible()
    assert orders(conn) == PENDING


def test_a_capture_before_its_checkout_is_replayed_and_pays_the_order(
    shop, conn, page, merchant_url
):
    replayed(page, shop, merchant_url)
    expect(page.locator("tr", has_text=REF)).to_have_count(0)
    assert orders(conn) == PAID


def test_searching_a_payment_id_leads_to_its_orders_timeline(shop, page, merchant_url):
    replayed(page, shop, merchant_url)
    page.get_by_label("Search").fill(PAYMENT)
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(f"{shop.base_url}{CONSOLE}/orders/razorpay/{REF}?q={PAYMENT}")
    expect(page.get_by_label("Search")).to_have_value(PAYMENT)
    expect(page.get_by_role("heading", name=f"Razorpay order {REF}")).to_be_visible()
    expect(page.locator("#expected")).to_contain_text("₹499.00 INR")
    expect(page.locator("#payments")).to_contain_text(PAYMENT)
    expect(page.locator("#records")).to_contain_text("processed")
    done = page.locator("#actions tr", has_text=OPERATOR)
    expect(done).to_contain_text("replay")
    expect(done).to_contain_text("applied")
    shot(page, "merchant-order")


def test_markup_a_gateway_sent_is_shown_as_text(shop, page, merchant_url):
    reference = "<script>document.title='owned'</script>"
    payment_id = "pay_<b>bold</b><img src=x onerror=alert(1)>"
    sent = razorpay(payment_id=payment_id, order_id=reference)
    assert post(shop, sent) == (200, "parked")  # no checkout has this reference
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, shop, merchant_url)
    parked_page(page)
    row = page.locator("tr", has_text=reference)
    expect(row).to_contain_text(reference)
    assert page.locator("main script, main b, main img").count() == 0
    row.get_by_role("link", name=reference).click()
    expect(page.get_by_role("heading", name=f"Razorpay order {reference}")).to_be_visible()
    expect(page.locator("#records")).to_contain_text(payment_id)
    assert page.locator("main script, main b, main img").count() == 0
    expect(page).to_have_title(f"Razorpay order {reference} · payhooks console")  # not 'owned'
    assert dialogs == []

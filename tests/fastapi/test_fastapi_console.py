"""The operator console of the example shop (examples/fastapi_shop), mounted at
/payhooks/console as docs/fastapi.md says, driven over real HTTP as an operator drives it:
an operator added by ``payhooks operator add --database-url`` logs in; a capture parked for
its amount shows both amounts and is settled from the console; a capture that came before its
checkout is replayed from the console through the shop's own async hooks and pays the order
once; an order's timeline shows what the shop expected and what each delivery did; forged
deliveries raise the health banner."""

from __future__ import annotations

import contextlib
import csv
import html
import io
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from payhooks import EventKind, Hooks, Outcome, ingest
from payhooks.sim.gateway import bank_reference
from tests import loopback
from tests.acceptance.conftest import invoke
from tests.console.conftest import csrf_of
from tests.factories import GATEWAY
from tests.fastapi import test_fastapi_example as example
from tests.fastapi.test_fastapi_example import PAID, PENDING, REF, checkout, orders, post, razorpay

ROOT = Path(__file__).parents[2]
shop, conn, merchant_url = example.shop, example.conn, example.merchant_url  # their fixtures
CONSOLE = "/payhooks/console"
OPERATOR, PASSWORD = "ravi", "a long enough passphrase"


def add_operator(database_url: str) -> None:
    """``payhooks operator add``, in this process (tests/acceptance runs the installed one)."""
    done = invoke(
        {**os.environ}, "operator", "add", OPERATOR, "--password-stdin",
        "--database-url", database_url, input=PASSWORD + "\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"operator {OPERATOR} added" in done.stdout


@contextlib.contextmanager
def logged_in(shop, merchant_url: str) -> Iterator[httpx.Client]:
    add_operator(merchant_url)
    with loopback.Client(base_url=shop.base_url, timeout=30, follow_redirects=False) as client:
        yield _logged_in(client)


def _logged_in(client: httpx.Client) -> httpx.Client:
    assert client.get(CONSOLE).headers["location"].endswith(f"{CONSOLE}/")  # app.mount redirects
    stranger = client.get(f"{CONSOLE}/")
    assert stranger.status_code == 303
    assert stranger.headers["location"].startswith(f"{CONSOLE}/login?next=")
    answer = client.post(
        f"{CONSOLE}/login", data={"name": OPERATOR, "password": PASSWORD, "next": f"{CONSOLE}/"}
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == f"{CONSOLE}/"
    return client


def until(read: Callable[[], str], holds: Callable[[str], bool]) -> str:
    """What ``read()`` returns once it ``holds``, or at last: the delivery log writes its lines
    a moment after the answers, in batches. Waits on the page, a minute at most (a liveness
    bound on a loaded machine, not the test's measure)."""
    deadline = time.monotonic() + 60
    while not holds(found := read()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def act(client: httpx.Client, page: str, action: str, **fields: str) -> str:
    """A form of ``page`` sent as the browser sends it; the page it leads back to."""
    form = {"csrf": csrf_of(client.get(page).text), **fields}
    answer = client.post(f"{CONSOLE}{action}", data=form)
    assert answer.status_code == 303, answer.text
    return client.get(answer.headers["location"]).text


def settle(client: httpx.Client, event_id: str, note: str) -> str:
    """The Parked page's Settle of a Razorpay delivery; the Parked page it leads back to."""
    return act(client, f"{CONSOLE}/parked", "/parked/settle", provider="razorpay",
               event_id=event_id, note=note, back=f"{CONSOLE}/parked")  # fmt: skip


def test_a_stranger_is_sent_to_the_login_form_and_a_wrong_password_refused(shop, merchant_url):
    add_operator(merchant_url)
    with loopback.Client(base_url=shop.base_url, timeout=30) as client:
        assert client.get(f"{CONSOLE}/parked", follow_redirects=False).status_code == 303
        wrong = client.post(f"{CONSOLE}/login", data={"name": OPERATOR, "password": "x" * 12})
        assert wrong.status_code == 401
        assert "do not match an operator" in wrong.text


def test_a_capture_for_no_checkout_of_the_shop_is_settled_from_the_console_with_its_note(
    shop, conn, merchant_url
):
    """A payment of another integration on the same gateway account, refunded there: it will
    never apply here; the Parked page settles it, the note kept, and nothing stays parked."""
    assert post(shop, razorpay(order_id="order_not_ours01")) == (200, "parked")
    [(event_id,)] = conn.execute("SELECT event_id FROM processed_webhooks").fetchall()
    with logged_in(shop, merchant_url) as client:
        after = settle(client, event_id, "not ours: refunded at Razorpay")
        assert "Settled: the delivery is recorded as handled outside payhooks." in after
        assert "Nothing is parked." in after
        story = client.get(f"{CONSOLE}/orders/razorpay/order_not_ours01").text
        assert "settled by hand" in story and "not ours: refunded at Razorpay" in story
    assert conn.execute("SELECT resolution FROM payhooks_resolutions").fetchall() == [
        ("not ours: refunded at Razorpay",)
    ]
    assert conn.execute("SELECT outcome FROM processed_webhooks").fetchall() == [("ignored",)]


def test_an_underpaid_capture_shows_both_amounts_and_is_settled_from_the_console(
    shop, conn, merchant_url
):
    checkout(shop)
    assert post(shop, razorpay(amount_paise=100)) == (200, "parked")
    refund = GATEWAY.razorpay(
        "refund.processed", payment_id="pay_shop0000001", order_id=REF, amount_paise=100,
        refund_id="rfnd_shop000001",
    )  # fmt: skip
    assert post(shop, refund) == (200, "parked")  # parked beside the payment it refunds
    with logged_in(shop, merchant_url) as client:
        home = client.get(f"{CONSOLE}/").text
        assert re.search(r'id="count-parked">2 parked deliveries<', home)
        parked = client.get(f"{CONSOLE}/parked").text
        assert "amount: paid ₹1.00, expected ₹499.00" in parked
        assert "of a payment parked for its amount" in parked
        captured = conn.execute(
            "SELECT event_id FROM processed_webhooks WHERE event_type = 'payment.captured'"
        )
        [(event_id,)] = captured.fetchall()
        after = settle(client, event_id, "refunded in the dashboard")
        assert "Settled: the delivery is recorded as handled outside payhooks." in after
        assert "amount: paid" not in after  # the refund waits for a replay, now applicable
        again = settle(client, event_id, "twice")
        assert "Not settled: this delivery is not parked (applied, or settled already)" in again
        story = client.get(f"{CONSOLE}/orders/razorpay/{REF}").text
    assert "(settled: refunded in the dashboard)" in story
    assert orders(conn) == PENDING
    settled = conn.execute("SELECT resolution FROM payhooks_amount_mismatches").fetchall()
    assert settled == [("refunded in the dashboard",)]
    done = conn.execute("SELECT operator, action, result FROM payhooks_console_actions")
    assert done.fetchall() == [
        (OPERATOR, "settle", "settled"),
        (OPERATOR, "settle", "not_a_mismatch"),
    ]


def test_an_underpayment_settled_by_hand_stays_on_the_payments_list_and_its_order_after_a_purge(
    shop, conn, merchant_url
):
    """Its row is all the core has of that payment once its delivery and its expectation are
    purged: the payments list and the order's timeline still show it, with both amounts."""
    from datetime import UTC, datetime, timedelta

    from payhooks.intake.expectations import resolve
    from tests.console.test_console_lists import listed

    checkout(shop)
    assert post(shop, razorpay(amount_paise=100)) == (200, "parked")
    [(event_id,)] = conn.execute("SELECT event_id FROM processed_webhooks").fetchall()
    resolve(conn, "razorpay", event_id, "refunded in the dashboard")
    purged_after(conn, 100, ("payhooks_amount_mismatches", "found_at"))
    since = (datetime.now(UTC) - timedelta(days=200)).isoformat()
    with logged_in(shop, merchant_url) as client:
        page = client.get(f"{CONSOLE}/payments", params={"from": since}).text
        [payment] = listed(page, "payments")
        story = client.get(f"{CONSOLE}/orders/razorpay/{REF}").text
    assert "pay_shop0000001" in payment and "refunded in the dashboard" in payment
    assert "₹1.00" in payment and "₹499.00" in payment
    [kept] = listed(story, "mismatched")
    assert "pay_shop0000001" in kept and "refunded in the dashboard" in kept
    assert "₹1.00" in kept and "₹499.00" in kept and event_id in kept


def purged_after(conn, days: int, *also: tuple[str, str]) -> None:
    """Every delivery, expectation and the rows of ``also`` (table, time column) made ``days``
    older, then purged past a 90-day window: no stored delivery is left."""
    from payhooks.operations import retention

    aged = (("processed_webhooks", "processed_at"), ("payhooks_expectations", "created_at"),
            *also, ("payhooks_deliveries", "received_at"))  # fmt: skip
    for table, column in aged:
        conn.execute(
            f"UPDATE {table} SET {column} = {column} - make_interval(days => %s)".encode(), (days,)
        )
    retention.purge(conn, 90)
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (0,)


def test_a_payment_older_than_the_window_keeps_its_amounts_its_order_page_and_no_dead_link(
    shop, conn, merchant_url
):
    """A captured payment's record is kept for a refund's year, past the window: the payments
    list still shows what its order was expected to be paid and what was paid, links to no
    delivery page (its delivery purged), and its order is found and told from the record."""
    from datetime import UTC, datetime, timedelta

    from tests.console.test_console_lists import listed

    checkout(shop)
    assert post(shop, razorpay()) == (200, "processed")
    purged_after(conn, 200, ("payhooks_payments", "applied_at"))
    since = (datetime.now(UTC) - timedelta(days=300)).isoformat()
    with logged_in(shop, merchant_url) as client:
        page = client.get(f"{CONSOLE}/payments", params={"from": since}).text
        table = page.split('id="payments"', 1)[1].split("</table>", 1)[0]
        story = client.get(f"{CONSOLE}/orders/razorpay/{REF}")
        found = client.get(f"{CONSOLE}/search", params={"q": REF})
    [payment] = listed(page, "payments")
    assert found.status_code == 303  # the search finds the order through the payment's record
    assert found.headers["location"].startswith(f"{CONSOLE}/orders/razorpay/{REF}?")
    assert f'href="{CONSOLE}/orders/razorpay/{REF}"' in table
    assert story.status_code == 200  # its order's page tells what the core kept of it
    [applied] = listed(story.text, "payments")
    assert "pay_shop0000001" in applied and "₹499.00" in applied  # what was paid
    assert bank_reference("pay_shop0000001") in applied  # the UTR the customer quotes
    assert f"{CONSOLE}/deliveries/" not in applied  # its delivery is purged: no dead link
    [records] = listed(story.text, "records")  # never "no delivery has taken effect"
    assert "purged" in records and "taken effect" not in records
    # The expectation purged, the amount it expected kept on the payment's record.
    expected = story.text.split('id="expected"', 1)[1].split("</div>", 1)[0]
    told = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", expected)).split())
    assert "No expectation" not in told and "expected ₹499.00 INR" in told
    assert "pay_shop0000001" in payment and "captured" in payment
    # Expected, from the kept expectation, and paid, from the payment's own record.
    assert payment.count("₹499.00") == 2
    assert f"{CONSOLE}/deliveries/" not in table


def test_a_delivery_the_handler_parks_naming_its_order_is_shown_so_not_as_no_checkout(
    shop, conn, merchant_url
):
    """An app's handler parks a delivery for its own reasons, naming the order (a payment it
    wants a person to look at). The Parked page said "no checkout" and "candidate: none
    found" for it, the reference shop's reasons: the operator was told of a stray payment. It
    says the app's handler parked it, naming the order."""
    from payhooks import Applied
    from tests.factories import ADAPTERS

    parking = Hooks()

    @parking.on(EventKind.PAYMENT_CAPTURED)
    def look_at_it(conn, event):
        return Applied(outcome=Outcome.PARKED, order_id=event.merchant_ref)

    sent = razorpay(payment_id="pay_shop0000002")
    assert ingest(conn, ADAPTERS[sent.provider], sent.body, sent.headers, parking).outcome is (
        Outcome.PARKED
    )
    with logged_in(shop, merchant_url) as client:
        parked = client.get(f"{CONSOLE}/parked").text
    why = re.search(r'<td class="why"[^>]*>(.*?)</td>', parked, re.S)
    assert why and " ".join(html.unescape(re.sub(r"<[^>]+>", "", why.group(1))).split()) == (
        f"parked by the app's handler, naming order {REF}"
    )
    assert "none found" not in parked


def test_a_capture_before_its_checkout_is_replayed_from_the_console_and_pays_once(
    shop, conn, merchant_url
):
    assert post(shop, razorpay()) == (200, "parked")
    with logged_in(shop, merchant_url) as client:
        parked = client.get(f"{CONSOLE}/parked").text
        assert "parked by the app&#39;s handler</td>" in parked  # naming no order
        assert "none found" not in parked  # this console looks for no candidate cart
        assert re.search(r'<td class="amount"[^>]*>₹499.00</td>', parked)  # from the stored body
        [event_id] = re.findall(r'name="event_id" value="([^"]+)"', parked)[:1]
        raw = client.get(f"{CONSOLE}/deliveries/razorpay/{event_id}").text
        assert f'href="{CONSOLE}/orders/razorpay/{REF}" id="story-link"' in raw
        fields = {"provider": "razorpay", "event_id": event_id, "back": f"{CONSOLE}/parked"}
        still = act(client, f"{CONSOLE}/parked", "/parked/replay", **fields)
        assert "Replayed: it is still parked" in still
        checkout(shop)
        applied = act(client, f"{CONSOLE}/parked", "/parked/replay", **fields)
        assert "Replayed: the delivery was applied." in applied
        twice = act(client, f"{CONSOLE}/parked", "/parked/replay", **fields)
        assert "Nothing to do: this delivery is parked no more (applied, or settled)." in twice
        found = client.get(f"{CONSOLE}/search", params={"q": "pay_shop0000001"})
        assert found.status_code == 303
        assert found.headers["location"] == f"{CONSOLE}/orders/razorpay/{REF}?q=pay_shop0000001"
        story = client.get(found.headers["location"]).text
    assert orders(conn) == PAID
    assert "₹499.00 INR" in story  # what the checkout told payhooks
    assert "pay_shop0000001" in story and "processed" in story
    assert f"<td>{OPERATOR}</td><td>replay</td>" in story


def test_a_parked_capture_the_handler_ignores_on_replay_is_said_to_be_ignored(
    shop, conn, merchant_url
):
    """The order was written meanwhile for another amount, outside the checkout (no
    expectation): the replay ran, and the shop's handler ignored it. The page says so, not
    that it was applied or settled before."""
    assert post(shop, razorpay()) == (200, "parked")
    conn.execute(
        "INSERT INTO orders (merchant_ref, amount_paise, currency) VALUES (%s, 100, 'INR')",
        (REF,),
    )
    with logged_in(shop, merchant_url) as client:
        parked = client.get(f"{CONSOLE}/parked").text
        [event_id] = re.findall(r'name="event_id" value="([^"]+)"', parked)[:1]
        fields = {"provider": "razorpay", "event_id": event_id, "back": f"{CONSOLE}/parked"}
        replayed = act(client, f"{CONSOLE}/parked", "/parked/replay", **fields)
        story = client.get(f"{CONSOLE}/orders/razorpay/{REF}").text
    assert "Replayed: the app&#39;s handler ignored it" in replayed, replayed
    assert "parked no more (applied, or settled)" not in replayed
    assert orders(conn) == [(REF, "pending", None)]
    assert f"<td>{OPERATOR}</td><td>replay</td>" in story and "ignored" in story


def test_forged_deliveries_raise_the_health_banner(shop, merchant_url):
    forged = razorpay()
    headers = {**forged.headers, "x-razorpay-signature": "0" * 64}
    with loopback.Client(base_url=shop.base_url, timeout=30) as sender:
        for _ in range(5):
            assert sender.post(forged.path, content=forged.body, headers=headers).status_code == 401
    with logged_in(shop, merchant_url) as client:
        home = until(lambda: client.get(f"{CONSOLE}/").text, lambda page: 'role="alert"' in page)
        assert 'role="alert"' in home, "no banner: " + home
    assert "razorpay" in home[home.index('role="alert"') :].split("</div>")[0]


def test_a_merchants_console_lists_exports_and_replays_in_bulk_on_the_core_tables(
    shop, conn, merchant_url
):
    from tests.console.test_console_lists import confirmed_form, listed

    assert post(shop, razorpay()) == (200, "parked")  # before its checkout
    checkout(shop)
    with logged_in(shop, merchant_url) as client:
        parked = until(
            lambda: client.get(f"{CONSOLE}/deliveries", params={"outcome": "parked"}).text,
            lambda page: REF in page,
        )
        assert f'href="{CONSOLE}/orders/razorpay/{REF}"' in parked
        bulk = html.unescape(re.search(r'href="([^"]+)" id="bulk"', parked).group(1))
        page = client.get(bulk).text
        assert "<strong>1</strong> delivery to replay" in page
        form = {"csrf": csrf_of(page), **confirmed_form(page)}
        done = client.post(f"{CONSOLE}/parked/bulk", data=form)
        said = " ".join(client.get(done.headers["location"]).text.split())
        assert "This submit replayed 1 (1 applied" in said
        payments = listed(client.get(f"{CONSOLE}/payments").text, "payments")
        assert len(payments) == 1 and "pay_shop0000001" in payments[0]
        assert "captured" in payments[0] and "₹499.00" in payments[0]
        exported = client.get(f"{CONSOLE}/payments.csv").content.decode("utf-8-sig")
        [row] = list(csv.DictReader(io.StringIO(exported)))
        assert (row["status"], row["expected_paise"], row["by"]) == ("captured", "49900", "webhook")
        assert (row["paid_paise"], row["paid_currency"]) == ("49900", "INR")
        unknown = client.get(f"{CONSOLE}/payments", params={"refund": "needed"})
        assert unknown.status_code == 400
        assert "does not know which payments need a refund" in unknown.text
    assert orders(conn) == PAID

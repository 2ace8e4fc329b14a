"""The console's lists over real HTTP and PostgreSQL: every filter of the deliveries and
payments lists, paging, the CSV exports read back (and their guard against formulas), the
banners' links, and the bulk replay of parked deliveries (confirmed, bounded, idempotent,
recorded per delivery, refused to read-only operators and without the session's token)."""

from __future__ import annotations

import csv
import html
import io
import re
import threading
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, quote, urlsplit
from zoneinfo import ZoneInfo

import psycopg
import pytest

from payhooks.console import bulk, export
from payhooks.events import Provider
from payhooks.operations import operators
from payhooks.service.shop import carts
from tests import loopback
from tests.console.conftest import OPERATOR, PASSWORD, Console, csrf_of
from tests.console.test_console_http import logged, rows, send, when
from tests.factories import GATEWAY, purchase
from tests.reconcile.conftest import paid_at_gateway

IST = ZoneInfo("Asia/Kolkata")


def line(conn, provider="razorpay", status=200, outcome="processed", *, ago=timedelta(0),
         event_id=None, merchant_ref=None, detail=None, verified=True) -> int:  # fmt: skip
    """A line of the delivery log, as a door writes it."""
    [(at,)] = conn.execute("SELECT now() - %s", (ago,)).fetchall()
    row = conn.execute(
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " event_id, merchant_ref, detail, body_bytes, duration_ms)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 10, 1) RETURNING id",
        (at, provider, status, outcome, verified, event_id, merchant_ref, detail),
    ).fetchone()
    return int(row[0])


def listed(answer_text: str, table: str) -> list[str]:
    """The rows of a list page's table, each as its cells' text."""
    body = answer_text.split(f'id="{table}"', 1)[1].split("</table>", 1)[0]
    found = re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)[1:]
    return [html.unescape(re.sub(r"<[^>]+>", " ", row)) for row in found]


def shown(console: Console, path: str, **params: str) -> str:
    answer = console.logged_in().get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.text


def csv_of(console: Console, path: str, **params: str) -> list[dict[str, str]]:
    answer = console.logged_in().get(path, params=params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(answer.content.decode("utf-8-sig"))))


# --- the deliveries list ---------------------------------------------------------------------


def test_the_nav_links_both_lists(console):
    page = shown(console, "/console/")
    assert 'href="/console/deliveries"' in page and 'href="/console/payments"' in page
    assert 'aria-current="page"' in shown(console, "/console/deliveries").split("</nav>")[0]


def test_deliveries_are_filtered_by_gateway(console, conn):
    line(conn, "razorpay", event_id="evt_rzp")
    line(conn, "cashfree", event_id="evt_cf")
    page = shown(console, "/console/deliveries", gateway="cashfree")
    found = listed(page, "deliveries")
    assert len(found) == 1 and "evt_cf" in found[0]
    assert len(listed(shown(console, "/console/deliveries"), "deliveries")) == 2


ANSWERED = [
    (200, "processed"),
    (200, "confirming"),
    (200, "duplicate"),
    (200, "parked"),
    (401, "signature_mismatch"),
    (400, "malformed_payload"),
    (503, "database_unavailable"),
]


@pytest.mark.parametrize(
    ("outcome", "status", "logged_as"),
    [
        ("applied", 200, "processed"),
        ("waiting", 200, "confirming"),
        ("duplicate", 200, "duplicate"),
        ("parked", 200, "parked"),
        ("signature", 401, "signature_mismatch"),
        ("refused", 400, "malformed_payload"),
        ("failed", 503, "database_unavailable"),
    ],
)
def test_deliveries_are_filtered_by_class_of_answer(console, conn, outcome, status, logged_as):
    for n, (code, said) in enumerate(ANSWERED):
        line(conn, status=code, outcome=said, detail=f"line-{n}-{said}")
    found = listed(shown(console, "/console/deliveries", outcome=outcome), "deliveries")
    assert len(found) == 1
    assert f"HTTP {status} {logged_as.replace('_', ' ')}" in found[0]


def test_deliveries_are_filtered_by_a_time_range_typed_in_ist(console, conn):
    line(conn, detail="two-hours-ago", ago=timedelta(hours=2))
    line(conn, detail="thirty-hours-ago", ago=timedelta(hours=30))
    line(conn, detail="just-now")
    default = listed(shown(console, "/console/deliveries"), "deliveries")
    assert [d for d in default if "thirty-hours-ago" in d] == []  # 24 hours by default
    now = datetime.now(UTC).astimezone(IST)
    start = (now - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")  # as the browser sends it
    end = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")
    page = shown(console, "/console/deliveries", **{"from": start, "to": end})
    found = listed(page, "deliveries")
    assert len(found) == 1 and "two-hours-ago" in found[0]
    assert f'value="{start}"' in page and f'value="{end}"' in page  # the form keeps them
    start = (now - timedelta(hours=31)).strftime("%Y-%m-%dT%H:%M")
    wide = listed(shown(console, "/console/deliveries", **{"from": start}), "deliveries")
    assert len(wide) == 3


def test_deliveries_are_filtered_to_payments_not_the_amount_expected(console, conn):
    buy = purchase(conn)
    wrong = buy.captured(amount_paise=buy.amount_paise + 100)
    assert send(console, wrong).json()["status"] == "parked"
    other = purchase(conn)
    assert send(console, other.captured()).json()["status"] == "processed"
    logged(console, 2)
    found = listed(shown(console, "/console/deliveries", amount="mismatch"), "deliveries")
    assert len(found) == 1 and buy.reference in found[0]
    assert "paid ₹500.00, expected ₹499.00" in found[0]


def test_each_delivery_links_to_its_page_and_its_order(console, conn):
    buy = purchase(conn)
    delivery = buy.captured()
    send(console, delivery)
    logged(console, 1)
    line(conn, status=401, outcome="signature_mismatch", verified=False)
    page = shown(console, "/console/deliveries")
    key = delivery.headers["x-razorpay-event-id"]
    assert f'href="/console/deliveries/razorpay/{key}"' in page
    assert f'href="/console/references/razorpay/{buy.reference}"' in page
    assert "not proven authentic: nothing kept" in page
    assert console.logged_in().get(f"/console/deliveries/razorpay/{key}").status_code == 200


def test_deliveries_page_newest_first_and_every_line_once(console, conn):
    conn.execute(
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " detail, body_bytes, duration_ms)"
        " SELECT now() - (n / 3) * interval '1 second', 'razorpay', 200, 'processed', true,"
        " 'n' || n, 10, 1 FROM generate_series(1, 230) n"
    )  # three lines a second: paging must not lose or repeat lines of one instant
    client, seen, address, pages = console.logged_in(), [], "/console/deliveries", 0
    while address:
        page = client.get(address).text
        seen += [int(re.search(r" n(\d+)", row).group(1)) for row in listed(page, "deliveries")]
        older = re.search(r'href="(/console/deliveries\?[^"]+)" id="older"', page)
        address, pages = (html.unescape(older.group(1)) if older else None), pages + 1
    assert pages == 3
    assert sorted(seen) == list(range(1, 231))
    assert [n // 3 for n in seen] == sorted(n // 3 for n in seen)  # newest (smallest n) first


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"gateway": "<b>nope</b>"}, "The gateway is not one the console knows"),
        ({"outcome": "exploded"}, "The answer is not one the console knows"),
        ({"amount": "lots"}, "The amount filter is either empty or"),
        ({"confirmation": "lots"}, "The confirmation filter is either empty or"),
        ({"confirmation": "x" * 2000}, "The confirmation filter is too long"),
        ({"from": "yesterday-ish"}, "is not a time"),
        ({"from": "2026-12-03T15:00", "to": "2026-12-03T14:00"}, "must come before"),
        ({"before": "x"}, "The page to continue from is not valid"),
    ],
)
def test_a_filter_the_list_cannot_take_is_refused_and_not_echoed(console, params, said):
    answer = console.logged_in().get("/console/deliveries", params=params)
    assert answer.status_code == 400
    assert said in html.unescape(answer.text)
    assert "<b>nope</b>" not in answer.text and "exploded" not in answer.text


# --- the payments list -----------------------------------------------------------------------


def test_payments_list_applied_and_mismatched_payments_with_their_amounts(console, conn):
    good = purchase(conn)
    assert send(console, good.captured()).json()["status"] == "processed"
    bad = purchase(conn, Provider.CASHFREE)
    assert send(console, bad.captured(amount_paise=123_456_789)).json()["status"] == "parked"
    found = listed(shown(console, "/console/payments"), "payments")
    assert len(found) == 2
    [mismatch] = [r for r in found if bad.payment_id in r]
    assert "parked for its amount" in mismatch
    assert "₹499.00" in mismatch and "₹12,34,567.89" in mismatch
    [captured] = [r for r in found if good.payment_id in r]
    assert "captured" in captured and captured.count("₹499.00") == 2  # expected, and paid
    page = shown(console, "/console/payments")
    assert f'href="/console/references/razorpay/{good.reference}"' in page


def test_the_shops_payments_say_what_brought_them(console, conn, rig):
    """The "by" column read "—" for every payment of the reference shop's list, though each
    applied one's record (``payhooks_payments``) says whether a webhook or reconciliation
    brought it: a webhook's links to its delivery's page, as the core's list does."""
    hooked, found = purchase(conn), purchase(conn)
    assert send(console, hooked.captured()).json()["status"] == "processed"
    paid_at_gateway(rig.api, found)
    rig.run()
    tried = purchase(conn)
    assert send(console, tried.delivery("failed")).json()["status"] == "processed"
    [(event_id,)] = conn.execute(
        "SELECT event_id FROM payhooks_payments WHERE payment_id = %s", (hooked.payment_id,)
    ).fetchall()
    page = shown(console, "/console/payments")
    ids = (hooked.payment_id, found.payment_id, tried.payment_id)
    by = {pid: row.split()[-1] for row in listed(page, "payments") for pid in ids if pid in row}
    assert by == {hooked.payment_id: "webhook", found.payment_id: "reconciliation",
                  tried.payment_id: "—"}  # fmt: skip  # a failed attempt applied nothing
    table = page.split('id="payments"', 1)[1].split("</table>", 1)[0]
    assert f'href="/console/deliveries/razorpay/{quote(event_id, safe="")}">webhook</a>' in table


def test_a_failed_payment_attempt_is_listed_with_nothing_paid(console, conn):
    """A failed attempt is listed with the amount it tried in the "paid" column: ₹499.00
    expected, ₹499.00 paid, though nothing was."""
    tried = purchase(conn)
    assert send(console, tried.delivery("failed")).json()["status"] == "processed"
    [row] = listed(shown(console, "/console/payments"), "payments")
    assert "failed" in row and row.count("₹499.00") == 1  # expected; nothing paid


def test_an_order_past_a_refunds_year_says_it_was_purged_and_lists_its_refunds(console, conn):
    """Past a refund's year the purge takes the payment's record too: the order's page said
    "No expectation: the app did not call payhooks.expect" and "None yet: no payment of this
    order has reached the app's handlers", both false, and left out its refunds, kept."""
    from payhooks.operations import retention
    from payhooks.refunding import refunds

    bought = purchase(conn)
    assert send(console, bought.captured()).json()["status"] == "processed"
    logged(console, 1)  # its delivery-log line written before it is aged with the rest
    refunds.request(conn, "razorpay", bought.payment_id, 10_000, key="returned",
                            captured_paise=bought.amount_paise, reason="returned",
                            requested_by="asha", gateway_order_id=bought.reference)  # fmt: skip
    conn.execute("UPDATE payhooks_refunds SET state = 'processed', gateway_refund_id = 'rfnd_1'")
    for table, column in [("processed_webhooks", "processed_at"), ("payhooks_payments",
                          "applied_at"), ("payhooks_expectations", "created_at"),
                          ("payhooks_deliveries", "received_at")]:  # fmt: skip
        conn.execute(f"UPDATE {table} SET {column} = now() - interval '400 days'".encode())
    retention.purge(conn, 90)
    assert conn.execute("SELECT count(*) FROM payhooks_payments").fetchone() == (0,)
    page = shown(console, f"/console/orders/razorpay/{bought.reference}")
    page = " ".join(html.unescape(re.sub(r"<[^>]+>", "", page)).split())
    assert "No expectation: the app did not call" not in page
    assert "None yet: no payment" not in page
    assert "No expectation, delivery or payment record of this order is kept" in page
    assert f"No record kept of this order's payments ({bought.payment_id}): purged" in page
    assert "Refunds asked for" in page and "₹100.00processed rfnd_1" in page


def test_a_payment_whose_delivery_was_purged_links_to_no_delivery_page(console, conn):
    """A mismatch settled by hand outlives its delivery's purge: its row links to its order,
    never to the delivery page that is gone."""
    from payhooks.intake.expectations import resolve
    from payhooks.operations import retention

    bad = purchase(conn, Provider.CASHFREE)
    assert send(console, bad.captured(amount_paise=100)).json()["status"] == "parked"
    [(event_id,)] = conn.execute("SELECT event_id FROM processed_webhooks").fetchall()
    assert "/console/deliveries/cashfree/" in shown(console, "/console/payments")  # while kept
    resolve(conn, "cashfree", event_id, "refunded in the dashboard")
    logged(console, 1)  # its delivery log line is written, and goes with the purge too
    conn.execute("UPDATE processed_webhooks SET processed_at = now() - interval '100 days'")
    conn.execute("UPDATE payhooks_deliveries SET received_at = now() - interval '100 days'")
    retention.purge(conn, 90)
    assert conn.execute("SELECT count(*) FROM processed_webhooks").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM payhooks_deliveries").fetchone() == (0,)
    page = shown(console, "/console/payments")
    [row] = listed(page, "payments")
    assert bad.payment_id in row and "refunded in the dashboard" in row
    table = page.split('id="payments"', 1)[1].split("</table>", 1)[0]
    assert "/console/deliveries/" not in table
    assert f"/console/references/cashfree/{bad.reference}" in table
    # The link leads to its cart, which still tells of the payment: both amounts, how settled.
    cart = console.logged_in().get(
        f"/console/references/cashfree/{bad.reference}", follow_redirects=True
    )
    assert cart.status_code == 200 and f"/console/carts/{bad.cart_id}" in str(cart.url)
    kept = html.unescape(cart.text.split('id="mismatched"', 1)[1].split("</table>", 1)[0])
    assert bad.payment_id in kept and "₹1.00" in kept and "₹499.00" in kept
    assert "refunded in the dashboard" in kept


def test_payments_are_filtered_by_gateway_status_and_amount(console, conn):
    good = purchase(conn)
    send(console, good.captured())
    bad = purchase(conn, Provider.CASHFREE)
    send(console, bad.captured(amount_paise=100))

    def only(**params: str) -> list[str]:
        return listed(shown(console, "/console/payments", **params), "payments")

    assert [good.payment_id in r for r in only(gateway="razorpay")] == [True]
    assert [bad.payment_id in r for r in only(gateway="cashfree")] == [True]
    assert [good.payment_id in r for r in only(status="captured")] == [True]
    assert [bad.payment_id in r for r in only(status="mismatch")] == [True]
    assert [bad.payment_id in r for r in only(amount="mismatch")] == [True]
    assert "No payment matches" in only(status="settled")[0]


def test_payments_are_filtered_to_those_needing_a_refund(console, conn):
    buy = purchase(conn)
    send(console, buy.captured())
    second = buy.captured(payment_id="pay_second000001")  # the customer paid twice
    assert send(console, second).json()["status"] == "processed"
    found = listed(shown(console, "/console/payments", refund="needed"), "payments")
    assert len(found) == 1 and "pay_second000001" in found[0]
    assert "duplicate_payment" in found[0] and "needs a refund" in found[0]
    [row] = csv_of(console, "/console/payments.csv", refund="needed")
    assert row["needs_refund"] == "yes" and "duplicate_payment" in row["flags"]


def test_a_payment_parked_for_its_amount_needs_a_refund_until_it_is_settled(console, conn):
    """The shop's policy refunds a payment that was not the amount expected (its alert says
    "Refund needed: amount mismatch"): its list's "Refund: needed" shows it, until a person
    settles it."""
    bad = purchase(conn, Provider.CASHFREE)
    send(console, bad.captured(amount_paise=100))
    found = listed(shown(console, "/console/payments", refund="needed"), "payments")
    assert len(found) == 1 and bad.payment_id in found[0]
    [row] = csv_of(console, "/console/payments.csv", refund="needed")
    assert row["payment_id"] == bad.payment_id and row["needs_refund"] == "yes"
    conn.execute("UPDATE payhooks_amount_mismatches SET resolved_at = now(), resolution = 'x'")
    (none,) = listed(shown(console, "/console/payments", refund="needed"), "payments")
    assert "No payment matches" in none


def test_payments_page_through_payments_of_one_instant(console, conn):
    conn.execute(
        "INSERT INTO payments (provider, payment_id, status, amount_paise, created_at)"
        " SELECT 'razorpay', 'pay_' || n, 'captured', 100, now() - interval '1 hour'"
        " FROM generate_series(1, 150) n"
    )
    client, seen, address = console.logged_in(), set(), "/console/payments"
    while address:
        page = client.get(address).text
        found = [re.search(r"pay_(\d+)", row).group(1) for row in listed(page, "payments")]
        assert not seen & set(found)
        seen |= set(found)
        older = re.search(r'href="(/console/payments\?[^"]+)" id="older"', page)
        address = html.unescape(older.group(1)) if older else None
    assert seen == {str(n) for n in range(1, 151)}


@pytest.mark.parametrize(
    "before",
    ["not-a-cursor", "9999-12-31T23:59:59-23:00|x", "0001-01-01T00:00:00+14:00|cart_x"],
)
def test_a_payments_page_to_continue_from_that_the_console_never_made_is_refused(console, before):
    """A cursor the console never made, one past the console's times (1970 to 9998) too."""
    client = console.logged_in()
    for address, more in (("/console/payments", {}), ("/console/carts", {"email": "a@b.in"})):
        answer = client.get(address, params={"before": before, **more})
        assert answer.status_code == 400, (address, before)
        assert "not one the console made" in answer.text


# --- CSV exports -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/console/deliveries.csv", "/console/payments.csv"])
def test_an_export_opens_in_excel_as_utf8_with_a_byte_order_mark(console, conn, path):
    """Excel on Windows reads a CSV without a byte-order mark in the machine's code page: a
    customer's name in Devanagari, or the rupee sign, reads garbled. Each export starts with
    UTF-8's BOM, once, before the header; a reader of ``utf-8-sig`` sees none of it."""
    line(conn, merchant_ref="ऑर्डर-₹1", event_id="evt_hindi")
    body = console.logged_in().get(path).content
    assert body.startswith(b"\xef\xbb\xbf") and not body[3:].startswith(b"\xef\xbb\xbf")
    assert body.count(b"\xef\xbb\xbf") == 1
    header = next(csv.reader(io.StringIO(body.decode("utf-8-sig"))))
    assert not header[0].startswith("\ufeff")


def test_the_deliveries_csv_reads_back_with_the_lists_filter(console, conn):
    buy = purchase(conn)
    wrong = buy.captured(amount_paise=buy.amount_paise + 100)
    send(console, wrong)
    logged(console, 1)
    line(conn, "cashfree", event_id="evt_other")
    answer = console.logged_in().get("/console/deliveries.csv", params={"gateway": "razorpay"})
    disposition = answer.headers["content-disposition"]
    assert re.fullmatch(r'attachment; filename="payhooks-deliveries-\d{8}-\d{6}\.csv"', disposition)
    assert answer.headers["x-content-type-options"] == "nosniff"
    [row] = list(csv.DictReader(io.StringIO(answer.content.decode("utf-8-sig"))))
    assert row["gateway"] == "razorpay" and row["gateway_reference"] == buy.reference
    assert row["delivery_key"] == wrong.headers["x-razorpay-event-id"]
    assert row["outcome"] == "parked" and row["answer"] == "parked"
    assert (row["expected_rupees"], row["expected_paise"]) == ("499.00", "49900")
    assert (row["paid_rupees"], row["paid_paise"]) == ("500.00", "50000")
    received = datetime.fromisoformat(row["received_at"])
    assert received.utcoffset() == timedelta(hours=5, minutes=30)
    assert abs(datetime.now(UTC) - received) < timedelta(minutes=5)


def test_the_payments_csv_has_rupees_and_paise(console, conn):
    good = purchase(conn)
    send(console, good.captured())
    [row] = csv_of(console, "/console/payments.csv")
    assert row["payment_id"] == good.payment_id and row["status"] == "captured"
    assert (row["expected_rupees"], row["expected_paise"]) == ("499.00", "49900")
    assert (row["paid_rupees"], row["paid_paise"]) == ("499.00", "49900")
    assert row["gateway_order_id"] == good.reference and row["needs_refund"] == "no"
    assert datetime.fromisoformat(row["at"]).utcoffset() == timedelta(hours=5, minutes=30)


@pytest.mark.parametrize("typed", ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)",
                                   "\tcmd", "\r=1"])  # fmt: skip
def test_the_csv_writes_a_formula_as_text(console, conn, typed):
    line(conn, merchant_ref=typed, event_id=typed, detail=typed)
    [row] = csv_of(console, "/console/deliveries.csv")
    for column in ("gateway_reference", "delivery_key", "detail"):
        assert row[column] == "'" + typed, column


def test_the_csv_keeps_commas_quotes_and_newlines(console, conn):
    typed = 'a, "quoted"\nsecond line'
    line(conn, detail=typed)
    [row] = csv_of(console, "/console/deliveries.csv")
    assert row["detail"] == typed


def test_the_csv_is_bounded_and_read_a_batch_at_a_time(console, conn, monkeypatch):
    monkeypatch.setattr(export, "MAX_ROWS", 7)
    monkeypatch.setattr(export, "READ_ROWS", 3)
    conn.execute(
        "INSERT INTO payhooks_deliveries (received_at, provider, status, outcome, verified,"
        " detail, body_bytes, duration_ms) SELECT now() - n * interval '1 second', 'razorpay',"
        " 200, 'processed', true, 'n' || n, 10, 1 FROM generate_series(1, 20) n"
    )
    found = csv_of(console, "/console/deliveries.csv")
    assert [r["detail"] for r in found] == [f"n{n}" for n in range(1, 8)]


def test_a_csv_of_a_filter_it_cannot_take_is_refused(console):
    answer = console.logged_in().get("/console/payments.csv", params={"status": "odd"})
    assert answer.status_code == 400 and "text/html" in answer.headers["content-type"]


# --- the banners link to their deliveries ----------------------------------------------------


def banner_links(page: str) -> list[str]:
    alarms = re.findall(r'<div class="card alarm" role="alert">(.*?)</div>', page, flags=re.S)
    return [html.unescape(a) for alarm in alarms for a in re.findall(r'href="([^"]+)"', alarm)]


def test_each_banner_links_to_the_deliveries_it_is_about(console, conn):
    for _ in range(3):
        line(conn, "razorpay", 503, "database_unavailable", detail="five-oh-three")
    for _ in range(5):
        line(conn, "cashfree", 401, "signature_mismatch", detail="forged", verified=False)
    line(conn, "razorpay", 200, "processed", detail="fine")
    client = console.logged_in()
    failing, forged = banner_links(client.get("/console/").text)
    assert parse_qs(urlsplit(failing).query)["outcome"] == ["failed"]
    assert parse_qs(urlsplit(forged).query)["outcome"] == ["signature"]
    shown_failing = listed(client.get(failing).text, "deliveries")
    assert len(shown_failing) == 3 and all("five-oh-three" in r for r in shown_failing)
    shown_forged = listed(client.get(forged).text, "deliveries")
    assert len(shown_forged) == 5 and all("forged" in r for r in shown_forged)


def waited(conn, provider: str, keys: list[str], ago: timedelta) -> None:
    """Callbacks answered ``confirming`` ``ago``: their log lines and their waits."""
    conn.execute(
        "UPDATE payhooks_confirmations SET requested_at = now() - %s"
        " WHERE provider = %s AND event_id = ANY(%s)",
        (ago, provider, keys),
    )
    conn.execute(
        "UPDATE payhooks_deliveries SET received_at = now() - %s - interval '20 ms'"
        " WHERE provider = %s AND event_id = ANY(%s)",
        (ago, provider, keys),
    )


def test_the_unconfirmed_banner_tells_its_time_in_ist_and_links_to_those_callbacks(console, conn):
    """Two PhonePe callbacks have waited 40 and 30 minutes for the status API; a third of that
    half hour was confirmed meanwhile. The banner says when the oldest came, as the console
    shows every time, and its link lists the two waiting, not the one confirmed."""
    sent = []
    for _ in range(3):
        buy = purchase(conn, Provider.PHONEPE)
        assert send(console, buy.captured()).json()["status"] == "confirming"
        sent.append(buy)
    logged(console, 3)
    keys = [k for (k,) in rows(console, "SELECT event_id FROM payhooks_confirmations ORDER BY 1")]
    oldest, waiting, confirmed = keys
    waited(conn, "phonepe", [oldest], timedelta(minutes=40))
    waited(conn, "phonepe", [waiting, confirmed], timedelta(minutes=30))
    conn.execute(
        "UPDATE payhooks_confirmations SET verdict = 'confirmed', settled_at = now(),"
        " detail = 'the status API reports it' WHERE event_id = %s",
        (confirmed,),
    )
    [(since,)] = rows(console, "SELECT min(requested_at) FROM payhooks_confirmations")
    client = console.logged_in()
    page = client.get("/console/").text
    [banner] = re.findall(r'<div class="card alarm" role="alert">(.*?)</div>', page, flags=re.S)
    said = html.unescape(banner)
    assert "2 PhonePe callbacks have waited for PhonePe's status API" in said
    assert f"(the oldest since {when(since)})" in said and "UTC" not in said
    assert "`" not in said and "<code>payhooks confirm</code>" in said  # as the emails write it
    [link] = banner_links(page)
    assert html.unescape(re.search(r"<a [^>]*>([^<]+)</a>", banner).group(1)) == (
        "See PhonePe's callbacks waiting for the status API"
    )
    found = listed(client.get(link).text, "deliveries")
    assert len(found) == 2
    assert [k for k in (oldest, waiting, confirmed) if any(k in r for r in found)] == [
        oldest,
        waiting,
    ]
    assert "None was ever asked about" in said
    # Asked, and answered with no error (a refund the API reports on its way): never "none
    # was ever asked about", which sent an operator to check credentials that work.
    conn.execute("UPDATE payhooks_confirmations SET attempts = 2 WHERE verdict IS NULL")
    page = client.get("/console/").text
    [banner] = re.findall(r'<div class="card alarm" role="alert">(.*?)</div>', page, flags=re.S)
    said = html.unescape(banner)
    assert "None was ever asked about" not in said
    assert "has not yet reported as done what they claim" in said


def banner_list(console: Console) -> list[str]:
    """The deliveries listed by the one banner's link, the callbacks' log lines made old."""
    with psycopg.connect(console.database_url, autocommit=True) as db:
        db.execute("UPDATE payhooks_confirmations SET requested_at = now() - interval '30 min'")
        db.execute("UPDATE payhooks_deliveries SET received_at = now() - interval '31 min'")
    client = console.logged_in()
    [link] = banner_links(client.get("/console/").text)
    return listed(client.get(link).text, "deliveries")


def test_the_unconfirmed_banner_lists_a_second_payu_post_waiting_beside_its_first(console, conn):
    """A PayU success posted again naming another mihpayid waits for PayU's word under a key of
    its own, beside the first post's, which its log line names: it is listed, the first post
    (applied) is not."""
    buy = purchase(conn, Provider.PAYU)
    assert send(console, buy.captured()).json()["status"] == "processed"
    second = buy.captured(payment_id="403993715588888888")
    assert send(console, second).json()["status"] == "confirming"
    logged(console, 2)
    [found] = banner_list(console)
    assert "HTTP 200 confirming" in found


def test_the_unconfirmed_banner_lists_a_callback_posted_again_after_a_refuted_one(console, conn):
    """A PhonePe callback refuted took its key; the real one, other bytes under that key, waits
    under a key of its own (its body's hash after the key), which its log line names: it is
    listed, the refuted one is not."""
    buy = purchase(conn, Provider.PHONEPE)
    assert send(console, buy.captured()).json()["status"] == "confirming"
    conn.execute("UPDATE payhooks_confirmations SET verdict = 'refuted', settled_at = now()")
    conn.execute("UPDATE processed_webhooks SET outcome = 'refuted'")
    assert send(console, buy.captured(amount_paise=100)).json()["status"] == "confirming"
    logged(console, 2)
    assert rows(console, "SELECT count(*) FROM payhooks_confirmations WHERE verdict IS NULL") == [
        (1,)
    ]
    [found] = banner_list(console)
    assert "HTTP 200 confirming" in found


# --- replaying many at once ------------------------------------------------------------------


def parked_for(console: Console, reference: str, payment_id: str, provider="razorpay"):
    delivery = GATEWAY.razorpay(
        "payment.captured", payment_id=payment_id, order_id=reference, amount_paise=49_900
    )
    assert send(console, delivery).json()["status"] == "parked"
    return delivery.headers["x-razorpay-event-id"]


def checked_out(conn, reference: str) -> str:
    """A cart whose checkout now names ``reference``: its parked delivery applies on replay."""
    buy = purchase(conn)
    conn.execute("DELETE FROM checkouts WHERE cart_id = %s", (buy.cart_id,))
    carts.checkout(conn, buy.cart_id, Provider.RAZORPAY, reference)
    return buy.cart_id


def confirmed_form(page: str) -> dict[str, str]:
    form = re.split(r'method="post" action="[^"]*/parked/bulk"', page, maxsplit=1)[1]
    form = form.split("</form>")[0]
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', form))
    return {k: html.unescape(v) for k, v in fields.items() if k != "csrf"}


def test_a_bulk_replay_names_how_many_and_which_filter_before_acting(console, conn):
    parked_for(console, "order_" + "A" * 14, "pay_bulk00000001")
    parked_for(console, "order_" + "B" * 14, "pay_bulk00000002")
    page = " ".join(shown(console, "/console/parked/bulk", gateway="razorpay").split())
    assert "<strong>2</strong> deliveries to replay: parked Razorpay deliveries received" in page
    assert "Replay all 2" in page
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]
    assert "<strong>0</strong>" in shown(console, "/console/parked/bulk", gateway="cashfree")


def test_a_bulk_replay_replays_each_once_and_records_each(console, conn):
    applies = [parked_for(console, "order_" + c * 14, f"pay_bulk0000000{n}")
               for n, c in enumerate("CD")]  # fmt: skip
    stays = parked_for(console, "order_" + "E" * 14, "pay_bulk00000009")
    for c in "CD":
        checked_out(conn, "order_" + c * 14)
    client = console.logged_in()
    page = client.get("/console/parked/bulk", params={"gateway": "razorpay"}).text
    form = {"csrf": csrf_of(page), **confirmed_form(page)}
    first = client.post("/console/parked/bulk", data=form)
    assert first.status_code == 303
    done = client.get(first.headers["location"]).text
    assert "This submit replayed 3" in done and "(2 applied, 1 still parked" in done
    assert "<strong>0</strong> deliveries to replay" in done
    assert rows(console, "SELECT count(*) FROM orders") == [(2,)]
    items = rows(console, "SELECT target, result FROM payhooks_console_actions"
                          " WHERE action = 'replay' ORDER BY id")  # fmt: skip
    assert sorted(items) == sorted([(applies[0], "applied"), (applies[1], "applied"),
                                    (stays, "still_parked")])  # fmt: skip
    again = client.get(client.post("/console/parked/bulk", data=form).headers["location"]).text
    assert "This submit replayed 0" in again
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions WHERE action = 'replay'"
                ) == [(3,)]  # fmt: skip
    summaries = rows(console, "SELECT operator, provider, result FROM payhooks_console_actions"
                              " WHERE action = 'bulk_replay' ORDER BY id")  # fmt: skip
    assert summaries == [
        (OPERATOR, "razorpay", "3 replayed, 2 applied, 0 left"),
        (OPERATOR, "razorpay", "0 replayed, 0 applied, 0 left"),
    ]
    log = client.get("/console/actions").text
    assert "replay many at once" in log and stays in log


def test_a_bulk_replay_counts_a_callback_now_waiting_for_its_status_api_apart(console, conn):
    """A PhonePe callback parked before payhooks had callbacks confirmed (its record kept from
    an earlier release): replayed, it waits for the status API, nothing applied. The submit says
    so, and its line of the action log, not that it is still parked or failed."""
    buy = purchase(conn, Provider.PHONEPE)
    assert send(console, buy.captured()).json()["status"] == "confirming"
    conn.execute("DELETE FROM payhooks_confirmations")
    conn.execute("UPDATE processed_webhooks SET outcome = 'parked'")
    client = console.logged_in()
    page = client.get("/console/parked/bulk", params={"gateway": "phonepe"}).text
    form = {"csrf": csrf_of(page), **confirmed_form(page)}
    done = client.get(client.post("/console/parked/bulk", data=form).headers["location"]).text
    assert "This submit replayed 1" in done
    assert "(0 applied, 1 waiting for the status API, 0 still parked or failed" in done
    assert rows(console, "SELECT outcome FROM processed_webhooks") == [("confirming",)]
    summaries = rows(console, "SELECT result FROM payhooks_console_actions"
                              " WHERE action = 'bulk_replay'")  # fmt: skip
    assert summaries == [("1 replayed, 0 applied, 1 waiting for the status API, 0 left",)]


@pytest.mark.parametrize("field", ["applied", "waiting"])
def test_a_bulk_replays_count_it_cannot_take_is_named(console, field):
    answer = console.logged_in().get("/console/parked/bulk", params={field: "-1"})
    assert answer.status_code == 400 and f"The count {field}" in answer.text


def test_a_bulk_replay_goes_on_past_a_delivery_whose_cart_another_transaction_holds(
    database_url, conn
):
    """One delivery's cart held by another transaction past the lock timeout is that
    delivery's trouble (said, left parked, replayed again later), not the whole submit's."""
    from dataclasses import replace

    from payhooks.service.web import create_app
    from tests.conftest import serving_app
    from tests.console.conftest import password_hash
    from tests.factories import SETTINGS

    conn.execute("INSERT INTO payhooks_operators (name, password_hash) VALUES (%s, %s)",
                 (OPERATOR, password_hash()))  # fmt: skip
    app = create_app(replace(SETTINGS, lock_timeout_ms=200), api_token="t", url=database_url)
    with serving_app(app) as base_url:
        console = Console(base_url=base_url, database_url=database_url, app=app)
        held, applies = (parked_for(console, "order_" + c * 14, f"pay_bulkheld00000{n}")
                         for n, c in enumerate("HJ"))  # fmt: skip
        held_cart = checked_out(conn, "order_" + "H" * 14)
        checked_out(conn, "order_" + "J" * 14)
        client = console.logged_in()
        page = client.get("/console/parked/bulk").text
        form = {"csrf": csrf_of(page), **confirmed_form(page)}
        with psycopg.connect(database_url) as holder:
            holder.execute("SELECT 1 FROM carts WHERE id = %s FOR UPDATE", (held_cart,))
            first = client.post("/console/parked/bulk", data=form)
        assert first.status_code == 303
        done = client.get(first.headers["location"]).text
        assert "This submit replayed 2" in done and "(1 applied" in done
        items = rows(console, "SELECT target, result FROM payhooks_console_actions"
                              " WHERE action = 'replay' ORDER BY id")  # fmt: skip
        assert sorted(items) == sorted([(held, "busy"), (applies, "applied")])
        page = client.get("/console/parked/bulk").text  # the cart let go: a new replay
        form = {"csrf": csrf_of(page), **confirmed_form(page)}
        again = client.post("/console/parked/bulk", data=form)
        done = " ".join(client.get(again.headers["location"]).text.split())
        assert "This submit replayed 1" in done and "(1 applied" in done
        assert rows(console, "SELECT count(*) FROM orders") == [(2,)]


def test_a_bulk_replay_takes_a_batch_at_a_time_and_says_how_many_are_left(
    console, conn, monkeypatch
):
    monkeypatch.setattr(bulk, "BATCH", 2)
    for n in range(5):
        parked_for(console, f"order_{n:014d}", f"pay_bulkbatch000{n}")
    client = console.logged_in()
    page = client.get("/console/parked/bulk").text
    assert "Replay the first 2 of 5" in page
    form = {"csrf": csrf_of(page), **confirmed_form(page)}
    said = []
    for _ in range(4):
        done = client.get(client.post("/console/parked/bulk", data=form).headers["location"])
        said.append(re.search(r"This submit replayed (\d+).*?(\d+) left", done.text, re.S).groups())
    assert said == [("2", "3"), ("2", "1"), ("1", "0"), ("0", "0")]
    replayed = rows(console, "SELECT target FROM payhooks_console_actions WHERE action = 'replay'")
    assert len(replayed) == len(set(replayed)) == 5


def test_a_bulk_replay_keeps_to_its_gateway_and_time(console, conn):
    inside = parked_for(console, "order_" + "F" * 14, "pay_bulkgate0001")
    outside = parked_for(console, "order_" + "G" * 14, "pay_bulkgate0002")
    conn.execute(
        "UPDATE processed_webhooks SET processed_at = now() - interval '3 hours'"
        " WHERE event_id = %s",
        (outside,),
    )
    start = (datetime.now(UTC) - timedelta(hours=1)).astimezone(IST).strftime("%Y-%m-%dT%H:%M")
    client = console.logged_in()
    page = client.get("/console/parked/bulk", params={"gateway": "razorpay", "from": start}).text
    assert "<strong>1</strong> delivery to replay" in page
    client.post("/console/parked/bulk", data={"csrf": csrf_of(page), **confirmed_form(page)})
    replayed = rows(console, "SELECT target FROM payhooks_console_actions WHERE action = 'replay'")
    assert replayed == [(inside,)]


def test_a_bulk_replay_without_the_sessions_token_replays_nothing(console, conn):
    parked_for(console, "order_" + "H" * 14, "pay_bulkcsrf0001")
    client = console.logged_in()
    page = client.get("/console/parked/bulk").text
    for token in ({}, {"csrf": "guess"}):
        answer = client.post("/console/parked/bulk", data={**confirmed_form(page), **token})
        assert answer.status_code == 403
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]


def test_a_read_only_operator_sees_the_count_but_cannot_replay_in_bulk(console, conn):
    parked_for(console, "order_" + "J" * 14, "pay_bulkread0001")
    with psycopg.connect(console.database_url, autocommit=True) as db:
        operators.add_operator(db, "ravi", PASSWORD, read_only=True)
    client = console.logged_in("ravi")
    page = client.get("/console/parked/bulk").text
    assert "<strong>1</strong> delivery to replay" in page
    assert 'action="/console/parked/bulk"' in page  # the filter's GET form only
    assert 'method="post" action="/console/parked/bulk"' not in page
    as_of = datetime.now(UTC).isoformat()
    answer = client.post("/console/parked/bulk", data={"csrf": csrf_of(page), "as_of": as_of})
    assert answer.status_code == 403
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]
    assert "Replay the parked" not in client.get("/console/deliveries?outcome=parked").text


def test_a_bulk_replay_needs_the_moment_it_was_confirmed(console):
    client = console.logged_in()
    page = client.get("/console/parked/bulk").text
    for as_of in ("", "soon"):
        answer = client.post("/console/parked/bulk", data={"csrf": csrf_of(page), "as_of": as_of})
        assert answer.status_code == 400


def test_the_parked_deliveries_list_leads_to_their_bulk_replay(console, conn):
    parked_for(console, "order_" + "K" * 14, "pay_bulklink0001")
    logged(console, 1)
    page = shown(console, "/console/deliveries", outcome="parked", gateway="razorpay")
    link = html.unescape(re.search(r'href="([^"]+)" id="bulk"', page).group(1))
    assert parse_qs(urlsplit(link).query)["gateway"] == ["razorpay"]
    assert "<strong>1</strong> delivery to replay" in console.logged_in().get(link).text
    assert 'href="/console/parked/bulk"' in shown(console, "/console/parked")


def test_two_bulk_replays_submitted_together_make_one_order_each(console, conn):
    for c in "LMN":
        parked_for(console, "order_" + c * 14, f"pay_bulktwin000{c}")
        checked_out(conn, "order_" + c * 14)
    client = console.logged_in()
    page = client.get("/console/parked/bulk").text
    form = {"csrf": csrf_of(page), **confirmed_form(page)}
    barrier, answers = threading.Barrier(2), []

    def submit() -> None:
        with loopback.Client(base_url=console.base_url, cookies=client.cookies) as twin:
            barrier.wait()
            answers.append(twin.post("/console/parked/bulk", data=form).status_code)

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [303, 303]
    assert rows(console, "SELECT count(*), count(DISTINCT cart_id) FROM orders") == [(3, 3)]
    results = rows(console, "SELECT result FROM payhooks_console_actions WHERE action = 'replay'")
    assert sorted(r for (r,) in results).count("applied") == 3  # each applied once, by one
    assert rows(console, "SELECT count(*) FROM processed_webhooks WHERE outcome = 'parked'") == [
        (0,)
    ]

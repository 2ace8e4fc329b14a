"""Dead letters in the shop's console, with a real SMTP server on loopback (aiosmtpd): the
server's refusal kept as it said it, the cart and order each is about, "Retry all", and a
corrected address the email is then sent to."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import psycopg
import pytest

from payhooks.service import database
from tests.conftest import Inbox
from tests.console.conftest import OPERATOR, csrf_of, said
from tests.console.test_console_http import rows, send
from tests.factories import SETTINGS, purchase
from tests.integration.test_mail_refusals import serving, worker_for


class Refusing(Inbox):
    """Refuses a mailbox named ``gone`` as Postfix does an unknown one."""

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.startswith("gone"):
            return "550 5.1.1 <gone@example.com>: Recipient address rejected: mailbox unavailable"
        return await super().handle_RCPT(server, session, envelope, address, rcpt_options)


@pytest.fixture
def pool(database_url: str) -> Iterator[database.psycopg_pool.ConnectionPool]:
    opened = database.open_pool(database_url, SETTINGS, max_size=2, deadline=False)
    yield opened
    opened.close()


def paid_by(console, conn, email: str) -> str:
    """A paid cart of ``email``: its confirmation email queued. Returns the cart id."""
    buy = purchase(conn)
    conn.execute("UPDATE carts SET customer_email = %s WHERE id = %s", (email, buy.cart_id))
    assert send(console, buy.captured()).json()["status"] == "processed"
    return buy.cart_id


def dead_page_rows(client) -> list[str]:
    page = client.get("/console/dead").text
    table = page[page.index("<table") :]
    found = re.findall(r"<tr>\s*<td[^>]*>(.*?)</tr>", table, re.S)
    return [html.unescape(" ".join(re.sub(r"<[^>]+>", " ", r).split())) for r in found]


def test_a_refused_recipient_keeps_the_servers_code_and_text(console, conn, pool):
    paid_by(console, conn, "gone@example.com")
    with serving(Refusing()) as port:
        worker_for(pool, port).drain()
    [(error,)] = rows(console, "SELECT last_error FROM outbox WHERE failed_at IS NOT NULL")
    assert error == (
        "recipient refused: 550 5.1.1 <gone@example.com>: Recipient address rejected: "
        "mailbox unavailable"
    )
    [row] = dead_page_rows(console.logged_in())
    assert "550 5.1.1 <gone@example.com>: Recipient address rejected: mailbox unavailable" in row


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("recipient refused: [550]", "recipient refused: 550 (the server's text was not kept)"),
        ("recipient refused: [550, 551]",
         "recipient refused: 550, 551 (the server's text was not kept)"),
        ("SMTP 552: '5.3.4 Message too big'", "SMTP 552 5.3.4 Message too big"),
        ("SMTP smtp.example.com:25 sender refused: SMTP 553: \"5.7.1 it's refused\"",
         "SMTP smtp.example.com:25 sender refused: SMTP 553 5.7.1 it's refused"),
        ("recipient refused: 550 5.1.1 mailbox unavailable",
         "recipient refused: 550 5.1.1 mailbox unavailable"),
        (None, "—"),
    ],
)  # fmt: skip
def test_errors_recorded_before_the_servers_text_was_kept_read_plainly(stored, shown):
    from payhooks.service.console.actions import readable_error

    assert readable_error(stored) == shown


def test_an_old_rows_error_reads_plainly_on_the_page(console, conn):
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, failed_at, attempts,"
        " last_error) VALUES ('email', 'k1', 'a@example.com', 's', 'b', now(), 8,"
        " 'recipient refused: [550]')"
    )
    [row] = dead_page_rows(console.logged_in())
    assert "recipient refused: 550 (the server's text was not kept)" in row
    assert "[550]" not in row


def test_a_dead_letter_links_to_its_cart_and_order(console, conn):
    cart_id = paid_by(console, conn, "buyer@example.com")
    conn.execute("UPDATE outbox SET failed_at = now(), last_error = 'x'")
    [(order_id,)] = rows(console, "SELECT id FROM orders")
    client = console.logged_in()
    page = client.get("/console/dead").text
    assert f'<a href="/console/carts/{cart_id}">cart {cart_id}</a>, order ' in page
    assert f'<span class="long">{order_id}</span>' in page  # broken where a column must


def dead(conn, count: int) -> list[int]:
    for n in range(count):
        conn.execute(
            "INSERT INTO outbox (kind, dedupe_key, recipient, subject, body, failed_at, attempts,"
            " last_error) VALUES ('email', %s, 'a@example.com', 's', 'b', now(), 8, 'x')",
            (f"k{n}",),
        )
    return [i for (i,) in conn.execute("SELECT id FROM outbox ORDER BY id").fetchall()]


def listed_on(page: str) -> str:
    """The ids the page's "Retry all" form names."""
    return re.search(r'name="listed" value="([0-9,]*)"', page).group(1)


def retry_all_of(client, page: str, **form: str):
    data = {"csrf": csrf_of(page), "listed": listed_on(page), "confirm": "yes", **form}
    return client.post("/console/dead/retry-all", data=data)


def test_retry_all_queues_every_dead_letter_once_each_logged(console, conn):
    ids = dead(conn, 3)
    client = console.logged_in()
    page = client.get("/console/dead").text
    first = retry_all_of(client, page)
    again = retry_all_of(client, page)
    assert said(first) == "/console/dead?notice=all_queued"
    assert said(again) == "/console/dead?notice=nothing_dead"
    assert rows(console, "SELECT count(*) FROM outbox WHERE failed_at IS NULL") == [(3,)]
    logged = rows(console, "SELECT operator, action, target, result FROM"
                  " payhooks_console_actions ORDER BY target")  # fmt: skip
    assert logged == sorted((OPERATOR, "retry", str(i), "queued") for i in ids)


def test_retry_all_queues_the_letters_its_page_listed_never_older_ones_it_did_not_show(
    console, conn
):
    """Past a page of dead letters, the page says how many more there are; "Retry all" from a
    page read before a colleague's queues nothing that page did not show, and says so."""
    from payhooks.service.console.actions import DEAD_PAGE

    ids = dead(conn, DEAD_PAGE + 3)
    first, second = console.logged_in(), console.logged_in()
    page_a, page_b = first.get("/console/dead").text, second.get("/console/dead").text
    assert f"The newest {DEAD_PAGE} of {DEAD_PAGE + 3} dead letters are listed" in page_a
    assert said(retry_all_of(first, page_a)) == "/console/dead?notice=all_queued"
    assert said(retry_all_of(second, page_b)) == "/console/dead?notice=nothing_dead"
    still = rows(console, "SELECT id FROM outbox WHERE failed_at IS NOT NULL ORDER BY id")
    assert still == [(i,) for i in ids[:3]]  # the oldest three: shown next, never retried unseen


def test_retry_all_after_a_colleague_retried_one_says_only_the_rest_were_queued(console, conn):
    """It said "every dead letter listed" was queued, though one was a colleague's already."""
    from payhooks.service.console.actions import retry_dead_letter

    ids = dead(conn, 3)
    client = console.logged_in()
    page = client.get("/console/dead").text
    retry_dead_letter(conn, ids[0], operator="colleague")
    answer = retry_all_of(client, page)
    assert said(answer) == "/console/dead?notice=some_queued"
    told = client.get(answer.headers["location"]).text
    assert "the others had been queued again already" in told


@pytest.mark.parametrize("action", ["retry", "readdress"])
def test_retrying_a_dead_letter_never_recorded_says_so(console, conn, action):
    """It said the message "was already queued again", of an id no message has."""
    dead(conn, 1)
    client = console.logged_in()
    page = client.get("/console/dead").text
    form = {"csrf": csrf_of(page), "message_id": "987654", "confirm": "yes",
            "recipient": "b@example.com"}  # fmt: skip
    answer = client.post(f"/console/dead/{action}", data=form)
    assert said(answer) == "/console/dead?notice=no_such_message"
    told = client.get(answer.headers["location"]).text
    assert "no such message is recorded" in told
    assert rows(console, "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL") == [(1,)]


def test_retry_all_naming_no_dead_letters_listed_is_refused(console, conn):
    dead(conn, 1)
    client = console.logged_in()
    page = client.get("/console/dead").text
    for listed in ("", "0", "1,,2", "x", "-1", "9" * 19):
        answer = retry_all_of(client, page, listed=listed)
        assert answer.status_code == 400, listed
    assert rows(console, "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL") == [(1,)]


def test_retry_all_unconfirmed_does_nothing(console, conn):
    dead(conn, 2)
    client = console.logged_in()
    answer = retry_all_of(client, client.get("/console/dead").text, confirm="")
    assert said(answer) == "/console/dead?notice=not_confirmed"
    assert rows(console, "SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL") == [(2,)]
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]


def test_a_corrected_address_gets_the_email_and_the_change_is_logged(console, conn, pool):
    paid_by(console, conn, "gone@example.com")
    inbox = Refusing()
    with serving(inbox) as port:
        worker_for(pool, port).drain()
        [(message_id,)] = rows(console, "SELECT id FROM outbox WHERE failed_at IS NOT NULL")
        client = console.logged_in()
        form = {"csrf": csrf_of(client.get("/console/dead").text), "message_id": message_id,
                "recipient": " Asha.Rao@Example.COM ", "confirm": "yes"}  # fmt: skip
        answer = client.post("/console/dead/readdress", data=form)
        again = client.post("/console/dead/readdress", data=form)
        assert said(answer) == "/console/dead?notice=readdressed"
        assert said(again) == "/console/dead?notice=already_queued"
        assert worker_for(pool, port).drain() == 1
    [sent] = inbox.messages
    assert sent["To"] == "Asha.Rao@example.com"  # the domain normalised, the mailbox kept
    assert rows(console, "SELECT recipient, sent_at IS NOT NULL FROM outbox") == [
        ("Asha.Rao@example.com", True)
    ]
    logged = "SELECT action, target, result FROM payhooks_console_actions ORDER BY id"
    assert rows(console, logged) == [
        ("readdress", str(message_id), "readdressed"),
        ("readdress", str(message_id), "already_queued"),
    ]


@pytest.mark.parametrize(
    ("address", "said"),
    [("not an address", "That address cannot be mailed"),
     ("a@b, c@d.com", "That address cannot be mailed"),
     ("x@localhost", "That address cannot be mailed"),
     ("", "The email address is missing.")],
)  # fmt: skip
def test_an_address_that_cannot_be_mailed_is_refused_saying_why(console, conn, address, said):
    [message_id] = dead(conn, 1)
    client = console.logged_in()
    form = {"csrf": csrf_of(client.get("/console/dead").text), "message_id": message_id,
            "recipient": address, "confirm": "yes"}  # fmt: skip
    answer = client.post("/console/dead/readdress", data=form)
    assert answer.status_code == 400
    assert said in answer.text and ".." not in answer.text  # the reason's own full stop once
    if said.startswith("That address"):  # headed so, and leading back to the dead letters
        assert "<h1>Not sent again</h1>" in answer.text
        assert '<a href="/console/dead">Back to dead letters</a>' in answer.text
    assert rows(console, "SELECT recipient, failed_at IS NOT NULL FROM outbox") == [
        ("a@example.com", True)
    ]
    assert rows(console, "SELECT count(*) FROM payhooks_console_actions") == [(0,)]


def test_a_read_only_operator_cannot_retry_all_or_readdress(console, conn):
    from payhooks.operations import operators
    from tests.console.conftest import PASSWORD

    [message_id] = dead(conn, 1)
    with psycopg.connect(console.database_url, autocommit=True) as db:
        operators.add_operator(db, "ravi", PASSWORD, read_only=True)
    client = console.logged_in("ravi")
    page = client.get("/console/dead").text
    assert "Retry all" not in page and "Send to this address" not in page
    token = csrf_of(page)
    for path, form in (("/console/dead/retry-all", {"confirm": "yes", "listed": message_id}),
                       ("/console/dead/readdress", {"message_id": message_id, "confirm": "yes",
                                                    "recipient": "b@example.com"})):  # fmt: skip
        assert client.post(path, data={"csrf": token, **form}).status_code == 403
    assert rows(console, "SELECT recipient, failed_at IS NOT NULL FROM outbox") == [
        ("a@example.com", True)
    ]


def about_cells(page: str) -> dict[str, str]:
    """Each dead letter's "about" cell, by its subject's text: its markup."""
    table = page[page.index("<table") :]
    found = re.findall(
        r'<td data-label="subject">(.*?)</td>\s*<td data-label="about">(.*?)</td>', table, re.S
    )
    return {html.unescape(re.sub(r"<[^>]+>", "", subject)): about for subject, about in found}


def test_a_dead_alert_says_what_it_is_about_or_nothing(console, conn):
    """An alert's row read "about —" (on a phone, "about: —"): only an order's confirmation
    named what it was about. An alert names its payment (linked to its cart) or its gateway
    reference (linked to its page); one naming nothing leaves the cell empty, so a phone
    shows no "about" at all."""
    from tests.console.test_console_http import parked_delivery

    buy = purchase(conn)
    assert send(console, buy.captured()).json()["status"] == "processed"
    twice = buy.captured(payment_id="pay_second000001")  # paid twice: a refund is needed
    assert send(console, twice).json()["status"] == "processed"
    _, reference = parked_delivery(console)  # "Webhook parked"
    conn.execute(
        "INSERT INTO outbox (kind, dedupe_key, subject, body) VALUES"
        " ('alert', 'alert:by-hand', 'Disk nearly full', 'b')"
    )
    conn.execute("UPDATE outbox SET failed_at = now(), last_error = 'x'")
    cells = about_cells(console.logged_in().get("/console/dead").text)
    [double] = [about for subject, about in cells.items() if "pay_second000001" in subject]
    assert f'<a href="/console/carts/{buy.cart_id}">cart {buy.cart_id}</a>' in double
    assert 'Razorpay payment <code><span class="long">pay_second000001</span></code>' in double
    parked = cells["Webhook parked: Razorpay payment.captured"]
    assert f'Razorpay reference <a href="/console/references/razorpay/{reference}">' in parked
    assert cells["Disk nearly full"] == ""
    assert not any(about.strip() == "—" for about in cells.values()), cells

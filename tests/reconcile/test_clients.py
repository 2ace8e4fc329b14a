"""The status API clients over real loopback sockets: a wall-clock deadline per call, however
the server trickles; a bound on the answer's size, read as it streams; and the gateway's own
words when it refuses (its error code and description, PayU's ``msg``)."""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import pytest

from payhooks.events import Provider
from payhooks.gateways import ApiCredentials
from payhooks.gateways._refunds import Refund, RefundRefused
from payhooks.gateways._reports import Report
from payhooks.gateways._status import MAX_ANSWER_BYTES, CredentialsRefused, http_client
from payhooks.gateways.cashfree import status as cashfree_status
from payhooks.gateways.cashfree.status import CashfreeClient
from payhooks.gateways.payu import status as payu_status
from payhooks.gateways.payu.status import PayUClient
from payhooks.gateways.razorpay.status import RazorpayClient
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload

DEADLINE_S = 0.5
TRICKLE_PAUSE_S = 0.05


@dataclass
class Server:
    """A raw HTTP server on a loopback port; ``sent`` counts the bytes it got out."""

    url: str = ""
    sent: int = 0
    done: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def raw_server(answer: Callable[[socket.socket, Server], None]) -> Iterator[Server]:
    server = Server()
    listener = socket.create_server(("127.0.0.1", 0))
    server.url = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                _read_request(conn)
                with contextlib.suppress(OSError):
                    answer(conn, server)
        server.done.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        listener.close()


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk:
            return
        data += chunk


def _trickle(response: bytes) -> Callable[[socket.socket, Server], None]:
    def answer(conn: socket.socket, server: Server) -> None:
        for byte in response:
            conn.sendall(bytes([byte]))
            server.sent += 1
            time.sleep(TRICKLE_PAUSE_S)

    return answer


def _flood(head: bytes, chunked: bool, total: int) -> Callable[[socket.socket, Server], None]:
    piece = b" " * 65536

    def answer(conn: socket.socket, server: Server) -> None:
        conn.sendall(head)
        while server.sent < total:
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            server.sent += len(piece)

    return answer


def _razorpay(url: str, timeout_s: float = DEADLINE_S) -> RazorpayClient:
    credentials = ApiCredentials(provider=Provider.RAZORPAY, id="rzp", secret="s", base_url=url)
    return RazorpayClient(credentials=credentials, http=http_client(timeout_s))


ANSWER = b'{"entity":"collection","count":0,"items":[]}' + b" " * 200
SLOW_HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    % (len(ANSWER), ANSWER)
)


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickling_status_api_is_cut_off_at_the_calls_deadline(where):
    head, body = SLOW_HEADERS.split(b"\r\n\r\n", 1)
    if where == "headers":
        answer = _trickle(SLOW_HEADERS)
    else:

        def answer(conn: socket.socket, server: Server) -> None:
            conn.sendall(head + b"\r\n\r\n")
            _trickle(body)(conn, server)

    with raw_server(answer) as server:
        with pytest.raises(GatewayApiError) as raised:
            _razorpay(server.url).report("order_T3st")
        sent_when_cut = server.sent
    assert raised.value.reason == "timed out"
    assert raised.value.outage  # like a 5xx: a few in a row pause the gateway
    # Each byte alone came well within the per-read timeout; the call as a whole did not.
    assert sent_when_cut < len(SLOW_HEADERS if where == "headers" else body)


@pytest.mark.parametrize("chunked", [True, False])
def test_an_answer_past_the_size_bound_is_refused_while_it_streams(chunked):
    total = 64 * MAX_ANSWER_BYTES
    framing = b"Transfer-Encoding: chunked" if chunked else b"Connection: close"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%s\r\n\r\n" % framing
    with raw_server(_flood(head, chunked, total)) as server:
        with pytest.raises(GatewayApiError) as raised:
            _razorpay(server.url, timeout_s=30).report("order_T3st")
        assert server.done.wait(30)
    assert raised.value.reason == f"answer larger than {MAX_ANSWER_BYTES} bytes"
    assert raised.value.outage
    assert server.sent < total // 4  # the client hung up long before the end


def test_an_answer_declaring_a_length_past_the_bound_is_refused_unread():
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
        200 * MAX_ANSWER_BYTES
    )
    with raw_server(_flood(head, False, 200 * MAX_ANSWER_BYTES)) as server:
        with pytest.raises(GatewayApiError, match="larger than"):
            _razorpay(server.url, timeout_s=30).report("order_T3st")
        assert server.done.wait(30)
    assert server.sent < 20 * MAX_ANSWER_BYTES


def _json_answer(status: int, doc: object) -> Callable[[socket.socket, Server], None]:
    body = json.dumps(doc).encode()

    def answer(conn: socket.socket, server: Server) -> None:
        conn.sendall(
            b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (status, len(body), body)
        )

    return answer


def test_a_razorpay_refusal_shows_the_gateways_description_beside_its_code(rig):
    wrong = _razorpay(rig.url)
    with pytest.raises(CredentialsRefused) as raised:
        wrong.report("order_T3st")
    assert raised.value.reason == (
        "answered 401 (BAD_REQUEST_ERROR: The API key provided is invalid)"
    )


def test_a_cashfree_refusal_shows_the_gateways_message_beside_its_code(rig):
    credentials = ApiCredentials(
        provider=Provider.CASHFREE, id="cf", secret="wrong", base_url=rig.url
    )
    with pytest.raises(CredentialsRefused) as raised:
        CashfreeClient(credentials=credentials, http=rig.http).report("ph_T3st")
    assert raised.value.reason == "answered 401 (request_failed: authentication Failed)"


@pytest.mark.parametrize("status", [400, 422])
def test_a_cashfree_error_typed_as_a_rate_limit_or_refused_credentials_is_read_so(status):
    """Cashfree's error ``type`` says whose an error is, whatever its status: a
    ``rate_limit_error`` is a rate limit (the gateway paused for the pass, as a 429), an
    ``authentication_error`` the credentials refused (the gateway paused, the refusal shown).
    Read by status alone, each was one checkout's error: every checkout asked in turn, feeding
    the limit, and refused credentials never shown as refused."""
    credentials = ApiCredentials(provider=Provider.CASHFREE, id="cf", secret="s", base_url="")
    limited = {"message": "too many requests", "code": "request_failed", "type": "rate_limit_error"}
    with (
        raw_server(_json_answer(status, limited)) as server,
        pytest.raises(GatewayApiError) as raised,
    ):
        CashfreeClient(credentials=replace(credentials, base_url=server.url),
                       http=http_client(5.0)).report("ph_T3st")  # fmt: skip
    assert raised.value.rate_limited and not isinstance(raised.value, CredentialsRefused)
    assert raised.value.reason == f"answered {status} (request_failed: too many requests)"
    refused = {
        "message": "bad keys",
        "code": "authentication_failed",
        "type": "authentication_error",
    }
    with raw_server(_json_answer(status, refused)) as server, pytest.raises(CredentialsRefused):
        CashfreeClient(credentials=replace(credentials, base_url=server.url),
                       http=http_client(5.0)).report("ph_T3st")  # fmt: skip


def test_a_gateways_description_is_bounded_and_printable_only():
    said = "bad\x00key\u2028\ud800" + "x" * 5000
    doc = {"error": {"code": "BAD_REQUEST_ERROR", "description": said}}
    with raw_server(_json_answer(400, doc)) as server, pytest.raises(GatewayApiError) as raised:
        _razorpay(server.url).report("order_T3st")
    reason = raised.value.reason
    assert reason.startswith("answered 400 (BAD_REQUEST_ERROR: bad key  ")
    assert reason.isprintable() and len(reason) < 300
    reason.encode("utf-8")  # storable as last_error


def test_a_payu_error_outside_a_200_shows_its_msg():
    """PayU words its errors in ``msg`` (docs/operations.md: every error keeps them), under
    a 200 as documented, and under another status when a proxy or an outage answers so."""
    doc = {"status": 0, "msg": "Service under maintenance"}
    with raw_server(_json_answer(503, doc)) as server, pytest.raises(GatewayApiError) as raised:
        _payu(server.url, "salt").report("ph_T3st")
    assert raised.value.reason == "answered 503 (Service under maintenance)"


def _payu(url: str, salt: str) -> PayUClient:
    credentials = ApiCredentials(provider=Provider.PAYU, id="gtKFFx", secret=salt, base_url=url)
    return PayUClient(credentials=credentials, http=http_client(5.0))


def test_a_wrong_payu_salt_is_a_refusal_carrying_payus_msg_not_no_payment(rig):
    with pytest.raises(CredentialsRefused) as raised:
        _payu(rig.url, "wrong").report("ph_T3stTxn")
    assert raised.value.reason == "refused: Invalid Hash."


def test_a_txnid_payu_does_not_know_is_no_payment(rig):
    assert _payu(rig.url, rig.api.keys.payu_salt).report("ph_unknown") == Report()


@pytest.mark.parametrize(
    "doc",
    [{"status": 0, "msg": "Something else"}, {"status": 0}, {"status": 0, "msg": 7},
     {"status": 0, "msg": "x", "transaction_details": {}}],
)  # fmt: skip
def test_any_other_payu_status_0_is_an_api_error_not_no_payment(doc):
    with pytest.raises(GatewayApiError) as raised:
        payu_status.payments("ph_T3stTxn", json.dumps(doc).encode())
    assert not isinstance(raised.value, CredentialsRefused)
    assert raised.value.reason.startswith("refused: ")


@functools.cache
def _bomb(megabytes: int = 256) -> bytes:
    """Zeros gzipped: 256 MiB in about 256 KB, made when a test first asks (not by every
    worker's collection)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    return b"".join([*(squeeze.compress(block) for _ in range(megabytes)), squeeze.flush()])


def _encoded(encoding: bytes, body: bytes) -> Callable[[socket.socket, Server], None]:
    def answer(conn: socket.socket, server: Server) -> None:
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: %s\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (encoding, len(body), body)
        )
        server.sent += len(body)

    return answer


def _peak_while(call: Callable[[], object]) -> tuple[BaseException | None, int]:
    tracemalloc.start()
    try:
        call()
    except GatewayApiError as exc:
        return exc, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return None, 0


@pytest.mark.parametrize(
    ("encoding", "body", "reason"),
    [
        (b"gzip", _bomb, f"answer larger than {MAX_ANSWER_BYTES} bytes"),
        (
            b"gzip, gzip",
            lambda: gzip.compress(_bomb(), 9),
            'answer in an unsupported encoding ("gzip, gzip")',
        ),
        (b"br", lambda: b"x" * 100, 'answer in an unsupported encoding ("br")'),
    ],
)
def test_a_compressed_answer_is_decoded_no_further_than_the_size_bound(encoding, body, reason):
    with raw_server(_encoded(encoding, body())) as server:
        raised, peak = _peak_while(lambda: _razorpay(server.url, timeout_s=30).report("order_T3st"))
    assert isinstance(raised, GatewayApiError)
    assert raised.reason == reason
    assert raised.outage
    # Whatever the answer inflates to, no more than the bound was ever decoded and held.
    assert peak < 4 * MAX_ANSWER_BYTES


def test_a_gzipped_answer_within_the_bound_is_read():
    doc = {"entity": "collection", "count": 0, "items": []}
    with raw_server(_encoded(b"gzip", gzip.compress(json.dumps(doc).encode()))) as server:
        assert _razorpay(server.url).report("order_T3st") == Report()


def _refund(provider: Provider) -> Refund:
    return Refund(
        provider=provider, idempotency_key="ph-refund-asked", payment_id="pay_ASKED",
        gateway_order_id="order_ASKED", amount_paise=100, currency="INR", captured_paise=100,
        reason="asked", requested_by="test", gateway_refund_id="rfnd_ASKED", attempts=1,
    )  # fmt: skip


def _cashfree(url: str) -> CashfreeClient:
    credentials = ApiCredentials(provider=Provider.CASHFREE, id="cf", secret="s", base_url=url)
    return CashfreeClient(credentials=credentials, http=http_client(5.0))


RAZORPAY_REFUND = {"id": "rfnd_ASKED", "entity": "refund", "payment_id": "pay_ASKED",
                   "amount": 100, "currency": "INR"}  # fmt: skip
CASHFREE_REFUND = {"cf_refund_id": 7, "refund_id": "ph-refund-asked", "order_id": "order_ASKED",
                   "refund_amount": 1.0}  # fmt: skip
ANOTHER = [
    (Provider.RAZORPAY, "refund_status", {"id": "rfnd_OTHER"}, "processed"),
    (Provider.RAZORPAY, "refund_status", {"id": "rfnd_OTHER"}, "failed"),
    (Provider.RAZORPAY, "refund_status", {"payment_id": "pay_OTHER"}, "processed"),
    (Provider.RAZORPAY, "send_refund", {"payment_id": "pay_OTHER"}, "processed"),
    (Provider.CASHFREE, "refund_status", {"refund_id": "ph-refund-other"}, "SUCCESS"),
    (Provider.CASHFREE, "refund_status", {"refund_id": "ph-refund-other"}, "CANCELLED"),
    (Provider.CASHFREE, "refund_status", {"order_id": "order_OTHER"}, "SUCCESS"),
    (Provider.CASHFREE, "send_refund", {"order_id": "order_OTHER"}, "FAILED"),
]


@pytest.mark.parametrize(("provider", "call", "other", "status"), ANOTHER)
def test_an_answer_about_another_refund_neither_closes_nor_refuses_the_one_asked(
    provider, call, other, status
):
    """A refund entity naming another refund, payment or order than the one asked about (a
    gateway's or a proxy's mix-up) says nothing of this one: an error, asked again later,
    never its refund made or its refusal (which would free its amount for another)."""
    if provider is Provider.RAZORPAY:
        doc, client = {**RAZORPAY_REFUND, "status": status, **other}, _razorpay
    else:
        doc, client = {**CASHFREE_REFUND, "refund_status": status, **other}, _cashfree
    with raw_server(_json_answer(200, doc)) as server, pytest.raises(GatewayApiError) as raised:
        getattr(client(server.url), call)(_refund(provider))
    assert not isinstance(raised.value, RefundRefused)
    assert "names another" in raised.value.reason


def test_a_razorpay_capture_answered_with_another_payment_applies_nothing():
    doc = {"id": "pay_OTHER", "entity": "payment", "order_id": "order_Z", "status": "captured",
           "amount": 100, "currency": "INR", "captured": True}  # fmt: skip
    with raw_server(_json_answer(200, doc)) as server, pytest.raises(GatewayApiError) as raised:
        _razorpay(server.url).capture("pay_ASKED", 100, "INR")
    assert "names another" in raised.value.reason


def test_a_razorpay_payout_answered_with_another_records_nothing_of_either():
    doc = {"id": "setl_OTHER", "entity": "settlement", "amount": 100, "status": "failed",
           "fees": 0, "tax": 0, "utr": None, "created_at": 1_767_225_600}  # fmt: skip
    with raw_server(_json_answer(200, doc)) as server:
        page = _razorpay(server.url)._payout("setl_ASKED")
    assert page.settlements == ()
    assert page.failed is not None and "names another" in page.failed


PAYU_TXNID, PAYU_ASKED, PAYU_OTHER = "ph_T3stTxn", "403993715521000002", 403993715521009000
"""PAYU_OTHER: another payment, as a JSON number no double stands for with PAYU_ASKED (a number
past 2**53 is the id it rounds: 403993715521000009 would be PAYU_ASKED)."""


def test_a_payu_check_payment_answer_about_another_mihpayid_judges_no_attempt():
    """Asked whether a second post's mihpayid is a payment of its txnid, an answer about
    another payment (even a success of that txnid) says nothing of it: never "a second
    payment", never "refuted"."""
    entity = {"mihpayid": PAYU_OTHER, "txnid": PAYU_TXNID, "status": "success",
              "amt": "499.00", "mode": "UPI"}  # fmt: skip
    doc = {"status": 1, "msg": "Transaction Fetched Successfully", "transaction_details": entity}
    with raw_server(_json_answer(200, doc)) as server, pytest.raises(GatewayApiError) as raised:
        _payu(server.url, "salt").another_attempt(PAYU_TXNID, PAYU_ASKED, None)
    assert "names another mihpayid" in raised.value.reason


def test_a_payu_refund_queued_for_another_mihpayid_is_not_this_refund():
    """``cancel_refund_transaction`` answered "Refund Request Queued" naming another payment
    than the one asked to refund: not this refund's request id, asked again."""
    doc = {"status": 1, "msg": "Refund Request Queued", "request_id": "131500117",
           "bank_ref_num": None, "mihpayid": PAYU_OTHER, "error_code": 102}  # fmt: skip
    refund = replace(_refund(Provider.PAYU), payment_id=PAYU_TXNID, attempt_id=PAYU_ASKED,
                     gateway_order_id=None, gateway_refund_id=None)  # fmt: skip
    with raw_server(_json_answer(200, doc)) as server, pytest.raises(GatewayApiError) as raised:
        _payu(server.url, "salt").send_refund(refund)
    assert not isinstance(raised.value, RefundRefused)
    assert "names another mihpayid" in raised.value.reason


def _action_status(entity_request_id: str, status: str) -> dict[str, object]:
    """``check_action_status`` for request 131500117, its entry naming ``entity_request_id``."""
    entity = {"request_id": entity_request_id, "action": "refund", "status": status,
              "amt": "1.00", "mihpayid": PAYU_ASKED, "bank_arn": None}  # fmt: skip
    return {"status": 1, "msg": "1 out of 1 Transactions Fetched Successfully",
            "transaction_details": {"131500117": {"131500117": entity}}}  # fmt: skip


@pytest.mark.parametrize("status", ["success", "failure"])
def test_a_payu_action_status_naming_another_request_neither_closes_nor_refuses_the_refund(
    status,
):
    """The sender asking about its refund (request 131500117) whose entry names another
    request: an error, asked again, never this refund processed or failed."""
    refund = replace(_refund(Provider.PAYU), payment_id=PAYU_TXNID, attempt_id=PAYU_ASKED,
                     gateway_refund_id="131500117")  # fmt: skip
    doc = _action_status("999999", status)
    with raw_server(_json_answer(200, doc)) as server, pytest.raises(GatewayApiError) as raised:
        _payu(server.url, "salt").refund_status(refund)
    assert not isinstance(raised.value, RefundRefused)
    assert "names another request_id" in raised.value.reason


def test_a_payu_refund_callbacks_action_status_naming_another_request_confirms_nothing():
    """A refund callback confirmed by asking: an entry naming another request is unreadable,
    never this refund, nor its amount, applied."""
    body = json.dumps(_action_status("999999", "success")).encode()
    with pytest.raises(MalformedPayload, match="names another request_id"):
        payu_status.refund_status("131500117", PAYU_TXNID, body)
    assert payu_status.refund_status(
        "131500117", PAYU_TXNID, json.dumps(_action_status("131500117", "success")).encode()
    ).received


def test_a_cashfree_order_answer_about_another_order_says_nothing_of_its_expiry():
    doc = {"order_id": "order_OTHER", "order_status": "EXPIRED", "order_amount": 499.0}
    with pytest.raises(MalformedPayload) as raised:
        cashfree_status.order_expired(json.dumps(doc).encode(), "order_ASKED")
    assert "names another order_id" in raised.value.reason
    assert cashfree_status.order_expired(json.dumps(doc).encode(), "order_OTHER")

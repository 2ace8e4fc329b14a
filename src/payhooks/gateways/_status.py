"""What every gateway's status client shares (docs/providers.md, "Status APIs used by
reconciliation"): one bounded call (a deadline for the whole call, a size bound on the
answer, one compression layer decoded here), and the lookup of a gateway's client through
``GATEWAYS``. Every failure becomes a ``GatewayApiError``, translated here and nowhere else;
secrets go in headers or a hash, never in a log line or an error. Needs httpx (an extra)."""

from __future__ import annotations

import contextlib
import email.utils
import functools
import importlib
import json
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, cast

import httpx

from payhooks.events import EventKind, Provider, Received
from payhooks.gateways import ApiCredentials, gateway
from payhooks.gateways._common import shown
from payhooks.gateways._reports import MAX_SAID_CHARS, Report, printable, reread
from payhooks.plumbing.errors import CredentialsRefused, GatewayApiError, MalformedPayload

MAX_RETRY_AFTER_S = 3600.0
MAX_ANSWER_BYTES = 1 << 20
"""A status answer is a few KB; a body past 1 MiB is refused as it streams, never parsed."""
DEFAULT_DEADLINE_S = 10.0
MAX_PAGES = 500
"""Pages of one report read at most: a report that runs on past them (a cursor that never
ends) is an error, never an answer cut short."""
CREDENTIALS_REFUSED = frozenset({401, 403})
T = TypeVar("T")


class StatusClient(Protocol):
    """Asks one gateway what became of one checkout."""

    provider: Provider

    def report(self, reference: str) -> Report: ...


class StatusModule(Protocol):
    """What each gateway's ``status.py`` offers (its ``StatusApi.module``)."""

    def client(self, credentials: ApiCredentials, http: httpx.Client) -> StatusClient: ...

    def stored(self, event_id: str, entity: dict[str, Any]) -> Report:
        """The report a stored payment (its canonical body) reads as, for ``restored``."""
        ...


def status_module(provider: Provider) -> StatusModule:
    """The status client's module of ``provider``'s gateway; an unknown gateway raises."""
    return cast(StatusModule, importlib.import_module(gateway(provider).status_api.module))


def client(credentials: ApiCredentials, http: httpx.Client) -> StatusClient:
    """The client of the gateway the credentials are for, never another gateway's."""
    return status_module(credentials.provider).client(credentials, http)


def restored(provider: Provider, event_id: str, body: bytes) -> Received:
    """A reconciled payment as it was stored, read again (``_reports.reread``)."""
    return reread(provider, event_id, body)


@functools.cache
def tls() -> ssl.SSLContext:
    """The one TLS context every client of payhooks verifies gateways with (httpx's own:
    certifi's roots), made once: httpx makes one per client otherwise, and loading the roots
    costs about 50 ms of CPU, more than a status call."""
    return httpx.create_ssl_context()


def http_client(timeout_s: float) -> httpx.Client:
    """One client for every gateway: ``timeout_s`` is each call's whole deadline (connect,
    request and every read together, see ``answer``), no redirects followed, no compression
    asked for (a status answer is a few KB; one sent compressed anyway is decoded here, not
    by httpx, see ``_body``), and no connection kept between calls, so each call has a
    socket of its own for its deadline to cut."""
    return httpx.Client(
        verify=tls(),
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
        headers={"accept-encoding": "identity"},
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def _no_answer(status: int, body: bytes) -> bool:
    return False


def answer(
    provider: Provider,
    http: httpx.Client,
    method: str,
    url: str,
    *,
    taken: Callable[[int, bytes], bool] = _no_answer,
    **kw: Any,
) -> bytes:
    """The body of a 2xx answer; anything else is a ``GatewayApiError`` saying why, unless
    ``taken`` says the gateway documents it as an answer (Juspay's order it never created,
    HTTP 400): ``taken(status, body)`` decides on the whole body, never the status alone. The
    call as a whole has the client's timeout: a server sending one byte per read within the
    read timeout is cut off at the deadline, and a body past ``MAX_ANSWER_BYTES`` is refused
    as it streams; both are failures like a 5xx (an outage: a few in a row pause the gateway)."""
    deadline = _Deadline(http.timeout.read or DEFAULT_DEADLINE_S)
    try:
        with (
            deadline,
            http.stream(
                method, url, timeout=deadline.seconds, extensions={"trace": deadline.trace}, **kw
            ) as response,
        ):
            deadline.watch(response)
            body = _body(provider, response, deadline)
    except httpx.TimeoutException as exc:
        raise GatewayApiError(provider.value, "timed out") from exc
    except httpx.HTTPError as exc:
        if deadline.passed:
            raise GatewayApiError(provider.value, "timed out") from exc
        raise GatewayApiError(provider.value, f"no answer ({type(exc).__name__})") from exc
    status = response.status_code
    if 200 <= status < 300 or taken(status, body):
        return body
    kind = error_kind(body)
    refused = status in CREDENTIALS_REFUSED or kind == CREDENTIALS_KIND
    error = CredentialsRefused if refused else GatewayApiError
    raise error(
        provider.value,
        f"answered {status}{_detail(body)}",
        status=429 if kind == RATE_LIMIT_KIND else status,  # handled as any 429, as it says
        retry_after_s=retry_after(response.headers),
        code=error_code(body),
        kind=kind,
    )


RATE_LIMIT_KIND = "rate_limit_error"
CREDENTIALS_KIND = "authentication_error"
"""Cashfree's error ``type`` of a rate limit and of credentials refused, under any status."""


def _body(provider: Provider, response: httpx.Response, deadline: _Deadline) -> bytes:
    """The answer's bytes, read raw and decoded here: httpx would decode any encoding the
    server names, stacked ones too, a whole chunk at a time before a bound could look, so a
    few KB of gzip would become gigabytes. One gzip or deflate layer is decoded at most
    ``MAX_ANSWER_BYTES`` at a time; anything else is refused like a 5xx."""
    too_large = GatewayApiError(provider.value, f"answer larger than {MAX_ANSWER_BYTES} bytes")
    declared = response.headers.get("content-length", "")
    if declared.isdecimal() and int(declared) > MAX_ANSWER_BYTES:
        raise too_large
    decoder = _decoder(provider, response.headers.get("content-encoding", ""))
    body = bytearray()
    for chunk in response.iter_raw():
        body += decoder(chunk, MAX_ANSWER_BYTES + 1 - len(body))
        if len(body) > MAX_ANSWER_BYTES:
            raise too_large
        if deadline.passed:
            raise GatewayApiError(provider.value, "timed out")
    return bytes(body)


_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


def _decoder(provider: Provider, encoding: str) -> Callable[[bytes, int], bytes]:
    """``decode(chunk, room)``: at most ``room`` bytes out of ``chunk`` (the rest of a
    compressed chunk past the room is never inflated: the answer is refused anyway)."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return lambda chunk, room: chunk
    if name not in _WBITS:
        raise GatewayApiError(provider.value, f"answer in an unsupported encoding ({shown(name)})")
    inflate = zlib.decompressobj(_WBITS[name])

    def decode(chunk: bytes, room: int) -> bytes:
        try:
            return inflate.decompress(chunk, max(room, 1))
        except zlib.error as exc:
            raise GatewayApiError(provider.value, f"unreadable {name} answer") from exc

    return decode


class _Deadline:
    """A wall-clock deadline for one call. httpx bounds each read, not the call; at the
    deadline a timer shuts the call's socket down, which wakes a read blocked on it, and
    whatever the call was doing fails (reported as "timed out")."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + seconds
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._lock = threading.Lock()
        self._stream: Any = None
        self._expired = False

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    @property
    def passed(self) -> bool:
        return self._expired or time.monotonic() >= self._at

    def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """httpcore's trace hook: the connection's stream, as soon as it is connected."""
        if name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            self._hold(info.get("return_value"))

    def watch(self, response: httpx.Response) -> None:
        self._hold(response.extensions.get("network_stream"))

    def _hold(self, stream: Any) -> None:
        with self._lock:
            if stream is not None:
                self._stream = stream
            expired = self._expired
        if expired:  # the deadline passed while connecting
            self._shut()

    def _expire(self) -> None:
        with self._lock:
            self._expired = True
        self._shut()

    def _shut(self) -> None:
        with self._lock:
            stream = self._stream
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):  # the plain socket's, under TLS too
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """``Retry-After`` in seconds or as an HTTP date (RFC 9110, 10.2.3: the wait from the
    answer's own ``Date``, else from ``now``), or Cashfree's ``x-ratelimit-retry``; at most
    ``MAX_RETRY_AFTER_S``. None when none of them reads."""
    for name in ("retry-after", "x-ratelimit-retry"):
        value = headers.get(name, "").strip()
        if value.isdecimal():
            return min(float(value), MAX_RETRY_AFTER_S)
        until = _http_date(value)
        if until is not None:
            sent = _http_date(headers.get("date", "").strip())
            start = sent if sent is not None else (time.time() if now is None else now)
            return min(max(until - start, 0.0), MAX_RETRY_AFTER_S)
    return None


def _http_date(value: str) -> float | None:
    if not value:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


def error_answer(body: bytes) -> dict[str, Any] | None:
    """An error answer's JSON object, None when it is none (HTML from a proxy, truncated
    JSON, a list): an error is read for what it says, and one in no readable shape says
    nothing, never a reason to fail again while reading it."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def _error_object(body: bytes) -> dict[str, Any] | None:
    """The object an error answer's words are in: Razorpay's ``error``, else the body."""
    doc = error_answer(body)
    if doc is None:
        return None
    error = doc.get("error")
    return error if isinstance(error, dict) else doc


def error_code(body: bytes) -> str | None:
    """The gateway's own code for an error, from its documented shape: Razorpay's
    ``error.code``, Cashfree's and PhonePe's ``code``, Juspay's ``error_code``; None when the
    answer is in none of them (HTML, truncated JSON, no code)."""
    source = _error_object(body)
    if source is None:
        return None
    return _code(source.get("code", source.get("error_code")))


def error_kind(body: bytes) -> str | None:
    """Whose an error is, where the gateway's shape says: Cashfree's ``type``."""
    source = _error_object(body)
    return None if source is None else _code(source.get("type"))


_SAID = ("description", "message", "msg", "error_message")
"""Where each gateway's error shape words an error: Razorpay's ``error.description``,
Cashfree's and PhonePe's ``message``, PayU's ``msg``, Juspay's ``error_message``."""


def _detail(body: bytes) -> str:
    """The gateway's own code and words for an error, from its documented shape
    (``error_code``; ``_SAID``; Juspay's ``error_info``, whose ``code`` stands for a missing
    one and whose ``developer_message`` says what to fix, its ``user_message`` only when
    nothing else does): each part once (one holding another is left out), bounded and
    printable, never the whole body."""
    source = _error_object(body)
    if source is None:
        return ""
    info = source.get("error_info")
    info = info if isinstance(info, dict) else {}
    said = [printable(source.get(name)) for name in _SAID] + [
        printable(info.get("developer_message"))
    ]
    if not any(said):
        said.append(printable(info.get("user_message")))
    code = error_code(body) or _code(info.get("code"))
    parts = _distinct([part for part in (code, *said) if part])
    found = ": ".join(parts)[:MAX_SAID_CHARS]
    return f" ({found})" if found else ""


def error_under_200(provider: Provider, body: bytes) -> GatewayApiError:
    """An error in the gateway's own shape under HTTP 200 (Juspay's ``"status": "error"``),
    with its code and words: an API failure, asked again later."""
    return GatewayApiError(
        provider.value, f"answered 200 with an error{_detail(body)}", status=200,
        code=error_code(body), kind=error_kind(body),
    )  # fmt: skip


def _code(value: object) -> str | None:
    return (
        value if isinstance(value, str) and value.isprintable() and 0 < len(value) <= 64 else None
    )


def _distinct(parts: list[str]) -> list[str]:
    """``parts`` in order, without one another part holds (Juspay's ``error_message`` is often
    the start of its ``developer_message``, its ``error_code`` its message again)."""
    return [
        part
        for index, part in enumerate(parts)
        if not any(part in other and (part != other or at < index)
                   for at, other in enumerate(parts) if at != index)
    ]  # fmt: skip


def parsed(provider: Provider, read: Callable[[], T]) -> T:
    """An answer that is not the documented shape is an API failure too: asked again later."""
    try:
        return read()
    except MalformedPayload as exc:
        raise GatewayApiError(provider.value, f"unreadable answer: {exc.reason}") from exc


Identify = Callable[[Any, str], tuple[str, str, object]]
"""A listed payment's status, its id and the order it names, given the order asked about."""

Deliver = Callable[[Any, str, EventKind, str, str], Received]
"""The delivery a listed payment stands for: (entity, order id, kind, status, payment id)."""


def listed(
    entities: Iterable[Any],
    order_id: str,
    kinds: Mapping[str, EventKind],
    identify: Identify,
    deliver: Deliver,
    *,
    id_field: str,
) -> Report:
    """An order's payments as a status API lists them: one in a state the webhook acts on
    (``kinds``) is delivered; one in any other is skipped as ``payment_id:status``. One that
    cannot be read, or names another order (the gateway's or a proxy's mix-up), is that
    payment's trouble (``Report.unreadable``, named by its ``id_field`` where it has one): the
    others are read all the same."""
    found: list[Received] = []
    skipped: list[str] = []
    unreadable: list[str] = []
    for n, entity in enumerate(entities):
        try:
            status, payment_id, its_order = identify(entity, order_id)
            if its_order != order_id:
                name, said = printable(payment_id, 80), printable(str(its_order), 80)
                unreadable.append(f"payment {name} unreadable: payment {name} names another "
                                  f"order: {said}")  # fmt: skip
                continue
            kind = kinds.get(status)
            if kind is None:
                skipped.append(f"{payment_id}:{status}")
                continue
            found.append(deliver(entity, order_id, kind, status, payment_id))
        except MalformedPayload as exc:
            named = entity.get(id_field) if isinstance(entity, dict) else None
            name = printable(str(named), 80) if isinstance(named, str | int) else None
            unreadable.append(f"payment {name or f'#{n + 1}'} unreadable: {exc.reason}")
    return Report(received=tuple(found), skipped=tuple(skipped), unreadable=tuple(unreadable))


__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_PAGES",
    "CredentialsRefused",
    "Deliver",
    "Identify",
    "StatusClient",
    "StatusModule",
    "answer",
    "client",
    "error_answer",
    "error_code",
    "error_under_200",
    "http_client",
    "listed",
    "parsed",
    "restored",
    "retry_after",
    "status_module",
]

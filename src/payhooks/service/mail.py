"""Sending one email over SMTP; the one place smtplib's and email-validator's errors are
sorted into ours."""

from __future__ import annotations

import contextlib
import hashlib
import re
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from types import TracebackType
from urllib.parse import parse_qsl, unquote, urlsplit

from email_validator import EmailNotValidError, ValidatedEmail, validate_email

from payhooks.service.errors import (
    InvalidAddress,
    MailerUnavailable,
    MessageRejected,
    RelayRefused,
)

SMTP_URL_SYNTAX = "smtp://[user:pass@]host[:port][?starttls=true], or smtps://… for implicit TLS"

_STARTTLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
_UNREADABLE = (
    "the host or port cannot be read (percent-encode / ? # @ : in the user name and password)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmtpTarget:
    host: str
    port: int
    implicit_tls: bool = False
    starttls: bool = False
    username: str | None = None
    password: str | None = None

    @classmethod
    def from_url(cls, url: str) -> SmtpTarget:
        """``smtp://[user:pass@]host[:port][?starttls=true]`` or ``smtps://…`` (implicit TLS);
        ``ValueError`` saying what is wrong in fixed words (``smtp_url_problem``)."""
        found = _target(url)
        if isinstance(found, str):
            raise ValueError(found)
        return found


def smtp_url_problem(url: str) -> str | None:
    """What makes ``url`` unusable, in fixed words that repeat none of it (it may hold a
    password), or None. A value is never guessed at: ``starttls=on`` is refused, not false."""
    found = _target(url)
    return found if isinstance(found, str) else None


def _target(url: str) -> SmtpTarget | str:
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:  # its text may quote the URL
        return _UNREADABLE
    if parts.scheme not in ("smtp", "smtps") or not host:
        return "not an smtp:// or smtps:// URL with a host"
    if parts.path not in ("", "/") or parts.fragment or port == 0:
        return _UNREADABLE
    starttls = _starttls(parts.query)
    if isinstance(starttls, str):
        return starttls
    if starttls and parts.scheme == "smtps":
        return "starttls asked for on smtps://, which is TLS from the start"
    username, password = (unquote(v) if v else None for v in (parts.username, parts.password))
    if not (username or "").isascii() or not (password or "").isascii():
        return "a user name or password that is not ASCII (smtplib cannot send more)"
    implicit = parts.scheme == "smtps"
    return SmtpTarget(
        host=host,
        port=port or (465 if implicit else 25),
        implicit_tls=implicit,
        starttls=starttls,
        username=username,
        password=password,
    )


def _starttls(query: str) -> bool | str:
    """The one query parameter read, strictly; or why the query cannot be read."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        return "a query that is not name=value pairs"
    if any(name != "starttls" for name, _ in pairs):
        return "a query parameter other than starttls (the only one read)"
    if len(pairs) > 1:
        return "starttls given more than once"
    if not pairs:
        return False
    value = _STARTTLS.get(pairs[0][1].lower())
    if value is None:
        return "a starttls value that is not true or false (nor 1/0, yes/no)"
    return value


def checked_address(address: str, *, public: bool = True) -> str:
    """``address`` normalised (domain lower-cased, Unicode NFC), or ``InvalidAddress``.

    Syntax only, never a DNS lookup. ``public`` also requires a domain the public can mail
    (a dot in it); operators' own addresses may name an internal host. Special-use names
    (``localhost``, ``.local``, ``.test``, ``.invalid``) are refused either way.
    """
    return _validated(address, public=public).normalized


def _validated(address: str, *, public: bool) -> ValidatedEmail:
    try:
        return validate_email(address, check_deliverability=False, globally_deliverable=public)
    except EmailNotValidError as exc:
        raise InvalidAddress(address, str(exc)) from exc


def _wire_address(address: str) -> str:
    """The ASCII form (IDNA domain) when there is one, so a server without SMTPUTF8 can
    still take a mailbox under an internationalised domain."""
    found = _validated(address, public=False)
    return found.ascii_email or found.normalized


def message_id(dedupe_key: str) -> str:
    """Stable across retries, so a receiving system can drop the one possible repeat."""
    digest = hashlib.sha256(dedupe_key.encode()).hexdigest()[:32]
    return f"<{digest}@payhooks>"


def compose(
    *, sender: str, recipient: str, subject: str, body: str, dedupe_key: str
) -> EmailMessage:
    """One plain-text message. ``recipient`` must be one plain address: a list or a broken
    one raises here (``InvalidAddress``), never becomes several recipients."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = _wire_address(recipient)
    message["Subject"] = subject
    message["Message-ID"] = message_id(dedupe_key)
    message.set_content(body)
    return message


class Mailer:
    """One SMTP session, opened on first use and reused for a batch.

    Failures are sorted by what they say. Opening the session (connect, greeting, TLS,
    login) failing says nothing about any message: ``MailerUnavailable``, the queue waits.
    So does a refusal every message would meet: of the sender (MAIL FROM), for want of TLS
    or a login (530), of relaying, or the server closing (421). A recipient refused for
    relaying may be that recipient's domain alone: ``RelayRefused``, which the sender tells
    apart by the next message. Anything else is about the
    message being sent: ``MessageRejected``, which counts against that message alone, so one
    bad message never blocks the queue and a whole-server refusal never dead-letters the
    backlog.
    """

    def __init__(self, target: SmtpTarget, *, timeout: float = 60.0) -> None:
        self.target = target
        self.timeout = timeout  # generous: the reply to DATA may come late (RFC 5321: 10 min)
        self._session: smtplib.SMTP | None = None

    def __enter__(self) -> Mailer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def send(self, message: EmailMessage) -> None:
        session = self._connected()
        try:
            session.send_message(message)
        except smtplib.SMTPSenderRefused as exc:
            if exc.smtp_code in _ABOUT_THE_MESSAGE:  # its SIZE or parameters, not the sender
                raise MessageRejected(_said(exc), permanent=exc.smtp_code >= 500) from exc
            raise self._unavailable(f"sender refused: {_said(exc)}") from exc
        except smtplib.SMTPRecipientsRefused as exc:
            replies = list(exc.recipients.values())
            if all(_whole_server(code, text) for code, text in replies):
                if any(code in _WHOLE_SERVER_CODES for code, _ in replies):  # closing, no login
                    raise self._unavailable(f"recipient refused: {_said(exc)}") from exc
                raise RelayRefused(f"recipient refused: {_said(exc)}") from exc  # session kept
            codes = [code for code, _ in replies]
            raise MessageRejected(
                f"recipient refused: {_replies(exc)}", permanent=all(code >= 500 for code in codes)
            ) from exc
        except smtplib.SMTPNotSupportedError as exc:
            # An internationalised mailbox name, and a server that cannot take one.
            raise MessageRejected(f"SMTP server lacks SMTPUTF8: {exc}", permanent=True) from exc
        except smtplib.SMTPResponseException as exc:
            if _whole_server(exc.smtp_code, exc.smtp_error):
                raise self._unavailable(_said(exc)) from exc
            self.close()
            raise MessageRejected(_said(exc), permanent=exc.smtp_code >= 500) from exc
        except (OSError, smtplib.SMTPException) as exc:
            # Lost mid-message: it may have been accepted. Counted, retried with the same
            # Message-ID, so the receiving side can drop a repeat.
            self.close()
            raise MessageRejected(
                f"SMTP session lost: {type(exc).__name__}", permanent=False
            ) from exc
        except Exception as exc:
            # The message itself cannot be sent as built (smtplib refuses its headers): the
            # same would happen on every attempt. The session may be mid-command: reopen.
            self.close()
            raise MessageRejected(
                f"cannot send this message: {type(exc).__name__}: {exc}", permanent=True
            ) from exc

    def _unavailable(self, reason: str) -> MailerUnavailable:
        """The session is closed (reopened on the next batch) and the queue left waiting."""
        self.close()
        return MailerUnavailable(f"SMTP {self.target.host}:{self.target.port} {reason}")

    def _connected(self) -> smtplib.SMTP:
        if self._session is None:
            try:
                self._session = self._open()
            except (OSError, smtplib.SMTPException, ValueError) as exc:  # ValueError: encoding
                raise MailerUnavailable(
                    f"SMTP {self.target.host}:{self.target.port} unavailable: {_reason(exc)}"
                ) from exc
        return self._session

    def _open(self) -> smtplib.SMTP:
        t = self.target
        session: smtplib.SMTP
        if t.implicit_tls:
            session = smtplib.SMTP_SSL(
                t.host, t.port, timeout=self.timeout, context=ssl.create_default_context()
            )
        else:
            session = smtplib.SMTP(t.host, t.port, timeout=self.timeout)
        try:
            if t.starttls:
                session.starttls(context=ssl.create_default_context())
            if t.username:
                session.login(t.username, t.password or "")
        except BaseException:
            session.close()
            raise
        return session

    def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(OSError, smtplib.SMTPException):
                self._session.quit()
            self._session = None


def _reason(exc: BaseException) -> str:
    """Why, without anything from the URL (it may hold a password)."""
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"SMTP {exc.smtp_code}"
    return type(exc).__name__


# Refusals of MAIL FROM that are about this message: its size (RFC 1870) or the parameters
# given for it (SMTPUTF8, BODY). Every other one is about the sender, so about every message.
_ABOUT_THE_MESSAGE = frozenset({552, 555})
# Replies no recipient or message of ours can cure: the server closing (421), TLS or a login
# required first (530, RFC 3207 and 4954), relaying refused (Postfix, Sendmail, Exim, Exchange).
_WHOLE_SERVER_CODES = frozenset({421, 530})
_WHOLE_SERVER_TEXT = re.compile(
    rb"relay(ing)?( access)? (denied|not permitted|not allowed|prohibited)|unable to relay"
    rb"|authentication required|not authenticated",
    re.IGNORECASE,
)


def _whole_server(code: int, text: bytes | str) -> bool:
    said = text.encode(errors="replace") if isinstance(text, str) else text
    return code in _WHOLE_SERVER_CODES or _WHOLE_SERVER_TEXT.search(said) is not None


def _said(exc: smtplib.SMTPException) -> str:
    """The server's reply, code and text, clipped to one short line."""
    text: bytes | str
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, text = next(iter(exc.recipients.values()), (0, b""))
    elif isinstance(exc, smtplib.SMTPResponseException):
        code, text = exc.smtp_code, exc.smtp_error
    else:
        return type(exc).__name__
    return f"SMTP {_reply(code, text)}"


def _replies(exc: smtplib.SMTPRecipientsRefused) -> str:
    """Each refused recipient's reply as the server wrote it: ``550 5.1.1 mailbox
    unavailable`` (a message has one recipient; several are joined by ``;``)."""
    return "; ".join(_reply(code, text) for code, text in exc.recipients.values())


def _reply(code: int, text: bytes | str) -> str:
    """``550 5.1.1 mailbox unavailable``: the code, then the text on one line (a multi-line
    reply's lines joined), clipped; a text that repeats the code does not say it twice."""
    words = " ".join(
        (text.decode(errors="replace") if isinstance(text, bytes) else str(text)).split()
    )
    if words.startswith(f"{code} ") or words.startswith(f"{code}-"):
        words = words[len(str(code)) + 1 :]
    return f"{code} {words}"[:200].rstrip()

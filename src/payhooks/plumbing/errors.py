"""Every condition payhooks reports, under one root, with fields rather than only text."""

from __future__ import annotations


class PayhooksError(Exception):
    """Root of every error payhooks raises on purpose."""


class Explained(PayhooksError):
    """An error that says why in a ``reason`` of its own: the detail an answer shows
    (``payhooks.intake.answers``), inside a ``message`` that may name more (a gateway, a
    variable)."""

    def __init__(self, reason: str, message: str | None = None) -> None:
        super().__init__(reason if message is None else message)
        self.reason = reason


class RejectedDelivery(Explained):
    """A delivery refused before anything was stored."""

    def __init__(self, provider: str, reason: str) -> None:
        super().__init__(reason, f"{provider}: {reason}")
        self.provider = provider


class SignatureMismatch(RejectedDelivery):
    """The bytes are not proven to come from the gateway (bad, missing or malformed signature)."""


class UnsignedChargeback(SignatureMismatch):
    """A gateway's chargeback notice that nothing signs (PayU's): refused like a bad signature,
    and answered and counted under a code of its own, so the forged-signature alarm never takes
    a notice the gateway itself sent for a forgery."""


class MalformedPayload(RejectedDelivery):
    """Authentic bytes that do not form an event payhooks can read."""


class PayloadTooLarge(RejectedDelivery):
    """The body exceeds the size payhooks accepts."""


class LengthRequired(RejectedDelivery):
    """A body with no declared length that the server cannot say where it ends (a chunked
    request under a WSGI server that does not set ``wsgi.input_terminated``)."""


class ConfirmationsFull(RejectedDelivery):
    """A callback only the gateway's API can confirm, refused for now: as many as payhooks
    lets wait for the API already do (``payhooks.intake.confirmations.MAX_OPEN_PER_ORDER``). Nothing
    was stored; answered 503, so the gateway sends it again."""


class SettingsRefused(Explained):
    """The settings a delivery is served by, refused as it reads them (a framework's, read on
    each request, under a server that checked nothing at start): nothing was stored, answered
    503 so the gateway sends it again once they are mended. The log names the setting; the
    answer, read by whoever posted, does not."""

    def __init__(self, refusal: str) -> None:
        super().__init__("payhooks' settings are refused; the server's log says which", refusal)


class ProviderNotConfigured(PayhooksError):
    """No secret is configured for this provider, so it is not served."""

    def __init__(self, provider: str) -> None:
        super().__init__(f"provider {provider!r} is not configured")
        self.provider = provider


class UnreadableRecord(PayhooksError):
    """A record payhooks stored that no longer reads as payhooks wrote it (edited by hand,
    written by another release): said so, never taken for what it should have held."""


class DatabaseUnavailable(PayhooksError):
    """The database did not answer in time; the caller should try again later."""


class DatabaseAway(DatabaseUnavailable):
    """No connection to the database to be had: refused, lost, or none free in time. Every
    step of a pass would meet it in turn, so a pass ends on it, said once by its caller,
    rather than failing each of its gateways and items on it one timeout after another."""


class LockTimeout(DatabaseUnavailable):
    """Another transaction holds what this one needs (typically a twin delivery in flight)."""

    def __init__(self, event_id: str | None = None) -> None:
        super().__init__(f"lock timeout (event {event_id})" if event_id else "lock timeout")
        self.event_id = event_id


class TimedOut(DatabaseUnavailable):
    """A statement or the transaction ran past its bound (``statement_timeout``,
    ``transaction_timeout``: SQLSTATE 57014, 25P04): this work was slow, cancelled, nothing of
    it kept; the database itself answered."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"transaction could not finish: {sqlstate}")
        self.sqlstate = sqlstate


class SerializationConflict(DatabaseUnavailable):
    """The database gave up this transaction for another it conflicted with: SQLSTATE 40001
    (``serialization_failure``: SERIALIZABLE isolation, distributed engines) or 40P01
    (``deadlock_detected``). Nothing of it was kept, so the whole transaction may be run again
    (``payhooks.plumbing.retries``); when no retry is left it is answered 503 like any
    unavailability."""

    def __init__(self, sqlstate: str, event_id: str | None = None) -> None:
        about = f" (event {event_id})" if event_id else ""
        super().__init__(f"transaction lost a conflict: {sqlstate}{about}")
        self.sqlstate = sqlstate
        self.event_id = event_id


class NotCommitted(PayhooksError):
    """A claim made inside the caller's transaction was not committed (rolled back, or the
    transaction is still open): nothing took effect, so the gateway must be answered 5xx."""


class HandlerCommitted(PayhooksError):
    """A handler committed or rolled back the claim's transaction. payhooks commits once, after
    every handler, with the claim: the delivery is answered 500 (the gateway retries) and
    nothing the handler did is kept. ``call`` names what the handler did.

    ``ended``: the transaction did end (a ``COMMIT`` or ``ROLLBACK`` sent as SQL, which no
    driver refuses): what it committed stays committed, and the claim is undone so that the
    gateway's retry applies the delivery."""

    def __init__(self, call: str, *, ended: bool = False) -> None:
        self.call = call
        self.ended = ended
        super().__init__(
            f"a handler called {call} inside the claim's transaction; payhooks commits once, "
            "after every handler: remove the call"
        )

    @classmethod
    def as_sql(cls) -> HandlerCommitted:
        """A ``COMMIT`` or ``ROLLBACK`` sent as SQL: seen after the fact, the transaction ended."""
        return cls("COMMIT or ROLLBACK as SQL", ended=True)


class NotFound(PayhooksError):
    """A shop record that does not exist."""

    def __init__(self, kind: str, key: str, *, said: str | None = None) -> None:
        super().__init__(said or f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class Conflict(PayhooksError):
    """A shop request that contradicts what is already recorded."""


class InvalidRequest(PayhooksError):
    """A shop request whose content cannot be accepted (unknown SKU, bad quantity)."""


# Conditions of the layers above that the core raises or answers itself: the purge policy
# (payhooks.operations.retention), the bearer token (payhooks.intake.answers), the Django records,
# the gateways' status APIs (payhooks.gateways).


class RetentionTooShort(PayhooksError):
    """A purge asked for a window shorter than the gateways replay deliveries in."""

    def __init__(self, days: int, minimum: int) -> None:
        super().__init__(
            f"a retention of {days} days is shorter than the gateways' replay window "
            f"({minimum} days); pass --force to purge anyway"
        )
        self.days = days
        self.minimum = minimum


class Unauthorised(PayhooksError):
    """No or wrong bearer token on a request that needs one."""


class ReadOnlyRecord(PayhooksError):
    """A delivery record written through the ORM: only the claim writes them."""


class GatewayApiError(Explained):
    """A gateway's status API did not answer usefully (rate limit, 5xx, timeout, refusal): the
    checkout is asked about again on a later reconciliation pass. ``retry_after_s`` is the wait
    the gateway asked for, when it said; ``status`` the HTTP status, None without an answer,
    and 429 for a rate limit a gateway words in its own shape under another status (PayU's
    "Requests limit reached" under 200), so that it is handled as any 429 is."""

    def __init__(
        self,
        provider: str,
        reason: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        code: str | None = None,
        kind: str | None = None,
    ) -> None:
        super().__init__(reason, f"{provider} API: {reason}")
        self.provider = provider
        self.status = status
        self.retry_after_s = retry_after_s
        self.code = code
        """The gateway's own error code, read from its documented error shape; None for an
        answer in no such shape (a proxy's page, truncated JSON): only a documented code may
        become a decision (refused, no such order), never a bare status."""
        self.kind = kind
        """Whose the error is, where the gateway's shape says (Cashfree's ``type``:
        ``invalid_request_error`` for the request asked, ``api_error``, ``rate_limit_error``,
        ``authentication_error`` for its side or the credentials); None where it does not."""

    @property
    def rate_limited(self) -> bool:
        """The gateway answered 429, or said so in its own words: ask again no sooner than it
        said."""
        return self.status == 429

    @property
    def outage(self) -> bool:
        """The gateway itself is in trouble (429, 5xx, no answer), not this one checkout: a
        few in a row pause the gateway for the pass. A 4xx about one order does not."""
        return self.status is None or self.status == 429 or self.status >= 500


class CredentialsRefused(GatewayApiError):
    """The gateway refused the API credentials themselves (a 401 or 403, PayU's "Invalid
    Hash."), not one checkout: every call fails the same way until an operator fixes them,
    so the gateway is paused for the pass and the refusal is shown (docs/operations.md)."""


class OperatorRefused(Explained):
    """An operator name or password the console does not take, and why."""


class NoticeFailed(Explained):
    """An alert's notice a channel (email, a chat webhook) did not take; ``permanent`` when
    sending it again cannot help (a chat endpoint answering 404: the URL is wrong)."""

    def __init__(self, channel: str, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason, f"{channel}: {reason}")
        self.channel = channel
        self.permanent = permanent

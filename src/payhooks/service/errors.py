"""The reference service's own conditions: its settings, its mail, its console, its captures.
core's ``PayhooksError``, so the web's one table and the CLI's one line answer them too."""

from __future__ import annotations

from collections.abc import Sequence

from payhooks.plumbing.errors import Explained, PayhooksError


class SettingError(Explained):
    """A setting that cannot be read unambiguously; says which variable and how to write it."""

    def __init__(self, variable: str, reason: str) -> None:
        super().__init__(reason, f"{variable} {reason}")
        self.variable = variable


class InvalidAddress(Explained):
    """Not one plain email address: a list, a name, a quoted or bracketed part, a control
    character. Such a string splits recipients or breaks the message built around it."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(reason, f"not a usable email address: {reason}")
        self.address = address


class MailerUnavailable(PayhooksError):
    """The SMTP server cannot be reached or is failing as a whole: try again later."""


class RelayRefused(MailerUnavailable):
    """A recipient refused for relaying (``554 5.7.1 <a@b>: Relay access denied``): the
    server's policy for that recipient's domain, or for every recipient (no login). Which one,
    the next message tells: the sender (``payhooks.service.sender``) tries it before deciding;
    anyone else reads it as the whole server's."""


class MessageRejected(Explained):
    """The SMTP server refused this message; ``permanent`` when retrying cannot help."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent


class NothingCaptured(Explained):
    """A capture the gateway answered with no captured payment to apply (Razorpay: "already
    captured", and the payment then reads refunded): nothing took effect, so the capture is
    backed off like a failed one, with what the answer held as its reason."""

    def __init__(self, payment_id: str, found: Sequence[str]) -> None:
        held = ", ".join(found) or "no payment"
        super().__init__(f"the capture's answer holds no captured payment ({held})")
        self.payment_id = payment_id

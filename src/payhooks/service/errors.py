"""The reference service's own conditions: its settings, its mail, its console. Under the
core's ``PayhooksError``, so the web's one table and the CLI's one line answer them too."""

from __future__ import annotations

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


class MessageRejected(Explained):
    """The SMTP server refused this message; ``permanent`` when retrying cannot help."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent

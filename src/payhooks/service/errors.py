"""The reference service's own conditions: its settings, its mail, its console. Under the
core's ``PayhooksError``, so the web's one table and the CLI's one line answer them too."""

from __future__ import annotations

from payhooks.errors import PayhooksError


class SettingError(PayhooksError):
    """A setting that cannot be read unambiguously; says which variable and how to write it."""

    def __init__(self, variable: str, reason: str) -> None:
        super().__init__(f"{variable} {reason}")
        self.variable = variable
        self.reason = reason


class InvalidAddress(PayhooksError):
    """Not one plain email address: a list, a name, a quoted or bracketed part, a control
    character. Such a string splits recipients or breaks the message built around it."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"not a usable email address: {reason}")
        self.address = address
        self.reason = reason


class MailerUnavailable(PayhooksError):
    """The SMTP server cannot be reached or is failing as a whole: try again later."""


class MessageRejected(PayhooksError):
    """The SMTP server refused this message; ``permanent`` when retrying cannot help."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent


class OperatorRefused(PayhooksError):
    """An operator name or password the console does not take, and why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

"""What the ingest path needs of a gateway's adapter (``Adapter``: verify the exact received
bytes, then parse them into an Event) and how its secrets are read from one setting. Pure;
named by ``payhooks.gateways`` (and still by the older ``payhooks.providers``)."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Protocol

from payhooks.events import Event, Provider, is_text

UNKEPT_HEADERS = frozenset({"authorization"})
"""Headers read but never stored with a delivery's body: what they hold is the webhook
credential itself (Juspay's Basic password, PhonePe's digest of username and password), which
would let whoever reads the database, its backups or the console post accepted callbacks."""


class Adapter(Protocol):
    """What the ingest path needs of a gateway.

    ``headers`` is a mapping with lower-case names. ``verify`` raises ``SignatureMismatch``;
    ``parse`` raises ``MalformedPayload`` and is only called on verified bytes.
    ``headers_read`` names every header the adapter reads (signed or not, such as a delivery
    key header): they are refused when repeated with two values, and kept with the body,
    except ``UNKEPT_HEADERS`` (a static credential sent as is: never stored).
    ``max_body_bytes`` bounds what is read (and, for PayU, parsed) before authentication.
    """

    provider: Provider
    headers_read: tuple[str, ...]
    max_body_bytes: int

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None: ...

    def parse(self, body: bytes, headers: Mapping[str, str]) -> Event: ...


_NOT_A_LIST = (
    'starts with "[" but is not a JSON array of non-empty strings: write several secrets as '
    '["new", "old"], each JSON-escaped (so is a single secret that starts with "[")'
)
_PADDED = (
    "has spaces around it: remove them, or, if they are part of the secret, write it in a "
    'JSON array: [" secret "]'
)
_NOT_TEXT = "holds a control character or a lone surrogate: no gateway signs with such a secret"


def read_secrets(value: str) -> tuple[str, ...]:
    """A gateway's secrets as configured in one string: a plain value is one secret exactly
    as written (commas and all: gateways let merchants choose any characters); several are
    a JSON array, ``["new", "old"]`` (spaces around the array are allowed). Empty is none.
    ``ValueError`` says what is wrong, never quoting the value: a value starting with ``[``
    that is not such an array, spaces around a plain value (part of the secret, or a stray
    from a ``.env`` file?), or a secret that is not plain text."""
    if not value:
        return ()
    if value.lstrip().startswith("["):
        try:
            found = json.loads(value)
        except (ValueError, RecursionError):
            found = None
        if not isinstance(found, list) or not found:
            raise ValueError(_NOT_A_LIST)
        if not all(isinstance(each, str) and each for each in found):
            raise ValueError(_NOT_A_LIST)
        return checked_secrets(found)
    if value != value.strip():
        raise ValueError(_PADDED)
    return checked_secrets([value])


def checked_secrets(secrets: list[str]) -> tuple[str, ...]:
    """``secrets`` as a tuple, or ``ValueError`` when one could never verify a signature: a
    control character or a lone surrogate (an environment value that is not UTF-8 reaches
    Python as one) would fail every delivery instead of the setting at start."""
    if not all(_text(secret) for secret in secrets):
        raise ValueError(_NOT_TEXT)
    return tuple(secrets)


def _text(secret: str) -> bool:
    return is_text(secret) and not any(unicodedata.category(c) == "Cc" for c in secret)


def secrets_value(*secrets: str) -> str:
    """The string ``read_secrets`` reads back as exactly ``secrets``: one secret as it is when
    it can be, else a JSON array."""
    if len(secrets) == 1 and _plain(secrets[0]):
        return secrets[0]
    return json.dumps(list(secrets))


def _plain(secret: str) -> bool:
    """Whether ``secret`` written as it is reads back as that one secret."""
    return bool(secret) and not secret.startswith("[") and secret == secret.strip()


__all__ = ["Adapter", "checked_secrets", "read_secrets", "secrets_value"]

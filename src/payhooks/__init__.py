"""payhooks: every logical payment event takes effect exactly once.

The public surface is what ``__all__`` names; every other module is an implementation detail
that may change (``tests/unit/test_exports.py`` pins this list). ``__version__`` is the installed
distribution's, read from its metadata: the version is written once, in pyproject.toml
(docs/release.md).
"""

from __future__ import annotations

from importlib.metadata import version as _version

# ``payhooks.ingest`` names both the function exported here and the module's old path (a shim,
# payhooks/ingest.py, that warns only when a name is read through it): loading the shim first
# leaves the name the function's even after ``import payhooks.ingest`` elsewhere.
from payhooks import ingest as _ingest_module  # noqa: F401
from payhooks.events import Event, EventKind, Provider, Received
from payhooks.gateways import Adapter
from payhooks.gateways.cashfree import Cashfree
from payhooks.gateways.juspay import Juspay
from payhooks.gateways.payu import PayU
from payhooks.gateways.phonepe import PhonePe
from payhooks.gateways.razorpay import Razorpay
from payhooks.intake.expectations import Expectation, expect
from payhooks.intake.hooks import Hooks
from payhooks.intake.ingest import (
    MAX_BODY_BYTES,
    Applied,
    Handler,
    Outcome,
    Pending,
    Receipt,
    header_map,
    ingest,
    ingest_in_transaction,
    ingest_received,
    receive,
)
from payhooks.plumbing.errors import (
    ConfirmationsFull,
    Conflict,
    DatabaseUnavailable,
    InvalidRequest,
    LockTimeout,
    MalformedPayload,
    NotCommitted,
    NotFound,
    PayhooksError,
    PayloadTooLarge,
    ProviderNotConfigured,
    RejectedDelivery,
    SerializationConflict,
    SignatureMismatch,
    TimedOut,
)
from payhooks.plumbing.schema import migrate

__version__ = _version("payhooks")

__all__ = [
    "MAX_BODY_BYTES",
    "Adapter",
    "Applied",
    "Cashfree",
    "ConfirmationsFull",
    "Conflict",
    "DatabaseUnavailable",
    "Event",
    "EventKind",
    "Expectation",
    "Handler",
    "Hooks",
    "InvalidRequest",
    "Juspay",
    "LockTimeout",
    "MalformedPayload",
    "NotCommitted",
    "NotFound",
    "Outcome",
    "PayU",
    "PayhooksError",
    "PayloadTooLarge",
    "Pending",
    "PhonePe",
    "Provider",
    "ProviderNotConfigured",
    "Razorpay",
    "Receipt",
    "Received",
    "RejectedDelivery",
    "SerializationConflict",
    "SignatureMismatch",
    "TimedOut",
    "expect",
    "header_map",
    "ingest",
    "ingest_in_transaction",
    "ingest_received",
    "migrate",
    "receive",
]

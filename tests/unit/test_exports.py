from __future__ import annotations

import payhooks


def test_public_names_are_exactly_the_documented_ones():
    assert sorted(payhooks.__all__) == sorted(
        [
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
            "Pending",
            "PhonePe",
            "PayhooksError",
            "PayloadTooLarge",
            "ProviderNotConfigured",
            "Provider",
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
    )


def test_every_public_name_resolves():
    missing = [name for name in payhooks.__all__ if not hasattr(payhooks, name)]
    assert missing == []


def test_the_version_is_the_one_pyproject_states():
    """Written once, in pyproject.toml; ``payhooks.__version__`` reads the installed metadata."""
    import importlib.metadata
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    stated = tomllib.loads(pyproject.read_text())["project"]["version"]
    assert payhooks.__version__ == importlib.metadata.version("payhooks") == stated


def test_the_services_schema_states_the_same_version():
    from payhooks.service.config import Settings
    from payhooks.service.web import create_app

    app = create_app(Settings(), api_token="t", url="postgresql://unused")
    assert app.openapi()["info"]["version"] == payhooks.__version__

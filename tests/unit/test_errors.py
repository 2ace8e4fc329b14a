"""An error that explains itself keeps its reason apart from the message that names more."""

from __future__ import annotations

import pytest

from payhooks.plumbing.errors import (
    Explained,
    GatewayApiError,
    OperatorRefused,
    PayhooksError,
    SignatureMismatch,
)
from payhooks.service.errors import InvalidAddress, MessageRejected, SettingError


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (SignatureMismatch("razorpay", "bad signature"), "razorpay: bad signature"),
        (GatewayApiError("payu", "bad signature", status=401), "payu API: bad signature"),
        (SettingError("PAYHOOKS_X", "bad signature"), "PAYHOOKS_X bad signature"),
        (InvalidAddress("a@b", "bad signature"), "not a usable email address: bad signature"),
        (MessageRejected("bad signature", permanent=True), "bad signature"),
        (OperatorRefused("bad signature"), "bad signature"),
    ],
)
def test_the_reason_stands_alone_and_the_message_names_more(error: Explained, message: str):
    assert isinstance(error, PayhooksError)
    assert (error.reason, str(error), error.args) == ("bad signature", message, (message,))

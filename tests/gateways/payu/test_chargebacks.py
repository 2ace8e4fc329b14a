"""PayU's chargeback webhook, in the shape its documentation prints (tests/data/payu/README.md):
JSON that nothing signs, naming the merchant only by its PayU id. Refused as unauthenticated,
with a reason that names it, never recorded as a dispute a forger could choose."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from payhooks.console import health as console_health
from payhooks.console.health import Answer
from payhooks.gateways.payu import CHARGEBACK_REFUSED, PayU
from payhooks.operations.alarms import AlarmKind, alarms
from payhooks.plumbing.errors import SignatureMismatch
from tests.fastapi.conftest import served
from tests.fastapi.test_delivery_health import OPERATOR, app_for, noted

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "payu" / "chargeback_webhook.json"


def test_a_chargeback_webhook_of_paus_documented_shape_is_refused_saying_why() -> None:
    adapter = PayU(merchant_key="rZ1fX4", salts=("salt",))
    with pytest.raises(SignatureMismatch) as refused:
        adapter.verify(SAMPLE.read_bytes(), {})
    assert refused.value.reason == CHARGEBACK_REFUSED
    assert "docs/providers.md" in str(refused.value)


def test_a_chargeback_notice_carrying_the_merchant_key_is_refused_all_the_same() -> None:
    """Its key field would prove nothing: the merchant key is on every checkout form."""
    body = SAMPLE.read_bytes().replace(b'"mid": "8146527"', b'"key": "rZ1fX4"')
    with pytest.raises(SignatureMismatch, match="chargeback notice"):
        PayU(merchant_key="rZ1fX4", salts=("salt",)).verify(body, {})


def test_chargeback_notices_are_counted_as_such_never_as_forged_signatures(conn, database_url):
    """Refused 401 on purpose, over HTTP: the delivery log files them under their own outcome,
    so neither the forged-signature banner and alert nor the console's signature count take
    them for forgeries."""
    body = SAMPLE.read_bytes()
    with served(app_for(database_url)) as running, running.client() as client:
        answers = [client.post("/webhooks/payu", content=body) for _ in range(6)]
        rows = noted(database_url, 6)
        shown = client.get("/payhooks/health", headers=OPERATOR).json()
    assert {(a.status_code, a.json()["error"]) for a in answers} == {(401, "unsigned_chargeback")}
    assert {row[:3] for row in rows} == {("payu", 401, "unsigned_chargeback")}
    payu = next(g for g in shown["gateways"] if g["provider"] == "payu")
    assert (payu["last_hour"], payu["signature_refused_last_hour"]) == ({"401": 6}, 0)
    assert shown["forged_signatures"] == []
    now = datetime.now(UTC)
    assert [a for a in alarms(conn, now) if a.kind is AlarmKind.FORGED] == []
    [charted] = [g for g in console_health.health(conn, now).gateways if g.provider == "payu"]
    assert charted.totals[Answer.SIGNATURE] == 0 and charted.totals[Answer.REFUSED] == 6

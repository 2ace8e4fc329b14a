"""PayU's status API, for reconciliation: ``verify_payment`` on its post service, and its
answer read as events. Needs httpx (an extra)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from payhooks.errors import GatewayApiError, MalformedPayload
from payhooks.events import EventKind, Provider
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._reports import (
    KEY_PREFIX,
    Report,
    canonical,
    printable,
    read_json,
    received,
    rupees,
    text,
)
from payhooks.gateways._status import CredentialsRefused, answer, parsed
from payhooks.providers._common import reference

COMMAND = "verify_payment"
NOT_FOUND = "Not Found"
_P = Provider.PAYU
_CREDENTIALS = re.compile(r"\b(hash|key)\b", re.IGNORECASE)
_KINDS: Mapping[str, EventKind] = {
    "success": EventKind.PAYMENT_CAPTURED,
    "failure": EventKind.PAYMENT_FAILED,
    "pending": EventKind.PAYMENT_PENDING,
}


def command_hash(key: str, command: str, var1: str, salt: str) -> str:
    """``sha512(key|command|var1|salt)``, lowercase hex: the hash of PayU's post service."""
    return hashlib.sha512(f"{key}|{command}|{var1}|{salt}".encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class PayUClient:
    """``verify_payment`` on ``/merchant/postservice.php?form=2``: a form with the merchant
    key, the command, ``var1`` (the txnid) and their hash with the salt."""

    credentials: ApiCredentials
    http: httpx.Client
    provider = _P

    def report(self, reference: str) -> Report:
        url = f"{self.credentials.base_url}/merchant/postservice.php"
        key, salt = self.credentials.id, self.credentials.secret
        form = {
            "key": key,
            "command": COMMAND,
            "var1": reference,
            "hash": command_hash(key, COMMAND, reference, salt),
        }
        body = answer(self.provider, self.http, "POST", url, params={"form": "2"}, data=form)
        return parsed(self.provider, lambda: payments(reference, body))


def client(credentials: ApiCredentials, http: httpx.Client) -> PayUClient:
    return PayUClient(credentials=credentials, http=http)


def payments(txnid: str, body: bytes) -> Report:
    """``verify_payment``: ``transaction_details`` keyed by txnid, ``amt`` a rupee string.
    A txnid PayU does not know comes back with its entry's ``status: Not Found``: nothing to
    report. Only that: an answer with no entry (``{"status":0,"msg":"Invalid Hash."}`` for a
    wrong salt) is PayU refusing the call, never "no payment yet"."""
    doc = read_json(_P, body)
    details = doc.get("transaction_details") if isinstance(doc, dict) else None
    entity = details.get(txnid) if isinstance(details, dict) else None
    if not isinstance(entity, dict):
        if isinstance(doc, dict) and doc.get("status") == 0:
            raise _refusal(doc)
        raise MalformedPayload(_P, "verify_payment answer has no transaction_details")
    status = text(_P, entity, "status")
    if status == NOT_FOUND:
        return Report()
    kind = _KINDS.get(status)
    if kind is None or entity.get("txnid", txnid) != txnid:
        return Report(skipped=(f"{txnid}:{status}",))
    event = received(
        _P, entity, kind=kind, status=status, payment_id=txnid, merchant_ref=txnid,
        amount_paise=rupees(_P, entity.get("amt"), "amt"), currency="INR",
        bank_ref=reference(entity.get("bank_ref_num"), entity.get("bank_ref_no")),
    )  # fmt: skip
    return Report(received=(event,))


def _refusal(doc: Mapping[str, Any]) -> GatewayApiError:
    """``status: 0`` with no entry for the txnid, in an HTTP 200: PayU's ``msg`` says why. A
    hash or key it refuses is the credentials (the salt), not this checkout."""
    said = printable(doc.get("msg")) or "no msg"
    error = CredentialsRefused if _CREDENTIALS.search(said) else GatewayApiError
    return error(_P.value, f"refused: {said}", status=200)


def stored(event_id: str, entity: dict[str, Any]) -> Report:
    """A stored payment entity, read as the answer it came in; the txnid is PayU's payment
    id, the middle of the key."""
    txnid = event_id.removeprefix(KEY_PREFIX + ":").rsplit(":", 1)[0]
    return payments(txnid, canonical({"transaction_details": {txnid: entity}}))


__all__ = ["COMMAND", "PayUClient", "client", "command_hash", "payments", "stored"]

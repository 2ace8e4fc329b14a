"""PayU's status API, for reconciliation and confirmation: ``verify_payment`` (a txnid's
payment) and ``check_action_status`` (a refund by PayU's request id) on its post service, and
their answers read as events. Needs httpx (an extra)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from payhooks.events import Event, EventKind, Provider, storable
from payhooks.gateways._common import child, naming, own_key, reference, same_id
from payhooks.gateways._gateway import ApiCredentials
from payhooks.gateways._refunds import (
    Refund,
    RefundFailed,
    RefundIncomplete,
    RefundRefused,
    Sent,
    same_amount,
    standing,
)
from payhooks.gateways._reports import (
    KEY_PREFIX,
    Report,
    Verdict,
    canonical,
    printable,
    read_json,
    received,
    rupees,
    text,
)
from payhooks.gateways._status import CredentialsRefused, answer, error_answer, parsed
from payhooks.gateways.payu.adapter import (
    UNMAPPED_FIELD,
    attempt,
    attempt_of,
    held,
    kind_of,
    known,
)
from payhooks.plumbing.errors import GatewayApiError, MalformedPayload

COMMAND = "verify_payment"
REFUND_COMMAND = "check_action_status"
SEND_REFUND_COMMAND = "cancel_refund_transaction"
BY_PAYMENT = "payuid"
"""``var2`` of ``check_action_status`` when ``var1`` is a ``mihpayid``: every action of that
payment, keyed by request id, each with the token it was asked under."""
REFUSING_CODES = frozenset({105, 110, 111, 113, 115, 117, 119, 121, 124, 125, 128, 129, 230})
"""The ``error_code`` of a ``status: 0`` answer PayU documents as a refund FAILURE ("error
codes for refund initiation") that refuses the refund. Any other ``status: 0`` is an error,
asked again with the same token: 106 "Token already exists" and 227 "same amount and same
token" (a refund under payhooks' own token is PayU's already: found by it on the next try),
107 "Upgraded to refund" (a cancel PayU turned into a refund: found by the token too), 116
"Transaction not found" (the payment unknown to the account the key names, or not visible
yet, as ``check_payment``'s "not found" is read), 214 "Same amount same transaction within 5
minutes" (another intent of the same amount, sent minutes before: taken after the backoff),
120 "Transaction lock could not be obtained", 123 "pending, requires manual follow-up", 109
"already logged", no code at all (a refused hash). PayU's rate limit is raised as a 429 is
(``_rate_limit``), before any of these is read."""
NO_ACTIONS = re.compile(r"no action status found", re.IGNORECASE)
PAYMENT_COMMAND = "check_payment"
_UNKNOWN = re.compile(r"\btransaction\b.*\bnot found\b|\bno transaction\b", re.IGNORECASE)
"""A ``check_payment`` refusal PayU means as "no such payment": it says so of the transaction
("Transaction Not Found", "no transaction found"). "Not found" of anything else (the merchant,
its key) is PayU refusing the call."""
RATE_LIMITED = re.compile(r"\brequests? limit reached\b|\btoo many requests\b", re.IGNORECASE)
"""The words of a ``status: 0`` answer that is PayU's rate limit, not a refusal."""
_OF_MERCHANT = re.compile(r"\b(merchant|hash|key|salt)\b", re.IGNORECASE)
NOT_FOUND = "Not Found"
REFUNDED = "success"
"""A refund's action status once its money went back (PayU's docs write it ``success`` in the
sample answer, ``SUCCESS`` in the list of states: compared in any case)."""
REFUND_FAILURE = "failure"
"""A refund PayU failed: final, no money went back under its request id."""
REFUND_UNDERWAY = frozenset({"queued", "in progress", "requested", "pending"})
"""A refund's states on its way (docs/providers.md): a callback claiming it waits for it. A
state PayU may add later is none of these: the callback waits no longer than the patience."""
REFUND_STATUS = "refund"
"""The status part of a reported refund's key, ``reconcile:<request_id>:refund``: never a
payment's status, so never a payment's key."""
_P = Provider.PAYU
PayUId = str | int
"""An id as PayU writes it: text, or a JSON number (compared by ``same_id``: past 2**53 a
number may be a double's rounding of the id)."""
_CREDENTIALS = re.compile(r"\b(hash|key)\b", re.IGNORECASE)
_PASSING = frozenset({EventKind.PAYMENT_PENDING})
"""States a payment passes through: a second post's payment in one is asked about again."""


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
        """``verify_payment`` for the txnid."""
        body = self._command(COMMAND, reference)
        return parsed(self.provider, lambda: payments(reference, body))

    def refund(
        self,
        request_id: str,
        txnid: str,
        *,
        claimed_paise: int | None = None,
        asked: Callable[[str], int | None] | None = None,
    ) -> Report:
        """The refund a callback claimed (``request_id``, of ``txnid``, for ``claimed_paise``),
        as PayU's ``check_action_status`` reports it (``_refund``). Reported for another
        amount than claimed, it is unreadable, as the sender reads an answer naming another
        amount than its intent asked (docs/providers.md, "Refunds"): PayU's field table says
        ``amt`` is the original transaction's amount, its sample of a payment's actions that
        it is each action's own, so which one PayU wrote cannot be told. Never applied for
        either figure, never refuted: the callback keeps both as its error, asked again, and a
        person is told. But for a refund payhooks sent: ``asked`` (what the intent under a
        key asked, None for no intent) says the reported token's intent asked just that
        ``amt``, which is then the refund's own, applied whatever the callback claimed (its
        ``amt`` unsigned: a forged callback under the refund's request id takes the key PayU's
        own callback takes)."""
        found = self._refund(request_id, txnid)
        told = [r.event.refund_amount_paise for r in found.received]
        if claimed_paise is None or all(paise == claimed_paise for paise in told):
            return found
        if asked is not None and all(_intended(r.event, asked) for r in found.received):
            return found
        return Report(unreadable=(
            f"refund {request_id:.40}: check_action_status says amt {told[0]} paise, not the "
            f"{claimed_paise} the callback claimed (PayU's amt may be the payment's own): "
            "neither applied, asked again",
        ))  # fmt: skip

    def _refund(self, request_id: str, txnid: str) -> Report:
        """A refund's action status, by PayU's ``request_id``: ``verify_payment`` lists no
        refunds, so a refund callback is confirmed here. ``txnid`` is what the callback named,
        which nothing signs: the answer names the refunded payment's ``mihpayid``, and
        ``check_payment`` must know it as a success of that txnid, or the refund confirms
        nothing (a real refund of another order, under a forged callback). A payment of the
        txnid other than the one ``verify_payment`` names for it is a second payment, which
        payhooks records under its ``mihpayid``: the refund is of that payment. What names no
        payment decides neither: ``check_payment`` knowing no payment of that ``mihpayid``,
        ``verify_payment`` answering ``Not Found`` for the txnid, are API errors, asked again."""
        body = self._command(REFUND_COMMAND, request_id)
        found = parsed(self.provider, lambda: refund_status(request_id, txnid, body))
        if found.underway or found.contradicted:
            mihpayid = parsed(_P, lambda: refunded_payment(request_id, body))
            return self._of_txnid(found, txnid, mihpayid)
        if not found.received:
            return found
        mihpayid = found.received[0].event.attempt_id
        if mihpayid is None:  # whose refund it is cannot be read: no answer, never "another's"
            raise GatewayApiError(_P.value, f"refund {request_id:.40} names no mihpayid")
        refunded = self._checked(mihpayid)
        if refunded is None:
            raise _unnamed(f"check_payment knows no payment {mihpayid:.64} refunded")
        if not _succeeded(refunded, txnid):
            return Report(skipped=(f"{request_id}: a refund of another order than {txnid}",))
        named = self._named(txnid)
        if named is None:
            raise _unnamed(f"verify_payment names no payment for txnid {txnid:.64}")
        if same_id(named, mihpayid):
            return found
        return parsed(self.provider, lambda: refund_status(request_id, txnid, body, mihpayid))

    def _named(self, txnid: str) -> PayUId | None:
        """The ``mihpayid`` ``verify_payment`` names for ``txnid`` (its payment), as PayU
        wrote it; None only where PayU answers that it knows no payment of the txnid
        (``status: Not Found``). A refusal (``status: 0`` with no entry), an entry with no
        ``mihpayid``, any other shape is an API error: asked again, never read as "another
        payment"."""
        body = self._command(COMMAND, txnid)
        return parsed(self.provider, lambda: named(txnid, body))

    def another_attempt(
        self,
        txnid: str,
        attempt: str,
        first: bytes | None,
        applied: bytes | None = None,
        recorded: str | None = None,
    ) -> Attempt:
        """A second success post for ``txnid`` naming ``attempt`` as its ``mihpayid``, after
        the post ``first`` (its stored body): PayU's ``check_payment`` says whether each names
        a successful payment of this txnid. Both do: a real second payment, reported to apply.
        Only the second: the first post's ``mihpayid`` was edited, and the payment applied is
        this one. The second not PayU's for this txnid: refuted. ``applied``: the body of the
        record that applied the txnid's payment when it is not the first post's (reconciliation
        applied the payment ``verify_payment`` names before any post came): the payment
        applied is that one, and each other one is judged against it. ``recorded``: the
        ``mihpayid`` the txnid's payment record keeps, the first post's when its body is
        purged. A verdict resting on ``check_payment`` knowing no payment of a ``mihpayid``
        is ``patient`` (``Attempt``)."""
        earlier = recorded if first is None else attempt_of(first)
        if earlier is not None and same_id(earlier, attempt):
            return Attempt(Verdict.CONFIRMED, f"mihpayid {attempt} is the first post's: a copy")
        written = None if applied is None else _attempt_in(applied)
        if written is None or (earlier is not None and same_id(written, earlier)):
            return self._judged(txnid, attempt, earlier)
        other = Report() if earlier is None else self._second(txnid, earlier)
        unknown = other is None
        other = other or Report()
        if same_id(written, attempt):  # this post is the applied payment's; the first's is other
            said = "a second payment, applied" if other.received else "not a success at PayU"
            return Attempt(
                Verdict.CONFIRMED,
                f"mihpayid {attempt} is the payment reconciliation applied for {txnid}; the "
                f"first post's ({earlier or 'none'}): {said}",
                other,
                patient=unknown,
            )
        judged = self._judged(txnid, attempt, str(written))
        both = (*judged.report.received, *other.received)
        return dataclasses.replace(
            judged, report=Report(received=both), patient=judged.patient or unknown
        )

    def _judged(self, txnid: str, attempt: str, earlier: str | None) -> Attempt:
        """``attempt`` against ``earlier``, the ``mihpayid`` of the payment applied."""
        claimed = self._checked(attempt)
        if claimed is None:  # PayU posts a payment it has: one it never knows is invented
            return Attempt(Verdict.REFUTED, f"PayU knows no payment {attempt}", patient=True)
        if claimed.get("txnid") == txnid and _kind(claimed) in _PASSING:
            return Attempt(None, f"PayU's payment {attempt} is {claimed.get('status')!s:.40}")
        if not _succeeded(claimed, txnid):
            return Attempt(
                Verdict.REFUTED,
                f"PayU's payment {attempt} is {claimed.get('status')!s:.40} for txnid "
                f"{claimed.get('txnid')!s:.64}, not a success of {txnid}",
            )
        applied = None if earlier is None else self._checked(earlier)
        if not _succeeded(applied, txnid):
            return Attempt(
                Verdict.CONFIRMED,
                f"payment {attempt} is the one applied: the first post's mihpayid "
                f"({earlier or 'none'}) is not a payment of {txnid} at PayU",
                patient=earlier is not None and applied is None,
            )
        second = checked(attempt, canonical({"status": 1, "transaction_details": claimed}))
        return Attempt(
            Verdict.CONFIRMED,
            f"a second payment of {txnid}: PayU reports {earlier} and {attempt} both successful",
            second,
        )

    def _second(self, txnid: str, mihpayid: str) -> Report | None:
        """``mihpayid``, a payment other than the one applied for ``txnid``, as a second
        payment to apply when PayU reports it a success of the txnid; else nothing. None
        where ``check_payment`` knows no payment of that ``mihpayid``, or not yet."""
        claimed = self._checked(mihpayid)
        if claimed is None:
            return None
        if not _succeeded(claimed, txnid):
            return Report()
        return checked(mihpayid, canonical({"status": 1, "transaction_details": claimed}))

    def _of_txnid(self, found: Report, txnid: str, mihpayid: str | None) -> Report:
        """A refund on its way or failed speaks of the callback only when it is a refund of
        the txnid's payment (the callback's txnid is unsigned, its request id anyone's to
        copy): else it is left aside, as not reported, and the callback waits no longer than
        the patience, holding one of the bounded places (docs/security.md)."""
        refunded = None if mihpayid is None else self._checked(mihpayid)
        if refunded is None or not _succeeded(refunded, txnid):
            return Report(skipped=found.skipped)
        return found

    def _checked(self, mihpayid: str) -> dict[str, Any] | None:
        """``check_payment``'s entity for a PayU payment id, or None where PayU knows none."""
        body = self._command(PAYMENT_COMMAND, mihpayid)
        return parsed(self.provider, lambda: _payment_entity(body, mihpayid))

    def send_refund(self, refund: Refund) -> Sent:
        """``cancel_refund_transaction``: ``var1`` the payment's ``mihpayid``, ``var2`` the
        intent's key as PayU's token (unique per refund request, at most 23 characters),
        ``var3`` the amount in rupees. A retry first lists the payment's actions
        (``check_action_status`` with ``var2=payuid``) for a refund under the token, so an
        answer lost after PayU acted is found, never asked again. ``status: 0`` is PayU's
        refusal, unless the token is already PayU's (then the refund it names is looked up)
        or PayU could not lock the payment (asked again later)."""
        mihpayid = self._mihpayid(refund)
        if refund.attempts > 1 and (made := self._refund_under(refund, mihpayid)) is not None:
            return made
        rupees = f"{refund.amount_paise / 100:.2f}"
        body = self._command(SEND_REFUND_COMMAND, mihpayid, var2=refund.idempotency_key,
                             var3=rupees)  # fmt: skip
        doc = parsed(self.provider, lambda: read_json(_P, body))
        if isinstance(doc, dict) and doc.get("status") == 1:
            return parsed(self.provider, lambda: Sent(gateway_refund_id=_request_id(doc, mihpayid)))
        said = printable(doc.get("msg") if isinstance(doc, dict) else None) or "no msg"
        code = doc.get("error_code") if isinstance(doc, dict) else None
        if (made := self._refund_under(refund, mihpayid)) is not None:
            return made
        if _code(code) not in REFUSING_CODES:
            error = CredentialsRefused if _CREDENTIALS.search(said) else GatewayApiError
            raise error(_P.value, f"refund not taken: {said} ({code!s:.20})", status=200)
        raise standing(refund, RefundRefused(_P.value, f"{said} (error_code {code})", status=200))

    def refund_status(self, refund: Refund) -> Sent:
        """``check_action_status`` by PayU's request id: ``success`` processed, ``failure``
        failed, any other state (queued, in progress, requested, pending) not yet. An answer
        without the request's entry is an error in PayU's own words (``_without_entry``)."""
        request_id = refund.gateway_refund_id or ""
        body = self._command(REFUND_COMMAND, request_id)
        doc = parsed(self.provider, lambda: read_json(_P, body))
        entity = child(doc, "transaction_details", request_id, request_id)
        if not isinstance(entity, dict):
            raise _without_entry(doc, request_id)
        return parsed(self.provider, lambda: _refund_state(entity, request_id, refund))

    def _mihpayid(self, refund: Refund) -> str:
        """The ``mihpayid`` to refund: the one the intent names (``attempt_id``, from the
        payment's record); else the intent's payment when its txnid is another (a second
        payment, keyed by its ``mihpayid``); else, its payment being its txnid, the one
        ``verify_payment`` names for the txnid. The ``mihpayid`` a post named is outside PayU's
        hash (a customer can post their signed success under another payment's): it is
        refunded only once ``check_payment`` knows it as a success of the intent's txnid; else
        the txnid's own payment is. An intent naming neither its ``mihpayid`` nor its txnid
        (which ``request`` no longer writes) is never asked for: ``RefundIncomplete``, payhooks'
        own refusal, never PayU's. A txnid PayU's API knows no payment of (``verify_payment``
        answering ``Not Found``, ``check_payment`` knowing no ``mihpayid`` recorded for it) is
        an error, asked again, as Razorpay's "does not exist" and Cashfree's
        ``order_not_found`` are: the intent names all PayU's refund needs, and the likeliest
        cause is on payhooks' side of the API (another PayU account's key and salt, test keys
        for live payments), or a payment not yet visible. Nothing is sent meanwhile, and once
        PayU knows the payment a retry finds a refund already made under the intent's token
        (``_refund_under``). A txnid is never sent as a ``mihpayid``."""
        if refund.attempt_id is not None and (
            refund.gateway_order_id is None
            or _succeeded(self._checked(refund.attempt_id), refund.gateway_order_id)
        ):
            return refund.attempt_id
        if refund.gateway_order_id is None:
            raise RefundIncomplete(
                _P.value,
                "PayU refunds a payment by its mihpayid, and the intent of payment "
                f"{refund.payment_id} names neither its mihpayid (attempt_id) nor its txnid "
                "(gateway_order_id)",
            )
        if refund.payment_id != refund.gateway_order_id:
            return refund.payment_id
        named = _identifier(self._named(refund.payment_id))
        if named is None:
            recorded = refund.attempt_id
            nor = "" if recorded is None else f", and check_payment knows no mihpayid {recorded}"
            raise _unnamed(
                f"PayU's verify_payment names no payment for txnid {refund.payment_id}{nor}: "
                "the API key and salt of another PayU account, or a payment not yet visible"
            )
        return named

    def _refund_under(self, refund: Refund, mihpayid: str) -> Sent | None:
        """The refund PayU made of the payment under the intent's token, or None: every
        action of the payment (``check_action_status``, ``var1`` the ``mihpayid``, ``var2``
        ``payuid``), each with its ``token``."""
        body = self._command(REFUND_COMMAND, mihpayid, var2=BY_PAYMENT)
        doc = parsed(self.provider, lambda: read_json(_P, body))
        if _no_actions(doc):
            return None  # nothing done to the payment yet
        actions = child(doc, "transaction_details", mihpayid)
        if not isinstance(actions, dict):
            if isinstance(doc, dict) and doc.get("status") == 0:
                raise _refusal(doc)
            raise GatewayApiError(_P.value, "check_action_status answer has no transaction_details")
        key = refund.idempotency_key
        made = [(r, e) for r, e in actions.items() if isinstance(e, dict) and e.get("token") == key]
        if not made:
            return None
        request_id, entity = made[0]
        return parsed(self.provider, lambda: _refund_state(entity, str(request_id), refund))

    def _command(self, command: str, var1: str, **more: str) -> bytes:
        """A post-service call; ``var2``, ``var3`` are outside the hash (PayU hashes
        ``key|command|var1|salt`` for every command). PayU's rate limit, whatever the command,
        is raised here (``_rate_limit``)."""
        url = f"{self.credentials.base_url}/merchant/postservice.php"
        key, salt = self.credentials.id, self.credentials.secret
        form = {"key": key, "command": command, "var1": var1, **more,
                "hash": command_hash(key, command, var1, salt)}  # fmt: skip
        body = answer(self.provider, self.http, "POST", url, params={"form": "2"}, data=form)
        _rate_limit(body)
        return body


def client(credentials: ApiCredentials, http: httpx.Client) -> PayUClient:
    """The status client for these credentials, over ``http``."""
    return PayUClient(credentials=credentials, http=http)


def payments(txnid: str, body: bytes) -> Report:
    """``verify_payment``: ``transaction_details`` keyed by txnid, ``amt`` a rupee string.
    A txnid PayU does not know comes back with its entry's ``status: Not Found``: nothing to
    report. Only that: an answer with no entry (``{"status":0,"msg":"Invalid Hash."}`` for a
    wrong salt) is PayU refusing the call, never "no payment yet". A status is read in any
    case (PayU's state table writes ``Success``); one none of PayU's is unreadable, named
    with its words, never skipped in silence. A success whose
    ``unmappedstatus`` is ``auth`` is an authorisation, keyed ``reconcile:<txnid>:AUTHORIZED``
    (``adapter.kind_of``): the capture a later pass finds is applied. The event names the
    entry's ``mihpayid`` as its ``attempt_id``, as a post's does: the payment's record keeps
    it, and a refund asked by the txnid goes to that payment, not to whichever
    ``verify_payment`` names when the refund is sent (a second payment of the txnid)."""
    entity = _verified_entity(txnid, body)
    status = text(_P, entity, "status")
    if _not_found(status):
        return Report()
    if not known(status):
        return Report(unreadable=(f"payment {txnid} unreadable: {_unknown(status)}",))
    kind, key_status = kind_of(status, entity.get(UNMAPPED_FIELD))
    named = entity.get("txnid", txnid)
    if named != txnid:  # PayU's mix-up: said, asked again later, never "no payment yet"
        said = printable(str(named), 80)
        return Report(unreadable=(f"payment {txnid} unreadable: its entry names another txnid: "
                                  f"{said}",))  # fmt: skip
    event = received(
        _P, entity, kind=kind, status=key_status, payment_id=txnid, merchant_ref=txnid,
        amount_paise=rupees(_P, entity.get("amt"), "amt"), currency="INR",
        bank_ref=reference(entity.get("bank_ref_num"), entity.get("bank_ref_no")),
    )  # fmt: skip
    mihpayid = attempt(_identifier(entity.get("mihpayid")))
    event = dataclasses.replace(event, event=dataclasses.replace(event.event, attempt_id=mihpayid))
    return Report(received=(event,))


def named(txnid: str, body: bytes) -> PayUId | None:
    """``verify_payment``'s ``mihpayid`` for ``txnid`` as PayU wrote it (``_written``), read as
    ``payments`` reads its entry."""
    entity = _verified_entity(txnid, body)
    if _not_found(text(_P, entity, "status")):
        return None
    found = _written(entity.get("mihpayid"))
    if found is None:
        raise MalformedPayload(_P, "verify_payment entry has no mihpayid")
    return found


def _verified_entity(txnid: str, body: bytes) -> dict[str, Any]:
    """The txnid's entry of a ``verify_payment`` answer; PayU's refusal, or any answer
    without the entry, raises."""
    doc = read_json(_P, body)
    details = doc.get("transaction_details") if isinstance(doc, dict) else None
    entity = details.get(txnid) if isinstance(details, dict) else None
    if not isinstance(entity, dict):
        if isinstance(doc, dict) and doc.get("status") == 0:
            raise _refusal(doc)
        if isinstance(details, dict) and details and txnid not in details:
            named = printable(", ".join(sorted(str(k) for k in details)[:3]), 120)
            raise MalformedPayload(
                _P, f"verify_payment answer is about another txnid ({named}), not {txnid}"
            )
        raise MalformedPayload(_P, "verify_payment answer has no transaction_details")
    return entity


def _no_actions(doc: object) -> bool:
    """``check_action_status`` saying it found nothing: every entry of ``transaction_details``
    the text "No action status found", under whatever key (PayU's docs print the answer about
    ``131278422`` keyed ``13127842``), so it is read by its text, not by the id asked about."""
    details = doc.get("transaction_details") if isinstance(doc, dict) else None
    return (
        isinstance(details, dict)
        and bool(details)
        and all(isinstance(v, str) and NO_ACTIONS.search(v) for v in details.values())
    )


def refunded_payment(request_id: str, body: bytes) -> str | None:
    """The ``mihpayid`` ``check_action_status``'s entry for ``request_id`` names (the payment
    refunded), None where it names none."""
    details = child(read_json(_P, body), "transaction_details", request_id, request_id)
    return _identifier(details.get("mihpayid")) if isinstance(details, dict) else None


def refund_status(
    request_id: str, txnid: str, body: bytes, second_payment: str | None = None
) -> Report:
    """``check_action_status``: ``transaction_details`` keyed twice by the request id, the
    refund's ``amt`` a rupee string, its ``status`` success once refunded, ``mihpayid`` the
    payment refunded (the event's ``attempt_id``), ``token`` the merchant's id for the
    refund (its ``refund_key``: a refund payhooks sent, its intent's key); ``failure`` is
    final (``contradicted``), any other state (queued, in progress, requested) the refund on
    its way (``underway``), said once ``_refund`` knows it is of the txnid's payment. A
    request id PayU does not know is ``status: 0`` with the text "No action status found"
    under it: no such refund, or not yet visible (``unknown``: the callback is refuted only
    once that has lasted the confirmations' patience). The refund is of the txnid's payment,
    or of ``second_payment`` (its ``mihpayid``), kept in the stored entity so that it reads
    again the same."""
    doc = read_json(_P, body)
    if _no_actions(doc):
        return Report(unknown=True)
    details = doc.get("transaction_details") if isinstance(doc, dict) else None
    outer = details.get(request_id) if isinstance(details, dict) else None
    entity = outer.get(request_id) if isinstance(outer, dict) else None
    if not isinstance(entity, dict):
        if isinstance(doc, dict) and doc.get("status") == 0:
            raise _refusal(doc)
        raise MalformedPayload(_P, "check_action_status answer has no transaction_details")
    naming(entity, "request_id", request_id, what="refund", provider=_P)
    if entity.get("action", REFUND_STATUS) != REFUND_STATUS:
        return Report(skipped=(f"{request_id}:{entity.get('action')}",))
    status = text(_P, entity, "status")
    if status.lower() == REFUND_FAILURE:  # final: no money went back under this request
        return Report(skipped=(f"{request_id}:{status}",), contradicted=True)
    if status.lower() != REFUNDED:  # on its way, or a state payhooks does not know
        said = (f"{request_id}:{status}",)
        return Report(skipped=said, underway=status.lower() in REFUND_UNDERWAY)
    kept = {**entity, "request_id": request_id, "merchantTxnId": txnid}
    if second_payment is not None:
        kept[SECOND_PAYMENT] = second_payment
    found = received(
        _P, kept, kind=EventKind.REFUND_PROCESSED, status=REFUND_STATUS, payment_id=request_id,
        merchant_ref=txnid, amount_paise=rupees(_P, entity.get("amt"), "amt"), currency="INR",
        bank_ref=reference(entity.get("bank_arn"), entity.get("bank_ref_num")),
    )  # fmt: skip
    event = dataclasses.replace(
        found.event,
        event_type=f"{KEY_PREFIX}.refund.{REFUNDED}",
        payment_id=second_payment or txnid,  # a PayU payment is its txnid, unless a second
        amount_paise=None,
        refund_id=request_id,
        refund_amount_paise=found.event.amount_paise,
        refund_key=own_key(entity.get("token")),  # the merchant's: a payhooks intent's key
        attempt_id=_identifier(entity.get("mihpayid")),
    )
    return Report(received=(dataclasses.replace(found, event=storable(event)),))


@dataclass(frozen=True, slots=True)
class Attempt:
    """What PayU says of another attempt: a verdict (None: ask again), why, and the second
    payment to apply when it is one."""

    verdict: Verdict | None
    detail: str
    report: Report = field(default_factory=Report)
    patient: bool = False
    """The verdict rests on ``check_payment`` knowing no payment of a ``mihpayid``, which a
    payment too new for PayU's API, or one blip of it, also meets: it stands once the
    confirmations' patience has passed since the post came, and until then the post is
    asked about again (``confirmations.attempt_verdict``), never refuted nor settled on one
    such answer."""


SECOND_PAYMENT = "payhooks_second_payment"
"""Where a stored refund of a second payment keeps that payment's ``mihpayid``."""


def _request_id(doc: Mapping[str, Any], mihpayid: str) -> str:
    """PayU's id for the refund or cancel it queued of payment ``mihpayid`` (a string, or a
    number): ``request_id`` for a captured payment's refund ("Refund Request Queued"),
    ``txn_update_id`` for a payment still in ``auth`` ("Cancel Request Queued"), as PayU's
    refund API reference answers each; one naming another payment is not this refund's."""
    naming(doc, "mihpayid", mihpayid, what="refund", provider=_P)
    found = _identifier(doc.get("request_id")) or _identifier(doc.get("txn_update_id"))
    if found is None:
        raise MalformedPayload(_P, "cancel_refund_transaction answer has no request_id")
    return found


def _refund_state(entity: Mapping[str, Any], request_id: str, refund: Refund) -> Sent:
    """A refund action of ``refund``: ``success`` (any case) processed, ``failure`` failed (no
    money went back), anything else on its way. An entry naming another request, or another
    amount (``amt``, rupees, the action's own: a payment's actions list its capture's and
    each refund's: docs/providers.md, source [P8]), says nothing of this one."""
    naming(entity, "request_id", request_id, what="refund", provider=_P)
    same_amount(refund, rupees(_P, entity.get("amt"), "amt"), provider=_P)
    status = text(_P, entity, "status").lower()
    if status == "failure":
        raise RefundFailed(
            _P.value, f"PayU's refund {request_id:.40} failed", gateway_refund_id=request_id
        )
    return Sent(gateway_refund_id=request_id, processed=status == REFUNDED)


def _intended(event: Event, asked: Callable[[str], int | None]) -> bool:
    """Whether the refund ``event`` reports names, by its token, an intent payhooks sent that
    asked its very amount."""
    key = event.refund_key
    return key is not None and asked(key) == event.refund_amount_paise


def _code(value: object) -> int | None:
    """PayU's ``error_code``, a JSON number or a string of digits."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else None


def _attempt_in(body: bytes) -> PayUId | None:
    """The ``mihpayid`` of a stored payment: a post's form field, or a reconciled entity's as
    PayU wrote it."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return attempt_of(body)
    return _written(doc.get("mihpayid")) if isinstance(doc, dict) else None


def _written(value: object) -> PayUId | None:
    """A ``mihpayid`` as PayU writes it: a string (spaces around it, as in one sample, left
    out), or a whole JSON number; None for anything else."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return (value.strip() or None) if isinstance(value, str) else None


def _identifier(value: object) -> str | None:
    """A ``mihpayid`` PayU writes as a string or a number, as text."""
    found = _written(value)
    return None if found is None else str(found)


def _succeeded(entity: Mapping[str, Any] | None, txnid: str) -> bool:
    """A payment ``check_payment`` reports a success (in any case; ``auth`` included: the
    payment is the txnid's, captured or to be) of ``txnid``."""
    if entity is None or entity.get("txnid") != txnid:
        return False
    return str(entity.get("status")).lower() == "success"


def _kind(entity: Mapping[str, Any]) -> EventKind:
    """The kind of a ``check_payment`` entity (its status read by ``_payment_entity``)."""
    return kind_of(str(entity.get("status")), entity.get(UNMAPPED_FIELD))[0]


def _not_found(status: str) -> bool:
    """``verify_payment``'s word for a txnid PayU knows no payment of, in any case."""
    return status.casefold() == NOT_FOUND.casefold()


def _unknown(status: str) -> str:
    """Why a status is not read: PayU's own words, shown, and what they are not."""
    return f"status {printable(status, 40)!r} is none of PayU's (success, failure, pending)"


def _payment_entity(body: bytes, mihpayid: str) -> dict[str, Any] | None:
    """``check_payment``: one ``transaction_details`` object, not keyed, its ``mihpayid`` a
    JSON number in PayU's sample (one naming another than ``mihpayid``, asked about, is
    unreadable). ``status: 0`` saying the transaction is not found is no such
    payment; any other ``status: 0`` (one naming the merchant, its key or hash, whatever else
    it says) is PayU refusing the call. An entity without a ``status`` and a ``txnid`` in text,
    or whose ``status`` is none of PayU's (in any case), says nothing of the payment:
    unreadable, never "not a success". Nor does one without a
    ``mihpayid``: PayU's documented answer names the payment it is about, so an entity that
    does not cannot be told from one about another payment."""
    doc = read_json(_P, body)
    entity = doc.get("transaction_details") if isinstance(doc, dict) else None
    if isinstance(entity, dict) and doc.get("status") == 1:
        state = text(_P, entity, "status")  # MalformedPayload when it is not text
        text(_P, entity, "txnid")
        if not known(state):  # never read as "not a success": asked again
            raise MalformedPayload(_P, f"check_payment {mihpayid:.64}: {_unknown(state)}")
        if _identifier(entity.get("mihpayid")) is None:
            raise MalformedPayload(_P, "check_payment answer names no mihpayid")
        naming(entity, "mihpayid", mihpayid, what="check_payment", provider=_P)
        return entity
    if isinstance(doc, dict) and doc.get("status") == 0:
        said = str(doc.get("msg", ""))
        if _UNKNOWN.search(said) and not _OF_MERCHANT.search(said):
            return None
        raise _refusal(doc)
    raise MalformedPayload(_P, "check_payment answer has no transaction_details")


def checked(mihpayid: str, body: bytes) -> Report:
    """A ``check_payment`` answer as a payment of its own: keyed and identified by PayU's
    ``mihpayid`` (a second payment of one txnid is not the txnid's first), its order the
    txnid it names; an authorisation, not a capture, where PayU says ``auth``."""
    entity = _payment_entity(body, mihpayid)  # one naming no or another mihpayid: unreadable
    if entity is None:
        return Report()
    txnid = text(_P, entity, "txnid")
    status = text(_P, entity, "status")
    kind, key_status = kind_of(status, entity.get(UNMAPPED_FIELD))
    event = received(
        _P, {**entity, "mihpayid": mihpayid}, kind=kind, status=key_status, payment_id=mihpayid,
        merchant_ref=txnid, amount_paise=rupees(_P, entity.get("amt"), "amt"), currency="INR",
        bank_ref=reference(entity.get("bank_ref_num"), entity.get("bank_ref_no")),
    )  # fmt: skip
    return Report(received=(event,))


def _rate_limit(body: bytes) -> None:
    """PayU answers a rate limit under HTTP 200: ``{"status": 0, "msg": "Requests limit
    reached"}`` (its error codes; "Too many requests" read so too). Raised as another
    gateway's 429 is (``GatewayApiError.rate_limited``): reconciliation stops asking PayU for
    the pass, and nothing PayU was asked is taken as done or refused."""
    doc = error_answer(body)
    said = printable(doc.get("msg")) if doc is not None and doc.get("status") == 0 else None
    if said is not None and RATE_LIMITED.search(said):
        raise GatewayApiError(_P.value, f"rate limited (under HTTP 200): {said}", status=429)


def _without_entry(doc: object, request_id: str) -> GatewayApiError:
    """``check_action_status`` naming no entry for a refund PayU queued under
    ``request_id``: asked again, in PayU's words. "No action status found" (PayU not showing
    the refund yet); any other ``status: 0`` is PayU refusing the call (``_refusal``: a
    wrong salt's "Invalid Hash." is the credentials refused, as for PayU's every call)."""
    if _no_actions(doc):
        said = f"request {request_id:.40}: No action status found, PayU says: asked again"
        return GatewayApiError(_P.value, said, status=200)
    if isinstance(doc, dict) and doc.get("status") == 0:
        return _refusal(doc)
    return GatewayApiError(_P.value, f"check_action_status names no request {request_id:.40}")


def _unnamed(said: str) -> GatewayApiError:
    """PayU's word that it knows no such payment, where another of its answers names one: no
    decision either way, asked again."""
    return GatewayApiError(_P.value, f"{said}: asked again", status=200)


def _refusal(doc: Mapping[str, Any]) -> GatewayApiError:
    """``status: 0`` with no entry for the txnid, in an HTTP 200: PayU's ``msg`` says why. A
    hash or key it refuses is the credentials (the salt), not this checkout."""
    said = printable(doc.get("msg")) or "no msg"
    error = CredentialsRefused if _CREDENTIALS.search(said) else GatewayApiError
    return error(_P.value, f"refused: {said}", status=200)


def stored(event_id: str, entity: dict[str, Any]) -> Report:
    """A stored payment or refund entity, read as the answer it came in; the middle of the
    key is the txnid (a payment's) or PayU's request id (a refund's, which kept its txnid)."""
    middle, _, status = event_id.removeprefix(KEY_PREFIX + ":").rpartition(":")
    if status == REFUND_STATUS:
        answer = {"transaction_details": {middle: {middle: entity}}}
        txnid, second = str(entity.get("merchantTxnId", "")), entity.get(SECOND_PAYMENT)
        return refund_status(middle, txnid, canonical(answer), second)
    if status == "success" and held(entity.get(UNMAPPED_FIELD)):  # stored as a capture by a
        entity = {k: v for k, v in entity.items() if k != UNMAPPED_FIELD}  # release before
        # authorisations were read: read again as it was applied
    if entity.get("txnid") != middle and same_id(entity.get("mihpayid"), middle):  # a 2nd one
        return checked(middle, canonical({"status": 1, "transaction_details": entity}))
    return payments(middle, canonical({"transaction_details": {middle: entity}}))


__all__ = [
    "COMMAND",
    "PAYMENT_COMMAND",
    "REFUND_COMMAND",
    "SEND_REFUND_COMMAND",
    "Attempt",
    "PayUClient",
    "checked",
    "client",
    "command_hash",
    "payments",
    "refund_status",
    "stored",
]

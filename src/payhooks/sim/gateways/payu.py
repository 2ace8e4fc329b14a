"""PayU, simulated: payment posts (form-encoded) with their reverse hash, refund callbacks
(JSON, unsigned), its ``verify_payment`` and ``check_action_status`` status API, its story in
the storm, and the demo's scenario of a success posted twice. A PayU payment's identity in
payhooks is the cart's txnid."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from payhooks.events import Provider
from payhooks.gateways import payu
from payhooks.sim import parts
from payhooks.sim import stage as judged
from payhooks.sim.deliveries import Delivery, Paid, Purchase, bank_reference
from payhooks.sim.gateways.base import Booked, Simulator, numeric_payment_id, retry_after
from payhooks.sim.parts import Fault, GatewayBooks, Signer, StormOptions, Story
from payhooks.sim.stage import Result, Stage

# --- deliveries ------------------------------------------------------------------------------


def delivery(
    gateway: Signer, *, txnid: str, mihpayid: str, amount: str, status: str = "success"
) -> Delivery:
    """A PayU payment post (form-encoded) with its reverse hash."""
    fields = {
        "mihpayid": mihpayid,
        "mode": "UPI",
        "status": status,
        "unmappedstatus": "captured" if status == "success" else status,
        "key": gateway.keys.payu_key,
        "txnid": txnid,
        "amount": amount,
        "addedon": "2026-03-04 14:46:14",
        "productinfo": "payhooks demo",
        "firstname": "Asha",
        "email": "buyer@example.com",
        "phone": "9999999999",
        **{f"udf{n}": "" for n in range(1, 11)},
        "error": "E000",
        "error_Message": "No Error",
        "bank_ref_num": bank_reference(mihpayid),
    }
    fields["hash"] = payu.reverse_hash(fields, gateway.keys.payu_salt)
    return Delivery(
        provider=Provider.PAYU,
        body=payu.encode(fields),
        headers={"content-type": "application/x-www-form-urlencoded"},
        label=f"payu {status} {mihpayid}",
    )


def payment_delivery(gateway: Signer, paid: Paid) -> Delivery:
    """``Simulator.payment_delivery``: the post of a payment, success or failure (``event``
    has no meaning on PayU: its posts name no event)."""
    status = {"captured": "success", "failed": "failure"}[paid.what]
    amount = f"{Decimal(paid.amount_paise) / 100:.2f}"
    return delivery(
        gateway, txnid=paid.reference, mihpayid=paid.payment_id, amount=amount, status=status
    )


def refund_callback(
    gateway: Signer, *, txnid: str, mihpayid: str, request_id: str, amount: str,
    status: str = "success", token: str | None = None,
) -> Delivery:  # fmt: skip
    """A PayU refund status callback: JSON, no hash (the shape of PayU's documented samples)."""
    doc = {
        "additionalValue1": None, "bank_arn": None if status != "success" else 412608517394,
        "refund_mode": "Back to Source", "bank_ref_num": bank_reference(mihpayid),
        "key": gateway.keys.payu_key, "amt": amount, "remark": None, "status": status,
        "token": token or f"rf{request_id}", "mihpayid": mihpayid, "request_id": request_id,
        "merchantTxnId": txnid, "additionalValue2": None, "action": "refund",
    }  # fmt: skip
    return Delivery(
        provider=Provider.PAYU,
        body=json.dumps(doc).encode(),
        headers={"content-type": "application/json"},
        label=f"payu refund {status} {request_id}",
    )


def as_a_double(mihpayid: str) -> int:
    """``mihpayid`` as a JSON number from a double-precision serializer: past 2**53 not every
    whole number is a double, and PayU's ``check_payment`` sample writes the payment its
    ``verify_payment`` sample names "403993715521889530" as 403993715521889540."""
    return int(Decimal(repr(float(int(mihpayid)))))


def checked_as_a_double(api: GatewayBooks, mihpayid: str) -> Fault:
    """The books' ``check_payment`` answer about a payment, its ``mihpayid`` written
    ``as_a_double``: one call answered so (``GatewayApi.fail_next``)."""
    entity = {**(api.payment_of(Provider.PAYU, mihpayid) or {}), "mihpayid": as_a_double(mihpayid)}
    answered = {"status": 1, "msg": "Transaction Fetched Successfully",
                "transaction_details": entity}  # fmt: skip
    return Fault(body=json.dumps(answered).encode())


def refund_entity(*, mihpayid: str, request_id: str, amount: str, status: str) -> dict[str, Any]:
    """A refund as ``check_action_status`` answers about it (in its documented shape)."""
    return {
        "mihpayid": mihpayid, "bank_ref_num": bank_reference(mihpayid), "request_id": request_id,
        "amt": amount, "mode": "UPI", "action": "refund", "token": f"rf{request_id}",
        "status": status, "bank_arn": None, "settlement_id": None, "amount_settled": None,
        "UTR_no": None, "value_date": None, "refund_mode": "Back to Source",
    }  # fmt: skip


# --- the status API double: POST /merchant/postservice.php?form=2 ------------------------------
# verify_payment (var1: txnids joined by |), check_payment (var1: a mihpayid) and
# check_action_status (var1: a refund's request id; or a mihpayid with var2=payuid: all its
# actions) and cancel_refund_transaction (var1 a mihpayid, var2 a token, var3 rupees)

_COMMANDS = ("verify_payment", "check_payment", "check_action_status", "cancel_refund_transaction")
UNKNOWN_PAYMENT = {"status": 0, "msg": "Transaction Not Found"}
"""PayU documents no answer for a mihpayid it does not know; this double's guess, in the words
its other answers use (payhooks reads a ``status: 0`` saying the transaction is not found so)."""


def routes(api: GatewayBooks) -> list[Route]:
    async def post_service(request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        fields = {name: form.get(name, "") for name in ("key", "command", "var1", "var2", "var3",
                                                        "hash")}  # fmt: skip
        if request.query_params.get("form") != "2" or fields["command"] not in _COMMANDS:
            return JSONResponse({"status": 0, "msg": "Invalid command"})
        if not _signed(api, fields):
            return JSONResponse({"status": 0, "msg": "Invalid Hash."})
        fault = await api.fault(Provider.PAYU)
        if fault is not None:
            return fault
        if fields["command"] == "cancel_refund_transaction":
            made = _refund(api, fields["var1"], fields["var2"], fields["var3"])
            late = await api.after_acting(Provider.PAYU) if made.get("status") == 1 else None
            return late if late is not None else JSONResponse(made)
        if fields["command"] == "check_action_status" and fields["var2"] == "payuid":
            return JSONResponse(_actions_of(api, fields["var1"]))
        if fields["command"] == "check_action_status":
            return JSONResponse(_action_status(api, fields["var1"]))
        if fields["command"] == "check_payment":
            found = api.payment_of(Provider.PAYU, fields["var1"].strip('"'))
            if found is None:
                return JSONResponse(UNKNOWN_PAYMENT)
            return JSONResponse({"status": 1, "msg": "Transaction Fetched Successfully",
                                 "transaction_details": found})  # fmt: skip
        return JSONResponse(_verified(api, fields["var1"].split("|")))

    return [Route("/merchant/postservice.php", post_service, methods=["POST"])]


def _signed(api: GatewayBooks, fields: dict[str, str]) -> bool:
    keys = api.keys
    expected = hashlib.sha512(
        f"{keys.payu_key}|{fields['command']}|{fields['var1']}|{keys.payu_salt}".encode()
    ).hexdigest()
    return fields["key"] == keys.payu_key and hmac.compare_digest(expected, fields["hash"])


def _refund(api: GatewayBooks, mihpayid: str, token: str, rupees: str) -> dict[str, Any]:
    """``cancel_refund_transaction`` of a captured payment: queued under PayU's request id,
    or refused with PayU's error code (its docs' "error codes for refund initiation")."""
    paid = api.payment_of(Provider.PAYU, mihpayid)
    if paid is None or paid.get("status") != "success":
        return {"status": 0, "msg": "Refund FAILURE - Transaction not found", "error_code": 116,
                "mihpayid": mihpayid}  # fmt: skip
    if not 1 <= len(token) <= 23:
        return {"status": 0, "msg": "Refund FAILURE - Input Data missing", "error_code": 124}
    try:
        paise = int(Decimal(rupees) * 100)
    except ArithmeticError:
        paise = 0
    if paise <= 0:
        return {"status": 0, "msg": "Refund FAILURE - Invalid amount", "error_code": 105,
                "mihpayid": mihpayid}  # fmt: skip
    if api.money.by_key.get((Provider.PAYU, token)) is not None:
        return {"status": 0, "msg": "Refund FAILURE - Token already exists", "error_code": 106,
                "mihpayid": mihpayid}  # fmt: skip
    request_id = f"{abs(hash(token)) % 10**9:09d}"

    def make(n: int) -> dict[str, Any]:
        return {**refund_entity(mihpayid=mihpayid, request_id=request_id,
                                amount=f"{paise / 100:.2f}",
                                status=api.refund_status(Provider.PAYU)),
                "token": token}  # fmt: skip

    asking = parts.RefundAsked(provider=Provider.PAYU, payment_id=mihpayid, key=token,
                               body={"var3": str(paise)}, amount_paise=paise,
                               captured_paise=_paise(paid))  # fmt: skip
    made, refusal = api.refund_once(asking, make)
    if refusal is not None or made is None:
        return {"status": 0, "msg": "Refund FAILURE - Invalid amount", "error_code": 105,
                "mihpayid": mihpayid}  # fmt: skip
    api.refund_booked(Provider.PAYU, str(paid.get("txnid")), request_id, made)
    return {"status": 1, "msg": "Refund Request Queued", "request_id": request_id,
            "bank_ref_num": None, "mihpayid": int(mihpayid) if mihpayid.isdigit() else mihpayid,
            "error_code": 102}  # fmt: skip


def _paise(entity: dict[str, Any]) -> int:
    return int(Decimal(str(entity.get("amt") or entity.get("transaction_amount") or 0)) * 100)


def _actions_of(api: GatewayBooks, mihpayid: str) -> dict[str, Any]:
    """``check_action_status`` with ``var2=payuid``: every refund of the payment, keyed by
    the mihpayid then by request id (PayU's docs' sample)."""
    made = api.money.refunds.get((Provider.PAYU, mihpayid), [])
    if not made:
        return {"status": 0, "msg": "0 out of 1 Transactions Fetched Successfully",
                "transaction_details": {mihpayid: "No action status found"}}  # fmt: skip
    return {"status": 1, "msg": "1 out of 1 Transactions Fetched Successfully",
            "transaction_details": {mihpayid: {r["request_id"]: r for r in made}}}  # fmt: skip


def _action_status(api: GatewayBooks, request_id: str) -> dict[str, Any]:
    found = api.refund_of(Provider.PAYU, request_id)
    if found is None:
        return {"status": 0, "msg": "0 out of 1 Transactions Fetched Successfully",
                "transaction_details": {request_id: "No action status found"}}  # fmt: skip
    return {"status": 1, "msg": "1 out of 1 Transactions Fetched Successfully",
            "transaction_details": {request_id: {request_id: found}}}  # fmt: skip


def _verified(api: GatewayBooks, txnids: list[str]) -> dict[str, Any]:
    details = {t: _details(api, t) for t in txnids}
    found = sum(1 for d in details.values() if d.get("status") != "Not Found")
    return {
        "status": 1 if found else 0,
        "msg": f"{found} out of {len(txnids)} Transactions Fetched Successfully",
        "transaction_details": details,
    }


def _details(api: GatewayBooks, txnid: str) -> dict[str, Any]:
    """The txnid's first successful payment, else its latest attempt. PayU refuses a txnid
    already paid, so two successes of one are rare; which one it names then is UNCONFIRMED."""
    order = api.order(Provider.PAYU, txnid)
    if order is None or not order.payments:
        return {"mihpayid": "Not Found", "status": "Not Found"}
    paid = [p for p in order.payments if p.get("status") == "success"]
    return dict(paid[0] if paid else order.payments[-1])


def fault(scripted: Fault) -> Response:
    """PayU documents no error body for its post service; a bare status and text."""
    return retry_after(
        Response("Service Unavailable", status_code=scripted.status or 503), scripted
    )


def entity(booked: Booked) -> dict[str, Any]:
    state = booked.status or "success"
    order, payment_id = booked.order, booked.payment_id
    amount = f"{Decimal(order.amount_paise) / 100:.2f}"
    return {
        "mihpayid": payment_id, "request_id": "", "bank_ref_num": bank_reference(payment_id),
        "amt": amount,
        "transaction_amount": amount, "txnid": order.reference, "additional_charges": "0.00",
        "productinfo": "payhooks demo", "firstname": "Asha", "bankcode": "UPI",
        "udf1": "", "udf2": "", "udf3": "", "udf4": "", "udf5": "", "field2": "",
        "field9": "No Error", "error_code": "E000", "addedon": "2026-03-04 14:46:14",
        "payment_source": "payu", "card_type": "", "error_Message": "NO ERROR",
        "net_amount_debit": amount, "disc": "0.00", "mode": "UPI", "PG_TYPE": "UPI-PG",
        "card_no": "", "name_on_card": "", "status": state,
        "unmappedstatus": {"success": "captured", "failure": "failed"}.get(state, state),
        "Merchant_UTR": None, "Settled_At": "0000-00-00 00:00:00",
    }  # fmt: skip


# --- the storm's story and the demo's scenario ---------------------------------------------------


def story(
    told: Story, gateway: Signer, options: StormOptions, rng: random.Random
) -> list[Delivery]:
    buy = told.purchase
    amount = f"{Decimal(buy.amount_paise) / 100:.2f}"
    out: list[Delivery] = []
    if rng.random() < options.failed_attempt_rate:
        out.append(
            delivery(
                gateway,
                txnid=buy.reference,
                mihpayid=numeric_payment_id(),
                amount=amount,
                status="failure",
            )
        )
    out.append(delivery(gateway, txnid=buy.reference, mihpayid=numeric_payment_id(), amount=amount))
    told.captured.append(buy.reference)  # PayU's payment identity is the hashed txnid
    return out


def duplicates(stage: Stage) -> Result:
    buy = stage.merchant.buy(Provider.PAYU, {"MUG-CLAY": 1, "HONEY-500": 1}, judged.CUSTOMER)
    pay = stage.vouch(buy, buy.reference)  # PayU's payment identity is the hashed txnid
    post = delivery(
        stage.gateway,
        txnid=buy.reference,
        mihpayid=numeric_payment_id(),
        amount=f"{Decimal(buy.amount_paise) / 100:.2f}",
    )
    runs = [stage.courier.deliver(post) for _ in range(2)]
    return judged.result(
        "PayU success posted twice",
        runs,
        [
            judged.expect(judged.finals(*runs), ["processed", "duplicate"]),
            judged.one_order(stage, buy, pay),
        ],
    )


def _recorded_id(purchase: Purchase, payment_id: str) -> str:
    return purchase.reference


SIMULATOR = Simulator(
    provider=Provider.PAYU,
    new_payment_id=numeric_payment_id,
    recorded_id=_recorded_id,
    webhook_secrets=lambda keys: (keys.payu_key, keys.payu_salt),
    api_keys=lambda keys: (keys.payu_key, keys.payu_salt),
    routes=routes,
    entity=entity,
    payment_key="mihpayid",
    fault=fault,
    retry_schedule=(60.0, 300.0, 900.0, 3600.0),  # none published: a Razorpay-like one
    story=story,
    scenarios=(duplicates,),
    refund_words=parts.RefundWords(
        name="status", pending="queued", processed="success", failed="failure"
    ),
    payment_delivery=payment_delivery,
)

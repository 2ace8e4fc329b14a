"""PhonePe adapter: the SDK's own callbacks and header vector, credential rotation, event kinds,
derived delivery keys, and every event marked unconfirmed (the callback is not signed)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payhooks.events import Event, EventKind, Provider
from payhooks.gateways.phonepe import MAX_BODY_BYTES, PHONEPE, PhonePe, authorization
from payhooks.intake.expectations import RECONCILED
from payhooks.intake.ingest import receive
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

DATA = Path(__file__).resolve().parents[2] / "data" / "phonepe"
INDEX = {s["file"]: s for s in json.loads((DATA / "INDEX.json").read_bytes())["samples"]}
VECTORS = {v["id"]: v for v in json.loads((DATA / "auth_vectors.json").read_bytes())["vectors"]}
SDK = VECTORS["phonepe.v2.auth.sdk_test"]
SDK_HEADER = {"authorization": SDK["authorization"]}
CREDENTIAL = "username:password"

RESERVED = "reconcile:"


def sample(name: str) -> bytes:
    """An SDK sample, checked against the index so a re-saved file cannot pass silently."""
    body = (DATA / name).read_bytes()
    assert hashlib.sha256(body).hexdigest() == INDEX[name]["body_sha256"]
    return body


def adapter(*credentials: str) -> PhonePe:
    return PhonePe(credentials=credentials or (CREDENTIAL,))


def parse(body: bytes) -> Event:
    found = adapter()
    found.verify(body, SDK_HEADER)
    return found.parse(body, SDK_HEADER)


def order(event: str = "checkout.order.completed", **overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "merchantId": "M1",
        "merchantOrderId": "ph_0123456789abcdef",
        "orderId": "OMO2403282020198641071317",
        "state": "COMPLETED",
        "amount": 10000,
        "expireAt": 1724866793837,
        "paymentDetails": [attempt()],
    }
    payload.update(overrides)
    return {"event": event, "payload": payload}


def attempt(**overrides: Any) -> dict[str, Any]:
    found: dict[str, Any] = {
        "paymentMode": "UPI_INTENT",
        "transactionId": "OM2403282020198651071949",
        "timestamp": 1724866793837,
        "amount": 10000,
        "state": "COMPLETED",
        "rail": {"type": "UPI", "utr": "455069731511", "vpa": "12****78@ybl"},
    }
    found.update(overrides)
    return found


def refund(event: str = "pg.refund.completed", **overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "merchantId": "M1",
        "merchantRefundId": "rf_1",
        "originalMerchantOrderId": "ph_0123456789abcdef",
        "refundId": "OMR7878098045517540996",
        "amount": 5000,
        "state": "COMPLETED",
        "timestamp": 1730869961754,
        "paymentDetails": [attempt(transactionId="OMR7896789", amount=5000)],
    }
    payload.update(overrides)
    return {"event": event, "payload": payload}


def body(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


# --- the SDK's 19 callbacks -------------------------------------------------------------------

# file: (kind, delivery key, payment id, merchant ref, amount, refund id, refund amount, bank ref)
SDK_EXPECTED: dict[str, tuple[EventKind, str, Any, Any, Any, Any, Any, Any]] = {
    "01_test_validate_CHECKOUT_TRANSACTION_ATTEMPT_FAILED.json": (
        EventKind.OTHER,
        "checkout.transaction.attempt.failed:MO1af83fb6:PENDING:"
        "OM2403041556097829596189",
        "OM2403041556097829596189", "MO1af83fb6", 10001, None, None, None,
    ),
    **{
        f"{n:02d}_test_validate_PG_ORDER_COMPLETED_via_{via}.json": (
            EventKind.OTHER, "pg.order.completed:merchantOrderId:EXPIRED", "OM12333",
            "merchantOrderId", 10000, None, None, ref,
        )
        for n, via, ref in [
            (2, "debit_card", "bankTransactionId"), (3, "credit_line", None),
            (4, "credit_card", "bankTransactionId"), (5, "evg", None), (6, "wallet", None),
            (7, "ppi_evg", None), (8, "pg", None),
        ]
    },
    "09_test_validate_CHECKOUT_TRANSACTION_ATTEMPT_FAILED_2.json": (
        EventKind.OTHER,
        "checkout.transaction.attempt.failed:MOID01:PENDING:"
        "OM2403041625351229596788",
        "OM2403041625351229596788", "MOID01", 10001, None, None, None,
    ),
    "10_test_validate_PG_ORDER_FAILED.json": (
        EventKind.OTHER, "pg.order.completed:MO1af83fb6:PENDING",
        "OM2403041556097829596189", "MO1af83fb6", 10001, None, None, None,
    ),
    "11_test_validate_PG_ORDER_COMPLETED.json": (
        EventKind.PAYMENT_CAPTURED, "pg.order.completed:merchantOrderId:COMPLETED", "transactionId",
        "merchantOrderId", 123, None, None, "<utr>",
    ),
    "12_test_validate_PG_REFUND_ACCEPTED.json": (
        EventKind.OTHER, "pg.refund.accepted:originalMerchantOrderId:merchantRefundId:"
        "CONFIRMED", None,
        "originalMerchantOrderId", None, "merchantRefundId", 10, None,
    ),
    "13_test_validate_PG_REFUND_COMPLETED.json": (
        EventKind.REFUND_PROCESSED, "pg.refund.completed:originalMerchantOrderId:merchantRefundId:"
        "COMPLETED", None,
        "originalMerchantOrderId", None, "merchantRefundId", 123, "<utr>",
    ),
    "14_test_invalid_hash.json": (
        EventKind.OTHER,
        "checkout.transaction.attempt.failed:MOID01:PENDING:"
        "OM2403041625351229596788",
        "OM2403041625351229596788", "MOID01", 10001, None, None, None,
    ),
    "15_test_validate_PG_REFUND_COMPLETED_custom.json": (
        EventKind.REFUND_PROCESSED, "pg.refund.completed:originalMerchantOrderId:merchantRefundId:"
        "COMPLETED", None,
        "originalMerchantOrderId", None, "merchantRefundId", 123, "<utr>",
    ),
    "16_test_with_fee_amount.json": (
        EventKind.PAYMENT_CAPTURED, "pg.order.completed:OMPL2404181217419741571575:COMPLETED",
        "OM2404231554133859287908", "OMPL2404181217419741571575", 100, None, None,
        "411445977270",
    ),
    "17_test_validate_callback_subscription.json": (
        EventKind.OTHER,
        "subscription.cancelled:OMS2402242336054995042603:CANCELLED:1708798426196",
        None, None, None, None, None, None,
    ),
    "18_test_subscription_setup_success.json": (
        EventKind.OTHER,
        "subscription.setup.order.completed:MO1af83fb6:COMPLETED",
        "OM2403041556072639596105", "MO1af83fb6", 10001, None, None, "405554491450",
    ),
    "19_test_notify_validate.json": (
        EventKind.OTHER, "subscription.notification.completed:MO1708797962855:NOTIFIED", None,
        "MO1708797962855", 100, None, None, None,
    ),
}  # fmt: skip


def test_every_sdk_sample_has_an_expectation():
    assert set(SDK_EXPECTED) == set(INDEX)


@pytest.mark.parametrize("name", sorted(SDK_EXPECTED))
def test_an_sdk_callback_parses_to_its_event(name):
    event = parse(sample(name))
    found = (
        event.kind, event.event_id, event.payment_id, event.merchant_ref, event.amount_paise,
        event.refund_id, event.refund_amount_paise, event.bank_ref,
    )  # fmt: skip
    assert found == SDK_EXPECTED[name]
    assert event.provider is Provider.PHONEPE and event.unconfirmed
    assert event.event_type == INDEX[name]["event"]  # ``event``, never the deprecated ``type``
    assert event.currency == "INR"


@pytest.mark.parametrize("name", sorted(SDK_EXPECTED))
def test_an_sdk_callback_reads_the_amount_the_sdk_reads(name):
    event = parse(sample(name))
    read = event.refund_amount_paise if event.refund_id else event.amount_paise
    assert read == INDEX[name]["payload_amount"]


def test_the_sdk_samples_of_one_order_in_several_instruments_share_one_key():
    """Synthetic: seven bodies of one event of one order; a retry of one event is one key."""
    keys = {parse(sample(n)).event_id for n in SDK_EXPECTED if "_via_" in n}
    assert keys == {"pg.order.completed:merchantOrderId:EXPIRED"}


def test_the_sdks_swapped_call_is_refused():
    """``test_invalid_hash`` passes the body as the header: not a digest."""
    body_as_header = sample("14_test_invalid_hash.json").decode()
    with pytest.raises(SignatureMismatch, match="64 lowercase hex"):
        adapter().verify(b"", {"authorization": body_as_header})


# --- PhonePe's documentation samples -----------------------------------------------------------

DOCS = sorted(p.name for p in (DATA / "docs").glob("*.json") if p.name != "INDEX.json")


def test_every_saved_docs_sample_is_indexed():
    index = json.loads((DATA / "docs" / "INDEX.json").read_bytes())["samples"]
    assert set(DOCS) == {s["file"] for s in index if "file" in s}


@pytest.mark.parametrize("name", DOCS)
def test_a_docs_callback_is_read_as_its_event_and_state_say(name):
    raw = (DATA / "docs" / name).read_bytes()
    doc = json.loads(raw)
    event = parse(raw)
    state = doc["payload"].get("state")
    expected = {
        ("checkout.order.completed", "COMPLETED"): EventKind.PAYMENT_CAPTURED,
        ("pg.order.completed", "COMPLETED"): EventKind.PAYMENT_CAPTURED,
        ("checkout.order.failed", "FAILED"): EventKind.PAYMENT_FAILED,
        ("pg.order.failed", "FAILED"): EventKind.PAYMENT_FAILED,
        ("pg.order.failed", "EXPIRED"): EventKind.PAYMENT_FAILED,
        ("pg.refund.completed", "COMPLETED"): EventKind.REFUND_PROCESSED,
    }.get((doc["event"], state), EventKind.OTHER)
    assert event.kind is expected
    assert event.unconfirmed
    assert not event.event_id.startswith(RESERVED)


def test_a_docs_refund_names_the_merchants_refund_and_order():
    raw = (DATA / "docs" / "pg.refund.completed__website__standard-checkout__webhook__"
           "78204ec44dad.json").read_bytes()  # fmt: skip
    event = parse(raw)
    assert (event.refund_id, event.refund_amount_paise, event.merchant_ref, event.payment_id) == (
        "merchantRefundId", 50000, "Refund-12345", None,
    )  # fmt: skip


# --- the Authorization header ------------------------------------------------------------------


@pytest.mark.parametrize("vector", [v for v in VECTORS.values() if v["expect"] == "valid"],
                         ids=lambda v: v["id"])  # fmt: skip
def test_authorization_reproduces_each_vector(vector):
    credential = f"{vector['username']}:{vector['password']}"
    assert authorization(credential) == vector["authorization"]
    adapter(credential).verify(b"{}", {"authorization": vector["authorization"]})


def test_the_uppercase_digest_is_refused_as_the_sdk_refuses_it():
    upper = VECTORS["phonepe.v2.auth.uppercase_rejected"]["authorization"]
    with pytest.raises(SignatureMismatch, match="lowercase hex"):
        adapter().verify(b"{}", {"authorization": upper})


def test_the_docs_illustrative_header_is_refused():
    header = "ef4c914c591698b268db3c64163eafda7209a630f236ebf0eebf045460df723a"
    with pytest.raises(SignatureMismatch, match="no configured"):
        adapter("MERCHANT_USERNAME:MERCHANT_PASSWORD").verify(b"{}", {"authorization": header})


@pytest.mark.parametrize("headers", [{}, {"authorization": ""}, {"x-verify": SDK["authorization"]}])
def test_a_missing_header_is_refused(headers):
    with pytest.raises(SignatureMismatch, match="missing"):
        adapter().verify(b"{}", headers)


@pytest.mark.parametrize(
    "value",
    [
        "Basic " + SDK["authorization"],
        "SHA256 " + SDK["authorization"],
        " " + SDK["authorization"],
        SDK["authorization"] + "\n",
        SDK["authorization"][:-1],
        SDK["authorization"] + "0",
        "dXNlcm5hbWU6cGFzc3dvcmQ=",  # HTTP Basic of the same credentials
        "é" * 64,
    ],
)
def test_a_malformed_header_is_refused(value):
    with pytest.raises(SignatureMismatch, match="64 lowercase hex"):
        adapter().verify(b"{}", {"authorization": value})


def test_a_digest_of_other_credentials_is_refused():
    with pytest.raises(SignatureMismatch, match="matches no configured webhook credential"):
        adapter().verify(b"{}", {"authorization": authorization("username:Password")})


def test_the_header_name_is_matched_in_any_case():
    for name in ("Authorization", "AUTHORIZATION", "authorization"):
        adapter().verify(b"{}", {name: SDK["authorization"]})


def test_the_webhook_credentials_digest_is_never_kept_with_the_body():
    """The header is the credential itself (anyone holding it posts accepted callbacks): it is
    checked, never stored with the delivery, its backups or the console's headers page."""
    digest = authorization(CREDENTIAL)
    received = receive(adapter(CREDENTIAL), body(order()), {"authorization": digest})
    assert received.headers == {}


def test_the_body_plays_no_part_in_verification():
    adapter().verify(b"anything at all", SDK_HEADER)


def test_either_of_two_credentials_is_accepted_while_one_is_rotated_out():
    both = adapter("newuser:newpass123", "olduser:oldpass456")
    both.verify(b"{}", {"authorization": authorization("newuser:newpass123")})
    both.verify(b"{}", {"authorization": authorization("olduser:oldpass456")})
    with pytest.raises(SignatureMismatch):
        both.verify(b"{}", {"authorization": authorization("thirduser:pass789xyz")})


@pytest.mark.parametrize("credentials", [(), ("",), ("nocolon",), (":password1",), ("someuser:",)])
def test_a_credential_that_is_not_username_colon_password_is_refused(credentials):
    with pytest.raises(ValueError) as refused:
        PhonePe(credentials=credentials)
    assert all(c not in str(refused.value) for c in credentials if c)


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_verify_accepts_the_digest_of_any_configured_credential(username, password):
    credential = f"{username.replace(':', '')}x:{password}"
    adapter(credential).verify(b"", {"authorization": authorization(credential)})


@given(st.integers(0, 63), st.sampled_from("0123456789abcdef"))
def test_any_one_character_change_of_the_digest_is_refused(where, char):
    digest = SDK["authorization"]
    changed = digest[:where] + char + digest[where + 1 :]
    if changed == digest:
        return
    with pytest.raises(SignatureMismatch):
        adapter().verify(b"", {"authorization": changed})


# --- event kinds ---------------------------------------------------------------------------------


def test_a_completed_order_is_a_capture_by_its_completed_attempt():
    event = parse(body(order()))
    assert (event.kind, event.payment_id, event.merchant_ref, event.amount_paise) == (
        EventKind.PAYMENT_CAPTURED, "OM2403282020198651071949", "ph_0123456789abcdef", 10000,
    )  # fmt: skip
    assert event.bank_ref == "455069731511"


def test_a_completed_order_names_its_completed_attempt_not_a_later_failure():
    details = [attempt(transactionId="OMgood", timestamp=1),
               attempt(transactionId="OMlate", timestamp=9, state="FAILED")]  # fmt: skip
    assert parse(body(order(paymentDetails=details))).payment_id == "OMgood"


def test_a_failed_order_names_its_latest_attempt():
    details = [attempt(transactionId="OMlast", timestamp=9, state="FAILED"),
               attempt(transactionId="OMfirst", timestamp=1, state="FAILED")]  # fmt: skip
    event = parse(body(order("checkout.order.failed", state="FAILED", paymentDetails=details)))
    assert (event.kind, event.payment_id) == (EventKind.PAYMENT_FAILED, "OMlast")


def test_a_failed_order_with_no_attempt_names_no_payment():
    event = parse(body(order("pg.order.failed", state="FAILED", paymentDetails=[])))
    assert (event.kind, event.payment_id, event.merchant_ref) == (
        EventKind.PAYMENT_FAILED, None, "ph_0123456789abcdef",
    )  # fmt: skip


def test_an_expired_order_is_a_failure():
    assert parse(body(order("pg.order.failed", state="EXPIRED"))).kind is EventKind.PAYMENT_FAILED


@pytest.mark.parametrize(
    ("event", "state"),
    [
        ("checkout.order.completed", "PENDING"),
        ("checkout.order.completed", "FAILED"),
        ("checkout.order.failed", "COMPLETED"),
        ("checkout.transaction.attempt.failed", "PENDING"),
        ("pg.transaction.failed", "PENDING"),
        ("paylink.order.completed", "COMPLETED"),
        ("subscription.redemption.order.completed", "COMPLETED"),
        ("pg.refund.failed", "FAILED"),
        ("pg.refund.accepted", "PENDING"),
        ("checkout.order.completed", "SOMETHING_NEW"),
        ("checkout.order.someday", "COMPLETED"),
    ],
)
def test_what_is_not_a_final_order_state_of_checkout_is_other(event, state):
    assert parse(body(order(event, state=state))).kind is EventKind.OTHER


def test_a_completed_refund_is_processed_and_names_no_payment():
    event = parse(body(refund()))
    assert (event.kind, event.refund_id, event.refund_amount_paise, event.merchant_ref) == (
        EventKind.REFUND_PROCESSED, "rf_1", 5000, "ph_0123456789abcdef",
    )  # fmt: skip
    assert (event.payment_id, event.amount_paise) == (None, None)


def test_a_refund_without_the_merchants_id_is_known_by_phonepes():
    doc = refund()
    del doc["payload"]["merchantRefundId"]
    assert parse(body(doc)).refund_id == "OMR7878098045517540996"


def test_every_event_is_unconfirmed():
    for doc in (order(), order("checkout.order.failed", state="FAILED"), refund(),
                {"event": "downtime.upi.started", "payload": {}}):  # fmt: skip
        assert parse(body(doc)).unconfirmed


# --- unknown values are kept, odd fields of ignored events left out ----------------------------


def test_unknown_enum_values_are_kept_never_refused():
    details = [attempt(paymentMode="CREDIT_LINE", rail={"type": "NEW_RAIL"},
                       instrument={"type": "SOMETHING_NEW"})]  # fmt: skip
    doc = order(paymentDetails=details, paymentFlow={"type": "FUTURE_FLOW"})
    doc["type"] = "NOT_IN_THE_SDKS_ENUM"
    event = parse(body(doc))
    assert event.kind is EventKind.PAYMENT_CAPTURED
    assert event.event_type == "checkout.order.completed"


def test_an_unknown_event_is_kept_as_other():
    event = parse(body({"event": "settlement.new.kind", "payload": {"anything": [1, 2]}}))
    assert (event.kind, event.event_type) == (EventKind.OTHER, "settlement.new.kind")


def test_an_ignored_events_odd_fields_are_left_out():
    event = parse(body(order("pg.transaction.failed", state="PENDING", amount=12.5,
                             merchantOrderId=7)))  # fmt: skip
    assert (event.kind, event.amount_paise, event.merchant_ref) == (EventKind.OTHER, None, None)


# --- refusals ------------------------------------------------------------------------------------


def test_a_whole_amount_written_as_a_fraction_is_refused_for_how_it_is_written():
    """``12000.0`` is a whole number of paise: what is refused is that PhonePe writes its
    amounts as integers, said in the gateway's own notation, never as ``Decimal('12000.0')``."""
    with pytest.raises(MalformedPayload) as refused:
        parse(body(order(amount=12000.0)))
    assert refused.value.reason == "amount must be an integer number of paise, not 12000.0"


def test_valid_json_nested_too_deep_is_refused_as_nested_too_deep():
    deep = b'{"event": "checkout.order.completed", "payload": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(MalformedPayload) as refused:
        parse(deep)
    assert refused.value.reason == "body is nested too deep to read"


@pytest.mark.parametrize("amount", [100.0, 100.5, "100", True, -1, None])
def test_a_capture_without_whole_paise_is_malformed(amount):
    with pytest.raises(MalformedPayload, match="amount"):
        parse(body(order(amount=amount)))


@pytest.mark.parametrize("field", ["merchantOrderId"])
def test_a_capture_without_its_order_is_malformed(field):
    doc = order()
    del doc["payload"][field]
    with pytest.raises(MalformedPayload, match=field):
        parse(body(doc))


def test_a_capture_without_its_attempts_id_is_malformed():
    with pytest.raises(MalformedPayload, match="transactionId"):
        parse(body(order(paymentDetails=[attempt(transactionId=None)])))


def test_a_capture_whose_transaction_id_is_not_text_is_malformed():
    with pytest.raises(MalformedPayload, match="transactionId"):
        parse(body(order(paymentDetails=[attempt(transactionId=12345)])))


@pytest.mark.parametrize("field", ["merchantRefundId", "amount", "originalMerchantOrderId"])
def test_a_completed_refund_without_what_it_refunds_is_malformed(field):
    doc = refund()
    del doc["payload"][field]
    if field == "merchantRefundId":
        del doc["payload"]["refundId"]
    with pytest.raises(MalformedPayload, match=field):
        parse(body(doc))


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"[]", b'{"event": "x", "payload": {"amount": NaN}}', b"[" * 100_000],
)
def test_what_is_not_a_json_object_is_malformed(raw):
    with pytest.raises(MalformedPayload):
        parse(raw)


def test_a_body_with_only_the_deprecated_type_is_malformed():
    doc = order()
    doc["type"] = doc.pop("event")
    with pytest.raises(MalformedPayload, match="event"):
        parse(body(doc))


def test_the_body_is_bounded_below_the_signed_gateways():
    assert MAX_BODY_BYTES == adapter().max_body_bytes == 64 * 1024
    assert adapter().headers_read == ("authorization",)


# --- delivery keys ------------------------------------------------------------------------------


def test_a_key_is_the_same_for_every_copy_of_one_event():
    doc = order()
    exact = body(doc)
    spaced = json.dumps(doc, indent=4).encode()  # a retry need not be byte-identical
    reordered = json.dumps(dict(reversed(list(doc.items())))).encode()
    assert len({parse(raw).event_id for raw in (exact, exact, spaced, reordered)}) == 1


def test_an_orders_key_is_its_event_the_merchants_order_and_state():
    """The merchant's order id is what the order status API is asked about."""
    assert parse(body(order())).event_id == "checkout.order.completed:ph_0123456789abcdef:COMPLETED"


def test_keys_differ_between_events_of_one_order():
    docs = [
        order(),
        order("checkout.order.failed", state="FAILED"),
        order("checkout.transaction.attempt.failed", state="PENDING",
              paymentDetails=[attempt(transactionId="OM1", state="FAILED")]),
        order("checkout.transaction.attempt.failed", state="PENDING",
              paymentDetails=[attempt(transactionId="OM2", state="FAILED")]),
        refund(merchantRefundId="rf_1"),
        refund(merchantRefundId="rf_2"),
        refund("pg.refund.failed", merchantRefundId="rf_2", state="FAILED"),
    ]  # fmt: skip
    keys = [parse(body(doc)).event_id for doc in docs]
    assert len(set(keys)) == len(keys)


def test_keys_differ_between_orders():
    first = order(orderId="OMO1", merchantOrderId="ph_1")
    second = order(orderId="OMO2", merchantOrderId="ph_2")
    assert parse(body(first)).event_id != parse(body(second)).event_id


def test_an_order_without_phonepes_id_is_keyed_on_the_merchants():
    doc = order()
    del doc["payload"]["orderId"]
    assert parse(body(doc)).event_id == "checkout.order.completed:ph_0123456789abcdef:COMPLETED"


def test_an_event_with_nothing_to_key_on_is_keyed_on_its_body():
    raw = body({"event": "downtime.upi.started", "payload": {"state": "DOWN"}})
    assert parse(raw).event_id == "downtime.upi.started:" + hashlib.sha256(raw).hexdigest()


def test_no_key_takes_reconciliations_prefix():
    assert RESERVED == RECONCILED + ":"
    for doc in (order("reconcile", orderId="OM1", state="COMPLETED"),
                {"event": "reconcile", "payload": {}}):  # fmt: skip
        key = parse(body(doc)).event_id
        assert key.startswith("phonepe:reconcile:") and not key.startswith(RESERVED)


# --- the gateway's settings and the simulated side ---------------------------------------------


def test_the_gateway_builds_the_adapter_from_its_credentials_setting():
    assert [s.variable for s in PHONEPE.secrets] == ["PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS"]
    built = PHONEPE.adapter([("a_user:pass1234", "b_user:pass5678")])
    assert isinstance(built, PhonePe)
    assert built.credentials == ("a_user:pass1234", "b_user:pass5678")
    api = PHONEPE.status_api
    assert (api.id_variable, api.secret_variable, api.module) == (
        "PAYHOOKS_PHONEPE_CLIENT_ID", "PAYHOOKS_PHONEPE_CLIENT_SECRET",
        "payhooks.gateways.phonepe.status",
    )  # fmt: skip


def test_a_simulated_callback_verifies_and_parses():
    from payhooks.sim.gateway import Gateway
    from payhooks.sim.gateways import phonepe as sim
    from payhooks.sim.keys import GatewaySecrets

    gateway = Gateway(GatewaySecrets())
    sent = sim.delivery(gateway, "checkout.order.completed", merchant_order_id="ph_1",
                        amount_paise=12300, transaction_id="OM1")  # fmt: skip
    found = PhonePe(credentials=sim.SIMULATOR.webhook_secrets(GatewaySecrets()))
    found.verify(sent.body, sent.headers)
    event = found.parse(sent.body, sent.headers)
    assert (event.kind, event.payment_id, event.merchant_ref, event.amount_paise) == (
        EventKind.PAYMENT_CAPTURED, "OM1", "ph_1", 12300,
    )  # fmt: skip
    assert event.event_id == "checkout.order.completed:ph_1:COMPLETED"


# --- a key covers what its confirmation asks PhonePe about ------------------------------------


def test_a_callback_naming_another_merchant_order_under_a_real_order_id_takes_another_key():
    """The order status API is asked about ``merchantOrderId``: a forged callback naming the
    real ``orderId`` and another merchant order must not take the real callback's key."""
    real = parse(body(order()))
    forged = parse(body(order(merchantOrderId="ph_someone_else")))
    assert forged.merchant_ref == "ph_someone_else"
    assert forged.event_id != real.event_id


def test_a_refund_naming_another_order_under_a_real_refund_id_takes_another_key():
    """A refund's confirmation asks about its ``merchantRefundId`` and checks it refunds the
    ``originalMerchantOrderId`` named: both are in its key."""
    real = parse(body(refund()))
    forged = parse(body(refund(originalMerchantOrderId="ph_someone_else")))
    assert forged.refund_id == real.refund_id
    assert forged.event_id != real.event_id


def test_an_id_holding_a_colon_is_keyed_on_the_body():
    """``a:b`` + ``c`` and ``a`` + ``b:c`` would join to one key: such a callback is keyed on
    its body's hash instead, never on a key another order's callback derives."""
    raw = body(order(merchantOrderId="ph_1:COMPLETED"))
    assert parse(raw).event_id == "checkout.order.completed:" + hashlib.sha256(raw).hexdigest()

"""Juspay adapter: HTTP Basic with the dashboard's credentials, webhooks in the shape of
Juspay's samples, exact rupee amounts, and every event unconfirmed (the Order Status API
decides)."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from payhooks.events import EventKind, Provider
from payhooks.gateways.juspay import JUSPAY
from payhooks.gateways.juspay.adapter import Juspay, authorization
from payhooks.intake.ingest import header_map, receive
from payhooks.plumbing.errors import MalformedPayload, SignatureMismatch

DATA = Path(__file__).resolve().parents[2] / "data" / "juspay"
CREDENTIAL = "payhooks_shop:s3cret-pass"
C, F, P, A, R, OTHER = (
    EventKind.PAYMENT_CAPTURED,
    EventKind.PAYMENT_FAILED,
    EventKind.PAYMENT_PENDING,
    EventKind.PAYMENT_AUTHORIZED,
    EventKind.REFUND_PROCESSED,
    EventKind.OTHER,
)


def adapter(*credentials: str) -> Juspay:
    return Juspay(credentials=credentials or (CREDENTIAL,))


def signed(credential: str = CREDENTIAL) -> dict[str, str]:
    return {"content-type": "application/json", "authorization": authorization(credential)}


def basic(raw: bytes, scheme: str = "Basic") -> dict[str, str]:
    return {"authorization": f"{scheme} {base64.b64encode(raw).decode()}"}


def sample(name: str) -> bytes:
    return (DATA / "webhooks" / name).read_bytes()


def order(**overrides: Any) -> dict[str, Any]:
    found = {
        "id": "ordeh_11882769afb8a283d46a31a72de55976",
        "order_id": "ph_cart_42",
        "status": "CHARGED",
        "status_id": 21,
        "amount": 499,
        "effective_amount": 499,
        "currency": "INR",
        "txn_id": "shop-ph_cart_42-1",
        "txn_uuid": "mozJdM1bUpmPrsLJfAp",
        "payment_gateway_response": {"rrn": "415312345678", "epg_txn_id": "pay_X"},
    }
    found.update(overrides)
    return {k: v for k, v in found.items() if v is not ...}


def body_of(event_name: str = "ORDER_SUCCEEDED", content: Any = None, **envelope: Any) -> bytes:
    doc = {
        "id": "evt_V2_e46d1dd3640e4c00df7e6559c57ce509",
        "event_name": event_name,
        "date_created": "2024-11-18T10:28:29Z",
        "content": {"order": order()} if content is None else content,
        **envelope,
    }
    return json.dumps(doc).encode()


def parsed(body: bytes):
    return adapter().parse(body, signed())


# --- bodies in the shape of Juspay's samples (tests/data/juspay/README.md) ---------------------

# file: (kind, event id, payment id, order id, amount, paid, refund id, refund amount, bank ref)
SAMPLES: dict[str, tuple[Any, ...]] = {
    "order_succeeded.json": (C, "evt_V2_e46d1dd3640e4c00df7e6559c57ce509:"
        "tea_ord_7101",
                             "teashop-tea_ord_7101-1", "tea_ord_7101", 300, 300, None, None,
                             "k3vq8m"),
    "order_succeeded_mandate.json": (C, "evt_er4haz4fy38c9hjj:"
        "418807361925540172663019",
                                     "upistore-418807361925540172663019-1",
                                     "418807361925540172663019", 200, None, None, None,
                                     "6183075"),
    "order_failed.json": (F, "evt_V2_cc8658a62f26cbc869aca6cd481523bc:"
        "tea_ord_7144", "teashop-tea_ord_7144-1",
                          "tea_ord_7144", 1200, 1200, None, None, None),
    "txn_created.json": (P, "evt_V2_ff5a1df2974f83651ba8455eeb990ad1:"
        "tea_ord_7101", "teashop-tea_ord_7101-1",
                         "tea_ord_7101", 300, 300, None, None, None),
    "txn_charged.json": (C, "evt_V2_2baaad12957ca2545dffb04292768705:"
        "tea_ord_7101", "teashop-tea_ord_7101-1",
                         "tea_ord_7101", 300, 300, None, None, "k3vq8m"),
    "txn_failed.json": (F, "evt_V2_e4c8a7e6dc4ac9bc0d9c58b4b4bf7903:"
        "tea_ord_7144", "teashop-tea_ord_7144-1",
                        "tea_ord_7144", 1200, 1200, None, None, None),
    "order_refunded.json": (R, "evt_V2_1ad284168a5bd6952fe8f0c2c11777ae:"
        "tea_ord_7129:erf_ea3803ac1023b867", "teashop-tea_ord_7129-1",
                            "tea_ord_7129", 1500, 1500, "erf_ea3803ac1023b867", 600, None),
    # Kept, never acted on: refunds not (yet) successful, Juspay's own auto-refunds, mandates.
    "order_refund_failed.json": (OTHER, "evt_V2_fde217d5dd44b274669227cf9c2b0023",
                                 "teashop-teaorder8817-1", "teaorder8817", 6400, 6400, None,
                                 None, "202431904478215"),
    "refund_initiate.json": (OTHER, "evt_V2_d1b13dd989c9c6fb136acefa85e67452",
                             "teashop-tea_ord_7129-1", "tea_ord_7129", 1500, 1500, None, None,
                             "p2wd7h"),
    "refund_manual_review.json": (OTHER, "evt_V2_19d2abf3961756ce5f174462449992bd",
                                  "railbook-rbkt219304457-1", "rbkt219304457", 218400, 218400,
                                  None, None, "431208875160"),
    "auto_refund_failed.json": (OTHER, "evt_V2_fde217d5dd44b274669227cf9c2b0023",
                                "teashop-teaorder8790-1", "teaorder8790", 145000, 145000, None,
                                None, "202431904478215"),
    "auto_refund_succeeded.json": (OTHER, "evt_V2_86258b41804641618ccfaab1f31c40aa",
                                   "teashop-tea_ord_7133-1", "tea_ord_7133", 900, 900, None, None,
                                   "274519"),
    "surcharge_auto_refund_succeeded.json": (OTHER, "evt_V2_c32d4e4ac513204e3bb34b902e82",
                                             "kettleco-KETTLE0052004-1", "KETTLE0052004", 120000,
                                             122832, None, None, "43270518836290415"),
    **{
        f"{name}.json": (OTHER, ident, None, None, None, None, None, None, None)
        for name, ident in {
            "mandate_created": "evt_V2_662177ecdb5da7c76e46b24fbe77c2e5",
            "mandate_activated": "evt_V2_05bcd1078d7bf299915295cd70b800b5",
            "mandate_failed": "evt_V2_eb82564fc04701de9b66b2a92b616628",
            "mandate_paused": "evt_V2_75e060edb7728eb1ade097c7e92333e1",
            "mandate_expired": "evt_V2_75e060edb7728eb1ade097c7e92333e1",
            "mandate_revoked": "evt_V2_c869e93f37e91ee7a42443020382866f",
            "notification_succeeded": "evt_V2_fde217d5dd44b274669227cf9c2b0023",
            "notification_failed": "evt_V2_9e4710cf96f425579588ea6627961046",
        }.items()
    },
}  # fmt: skip
NOT_JSON = ("response_structure.json", "sample_response_structure.json")


def test_every_sample_file_is_covered():
    files = {path.name for path in (DATA / "webhooks").glob("*.json")}
    assert files == set(SAMPLES) | set(NOT_JSON)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_webhook_of_juspays_sample_shapes_reads_as_the_event_it_describes(name):
    body = sample(name)
    adapter().verify(body, signed())
    event = parsed(body)
    found = (
        event.kind, event.event_id, event.payment_id, event.merchant_ref, event.amount_paise,
        event.payment_amount_paise, event.refund_id, event.refund_amount_paise, event.bank_ref,
    )  # fmt: skip
    assert found == SAMPLES[name]
    assert event.provider is Provider.JUSPAY
    assert event.event_type == json.loads(body)["event_name"]
    assert event.payload_sha256 == hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_event_is_unconfirmed_whatever_it_says(name):
    assert parsed(sample(name)).unconfirmed is True


@pytest.mark.parametrize("name", NOT_JSON)
def test_the_samples_holding_a_comment_in_place_of_the_order_are_malformed(name):
    with pytest.raises(MalformedPayload, match="not valid JSON"):
        parsed(sample(name))


# --- HTTP Basic --------------------------------------------------------------------------------


def test_the_configured_credentials_are_accepted():
    adapter().verify(body_of(), signed())


@pytest.mark.parametrize("scheme", ["Basic", "basic", "BASIC", "bAsIc"])
def test_the_scheme_is_read_in_any_case(scheme):
    adapter().verify(b"{}", basic(CREDENTIAL.encode(), scheme))


def test_the_header_name_is_read_in_any_case_when_a_merchant_calls_verify_directly():
    adapter().verify(b"{}", {"Authorization": authorization(CREDENTIAL)})


def test_a_password_holding_colons_is_split_at_the_first_colon_only():
    credential = "shop:pa:ss:word"
    adapter(credential).verify(b"{}", signed(credential))
    with pytest.raises(SignatureMismatch):
        adapter(credential).verify(b"{}", signed("shop:pa"))
    with pytest.raises(SignatureMismatch):
        adapter(credential).verify(b"{}", signed("shop:pa:ss:wor"))


def test_a_non_ascii_password_is_compared_as_utf8():
    credential = "shop:pässwörd-ключ-密码"
    adapter(credential).verify(b"{}", signed(credential))
    latin1 = "Basic " + base64.b64encode(credential.encode("latin-1", "replace")).decode()
    with pytest.raises(SignatureMismatch):
        adapter(credential).verify(b"{}", {"authorization": latin1})


def test_during_rotation_the_old_and_the_new_credentials_are_both_accepted():
    rotating = adapter("shop:new-password", "shop:old-password")
    rotating.verify(b"{}", signed("shop:new-password"))
    rotating.verify(b"{}", signed("shop:old-password"))
    with pytest.raises(SignatureMismatch, match="match no configured credential"):
        rotating.verify(b"{}", signed("shop:older-password"))


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "header missing"),
        ({"authorization": "   "}, "header missing"),
        ({"authorization": "Bearer " + authorization(CREDENTIAL)[6:]}, "not Basic"),
        ({"authorization": "Basic"}, "credentials missing"),
        ({"authorization": "Basic ###"}, "not base64"),
        ({"authorization": "Basic cGF5aG9va3M6cGFzcw"}, "not base64"),  # padding left out
        ({"authorization": "Basic cGF5aG9va3M6cGFzcx=="}, "not canonical"),  # stray low bits
        ({"authorization": "Basic cGF5aG9va3M6 cGFzcw=="}, "not base64"),
        ({"authorization": "Basic cGF5aG9va3M6cGFzcw==é"}, "not base64"),
        (basic(b"shop:\xff\xfe"), "not UTF-8"),
        (basic(b"payhooks_shop"), "no ':'"),
        (basic(b"payhooks_shop:wrong"), "match no configured credential"),
        (basic(b"other_shop:s3cret-pass"), "match no configured credential"),
        (basic(b"payhooks_shop:s3cret-pas"), "match no configured credential"),
        (basic(b"payhooks_shop:s3cret-pass "), "match no configured credential"),
        (basic(b":payhooks_shop:s3cret-pass"), "match no configured credential"),
    ],
)
def test_anything_but_the_configured_credentials_is_refused_saying_why(headers, reason):
    with pytest.raises(SignatureMismatch, match=reason) as refused:
        adapter().verify(body_of(), headers)
    assert refused.value.provider is Provider.JUSPAY
    assert "s3cret" not in str(refused.value)


@given(
    username=st.text(min_size=1).filter(lambda u: ":" not in u),
    password=st.text(min_size=1),
    wrong=st.text(min_size=1),
)
def test_verify_accepts_exactly_the_credential_it_holds(username, password, wrong):
    credential = f"{username}:{password}"
    adapter(credential).verify(b"{}", signed(credential))
    if wrong != password:
        with pytest.raises(SignatureMismatch):
            adapter(credential).verify(b"{}", signed(f"{username}:{wrong}"))


@pytest.mark.parametrize("credentials", [(), ("",), ("Zq9user",), ("Zq9user:",), (":Zq9pw",)])
def test_a_credential_that_is_not_username_colon_password_is_refused_at_start(credentials):
    with pytest.raises(ValueError, match="Juspay") as refused:
        Juspay(credentials=credentials)
    assert "Zq9" not in str(refused.value)


def test_the_webhook_password_is_never_kept_with_the_body():
    received = receive(adapter(), body_of(), signed())
    assert received.headers == {}


def test_the_authorization_header_sent_twice_is_refused_by_name_or_passes_when_identical():
    """Read, so checked for repeats like every header an adapter reads (docs/security.md)."""
    name, value = "Authorization", signed()["authorization"]
    assert header_map([(name, value), (name, value)], adapter()) == {"authorization": value}
    with pytest.raises(SignatureMismatch, match="authorization is sent more than once"):
        header_map([(name, value), (name, signed("Zq9user:other")["authorization"])], adapter())


def test_the_body_is_bounded_before_anything_is_read():
    assert adapter().max_body_bytes == 1024 * 1024


# --- what an event says ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        ("CHARGED", C),
        ("AUTHORIZED", A),
        ("AUTHORIZATION_FAILED", F),
        ("AUTHENTICATION_FAILED", F),
        ("JUSPAY_DECLINED", F),
        ("PENDING_VBV", P),
        ("AUTHORIZING", P),
        ("NEW", OTHER),
        ("STARTED", OTHER),
        ("COD_INITIATED", OTHER),
        ("SOMETHING_JUSPAY_ADDS", OTHER),
    ],
)
def test_the_orders_status_decides_the_kind(status, kind):
    assert parsed(body_of(content={"order": order(status=status)})).kind is kind


def test_an_order_event_without_a_status_is_malformed():
    with pytest.raises(MalformedPayload, match="status"):
        parsed(body_of(content={"order": order(status=...)}))


def test_a_transaction_event_reads_the_transaction_not_an_order():
    txn = {"order_id": "ph_cart_42", "txn_id": "shop-ph_cart_42-2", "status": "CHARGED",
           "txn_amount": 514, "net_amount": 499, "currency": "INR"}  # fmt: skip
    event = parsed(body_of("TXN_CHARGED", {"txn": txn}))
    assert (event.kind, event.payment_id) == (C, "shop-ph_cart_42-2")
    assert event.merchant_ref == "ph_cart_42"
    assert (event.amount_paise, event.payment_amount_paise) == (49900, 51400)


def test_the_attempts_uuid_is_its_id_when_juspay_sends_no_txn_id():
    event = parsed(body_of(content={"order": order(txn_id=...)}))
    assert event.payment_id == "mozJdM1bUpmPrsLJfAp"


@pytest.mark.parametrize("missing", ["order_id", "amount"])
def test_a_capture_without_what_it_acts_on_is_malformed(missing):
    with pytest.raises(MalformedPayload, match=f"{missing} is missing"):
        parsed(body_of(content={"order": order(**{missing: ...})}))


def test_a_capture_without_any_attempt_id_is_malformed():
    with pytest.raises(MalformedPayload, match="txn_id is missing"):
        parsed(body_of(content={"order": order(txn_id=..., txn_uuid=...)}))


@pytest.mark.parametrize(
    ("amount", "paise"),
    [
        (1, 100),
        (665.34, 66534),  # written as JSON's 665.34, read as Decimal
        ("1551", 155100),
        ("665.34", 66534),
        ("0.10", 10),
        (0, 0),
    ],
)
def test_amounts_in_rupees_are_exact_as_numbers_and_as_numeric_strings(amount, paise):
    event = parsed(body_of(content={"order": order(amount=amount)}))
    assert event.amount_paise == paise


def test_a_decimal_amount_is_never_read_through_float():
    body = body_of(content={"order": order(amount="@")}).replace(b'"@"', b"1234567890123.45")
    assert parsed(body).amount_paise == 123456789012345


@pytest.mark.parametrize(
    "amount", [1.005, "1.005", "12abc", " 1", "1e2", "-5", -5, "NaN", True, [1], {"v": 1}]
)
def test_an_amount_that_is_not_exact_rupees_is_malformed_in_an_event_acted_on(amount):
    with pytest.raises(MalformedPayload, match="amount"):
        parsed(body_of(content={"order": order(amount=amount)}))


def test_an_odd_amount_in_an_event_nothing_acts_on_is_left_out():
    event = parsed(body_of("REFUND_INITIATED", {"order": order(amount="12abc")}))
    assert (event.kind, event.amount_paise, event.merchant_ref) == (OTHER, None, "ph_cart_42")


def test_an_odd_effective_amount_never_costs_the_payment():
    event = parsed(body_of(content={"order": order(effective_amount="n/a")}))
    assert (event.kind, event.amount_paise, event.payment_amount_paise) == (C, 49900, None)


def test_a_surcharge_keeps_the_order_amount_compared_and_what_was_paid_beside_it():
    event = parsed(body_of(content={"order": order(amount=650, effective_amount=665.34)}))
    assert (event.amount_paise, event.payment_amount_paise) == (65000, 66534)


def refund(ident: str, status: str, created: str, amount: Any = 100, **more: Any) -> dict[str, Any]:
    return {"id": None, "unique_request_id": ident, "status": status, "created": created,
            "amount": amount, **more}  # fmt: skip


def test_order_refunded_is_about_its_newest_successful_refund():
    refunds = [
        refund("rf_2", "SUCCESS", "2026-03-04T10:00:00Z", 200, arn="74332745123456789012345"),
        refund("rf_1", "SUCCESS", "2026-03-04T09:00:00Z", 100),
        refund("rf_3", "PENDING", "2026-03-04T11:00:00Z", 300),
        refund("rf_4", "FAILURE", "2026-03-04T12:00:00Z", 400),
    ]
    event = parsed(body_of("ORDER_REFUNDED", {"order": order(refunds=refunds)}))
    assert (event.kind, event.refund_id, event.refund_amount_paise) == (R, "rf_2", 20000)
    assert (event.payment_id, event.merchant_ref) == ("shop-ph_cart_42-1", "ph_cart_42")
    assert event.bank_ref == "74332745123456789012345"  # the ARN, not the payment's RRN


def test_a_refund_with_no_request_id_is_known_by_juspays_id():
    refunds = [{"id": "JP_RF_1", "status": "SUCCESS", "amount": "75", "created": "x"}]
    event = parsed(body_of("ORDER_REFUNDED", {"order": order(refunds=refunds)}))
    assert (event.refund_id, event.refund_amount_paise) == ("JP_RF_1", 7500)


def test_order_refunded_with_no_successful_refund_changes_nothing():
    refunds = [refund("rf_1", "PENDING", "2026-03-04T09:00:00Z")]
    event = parsed(body_of("ORDER_REFUNDED", {"order": order(refunds=refunds)}))
    assert (event.kind, event.refund_id) == (OTHER, None)


def test_a_successful_refund_without_an_amount_is_malformed():
    refunds = [refund("rf_1", "SUCCESS", "2026-03-04T09:00:00Z", None)]
    with pytest.raises(MalformedPayload, match="refund amount is missing"):
        parsed(body_of("ORDER_REFUNDED", {"order": order(refunds=refunds)}))


@pytest.mark.parametrize(
    "content",
    [
        {"order": order()},
        {"txn": {"order_id": "ph_cart_42", "status": "CHARGED", "txn_id": "t"}},
        {"chargeback": {"id": "cb_1"}},
        {},
        None,
        "text",
    ],
)
def test_an_event_name_juspay_adds_later_is_kept_as_other_never_refused(content):
    doc = {"id": "evt_V2_0123", "event_name": "CHARGEBACK_RECEIVED", "content": content}
    event = parsed(json.dumps(doc).encode())
    assert (event.kind, event.event_type, event.unconfirmed) == (OTHER, "CHARGEBACK_RECEIVED", True)


def test_an_unknown_event_keeps_the_order_it_names_for_search():
    event = parsed(body_of("ORDER_CREATED", {"order": order(status="NEW")}))
    assert (event.kind, event.merchant_ref) == (OTHER, "ph_cart_42")
    assert event.payment_id == "shop-ph_cart_42-1"


def test_the_envelope_id_and_order_are_the_delivery_key_whatever_the_headers_say():
    headers = {**signed(), "x-idempotency-key": "another", "x-event-id": "another"}
    event = adapter().parse(body_of(), headers)
    assert event.event_id == f"evt_V2_e46d1dd3640e4c00df7e6559c57ce509:{event.merchant_ref}"


@pytest.mark.parametrize(
    ("ident", "reason"),
    [
        (..., "id is missing"),
        ("", "id is missing"),
        (12345, "not a string"),
        ("evt:V2", "short id"),
        ("reconcile:pay_1:CHARGED", "short id"),
        ("evt V2", "short id"),
        ("evt_\u00e9", "short id"),
        ("evt_\n", "short id"),
        ("e" * 129, "short id"),
    ],
)
def test_an_envelope_id_that_is_not_a_short_printable_id_is_malformed(ident, reason):
    doc = json.loads(body_of())
    doc["id"] = ident
    if ident is ...:
        del doc["id"]
    with pytest.raises(MalformedPayload, match=reason):
        parsed(json.dumps(doc).encode())


def test_an_event_without_a_name_is_malformed():
    with pytest.raises(MalformedPayload, match="event_name"):
        parsed(json.dumps({"id": "evt_1", "content": {}}).encode())


@pytest.mark.parametrize(
    ("response", "bank_ref"),
    [
        ({"rrn": "415312345678", "epg_txn_id": "pay_X", "auth_id_code": "123"}, "415312345678"),
        ({"rrn": "NA", "epg_txn_id": "pay_X", "auth_id_code": "123"}, "pay_X"),
        ({"rrn": None, "epg_txn_id": "NA", "auth_id_code": "T51207"}, "T51207"),
        ({"rrn": "NA", "epg_txn_id": "NA", "auth_id_code": "NA"}, None),
        ({"rrn": 43888933}, "43888933"),
        ("FILTERED", None),
    ],
)
def test_the_bank_reference_is_the_rrn_else_the_gateways_id_else_the_auth_code(response, bank_ref):
    event = parsed(body_of(content={"order": order(payment_gateway_response=response)}))
    assert event.bank_ref == bank_ref


# --- the gateway's settings --------------------------------------------------------------------


def test_the_settings_name_the_webhook_credentials_and_the_order_status_api():
    assert [s.variable for s in JUSPAY.secrets] == ["PAYHOOKS_JUSPAY_WEBHOOK_CREDENTIALS"]
    assert [s.django_key for s in JUSPAY.secrets] == ["JUSPAY_WEBHOOK_CREDENTIALS"]
    api = JUSPAY.status_api
    assert (api.id_variable, api.secret_variable, api.url_variable, api.url, api.module) == (
        "PAYHOOKS_JUSPAY_MERCHANT_ID",
        "PAYHOOKS_JUSPAY_API_KEY",
        "PAYHOOKS_JUSPAY_API_URL",
        "https://api.juspay.in",
        "payhooks.gateways.juspay.status",
    )


def test_the_settings_build_an_adapter_holding_every_credential():
    built = JUSPAY.adapter([("shop:new", "shop:old")])
    assert isinstance(built, Juspay) and built.credentials == ("shop:new", "shop:old")
    assert JUSPAY.adapter([()]) is None


def test_a_minted_reference_fits_juspays_order_id():
    from payhooks.service.shop.ids import new_id

    minted = new_id(JUSPAY.reference_prefix)
    assert len(minted) < 21 and minted.replace("_", "").isalnum()


# --- a key covers what its confirmation asks Juspay about -------------------------------------


def test_a_callback_naming_another_order_under_a_real_event_id_takes_another_key():
    """The Order Status API is asked about the ``order_id`` named: a forged callback reusing
    a real event's ``id`` for another order must not take the real callback's key."""
    real = parsed(body_of())
    forged = parsed(body_of(content={"order": order(order_id="someone_elses_order")}))
    assert forged.merchant_ref == "someone_elses_order"
    assert forged.event_id != real.event_id


def test_a_refund_naming_another_refund_under_a_real_event_id_takes_another_key():
    real = parsed(sample("order_refunded.json"))
    doc = json.loads(sample("order_refunded.json"))
    for entry in doc["content"]["order"]["refunds"]:
        if entry.get("unique_request_id"):
            entry["unique_request_id"] = "forged_" + entry["unique_request_id"]
    forged = parsed(json.dumps(doc).encode())
    assert forged.refund_id != real.refund_id
    assert forged.event_id != real.event_id


def test_an_event_named_reconcile_never_takes_a_key_payhooks_mints():
    event = parsed(body_of(id="reconcile"))
    assert event.event_id == f"juspay:reconcile:{event.merchant_ref}"

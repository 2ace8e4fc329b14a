"""Juspay adapter: HTTP Basic with the dashboard's credentials, Juspay's own sample webhooks,
exact rupee amounts, and every event unconfirmed (the Order Status API decides)."""

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
from payhooks.intake.ingest import receive
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
        "id": "ordeh_a9eb2884e4fe4738b70c3d51e6397d34",
        "order_id": "ph_cart_42",
        "status": "CHARGED",
        "status_id": 21,
        "amount": 499,
        "effective_amount": 499,
        "currency": "INR",
        "txn_id": "shop-ph_cart_42-1",
        "txn_uuid": "moziqFZtYKQkTsRFGXX",
        "payment_gateway_response": {"rrn": "415312345678", "epg_txn_id": "pay_X"},
    }
    found.update(overrides)
    return {k: v for k, v in found.items() if v is not ...}


def body_of(event_name: str = "ORDER_SUCCEEDED", content: Any = None, **envelope: Any) -> bytes:
    doc = {
        "id": "evt_V2_b737837102414514ae0e9717a9f2664d",
        "event_name": event_name,
        "date_created": "2023-08-10T07:00:48Z",
        "content": {"order": order()} if content is None else content,
        **envelope,
    }
    return json.dumps(doc).encode()


def parsed(body: bytes):
    return adapter().parse(body, signed())


# --- Juspay's own samples --------------------------------------------------------------------

# file: (kind, event id, payment id, order id, amount, paid, refund id, refund amount, bank ref)
SAMPLES: dict[str, tuple[Any, ...]] = {
    "order_succeeded.json": (C, "evt_V2_b737837102414514ae0e9717a9f2664d:"
        "sample_ord_200",
                             "ms-sample_ord_200-1", "sample_ord_200", 100, 100, None, None,
                             "ybbjy9"),
    "order_succeeded_mandate.json": (C, "evt_gsu1c0r7umcfrxeb:"
        "234823498237423894273498",
                                     "juspay-234823498237423894273498-1",
                                     "234823498237423894273498", 100, None, None, None,
                                     "4299662"),
    "order_failed.json": (F, "evt_V2_f139d51b776541bdbccf6cf49234bc8c:"
        "sample_ord_502", "ms-sample_ord_502-1",
                          "sample_ord_502", 800, 800, None, None, None),
    "txn_created.json": (P, "evt_V2_324dc6e110914184a1c764923e14ccde:"
        "sample_ord_200", "ms-sample_ord_200-1",
                         "sample_ord_200", 100, 100, None, None, None),
    "txn_charged.json": (C, "evt_V2_714bdcbb817d4fa2b0f64bb9609557d4:"
        "sample_ord_200", "ms-sample_ord_200-1",
                         "sample_ord_200", 100, 100, None, None, "ybbjy9"),
    "txn_failed.json": (F, "evt_V2_a0d045a5a93e4f29a72a937ebb0b154b:"
        "sample_ord_502", "ms-sample_ord_502-1",
                        "sample_ord_502", 800, 800, None, None, None),
    "order_refunded.json": (R, "evt_V2_132b474fe46b4518a561ad1aa18b4e42:"
        "sample_ord_403:erf_b0c764a743c4221b", "ms-sample_ord_403-1",
                            "sample_ord_403", 800, 800, "erf_b0c764a743c4221b", 500, None),
    # Kept, never acted on: refunds not (yet) successful, Juspay's own auto-refunds, mandates.
    "order_refund_failed.json": (OTHER, "evt_V2_9380da4b07e74b6792f3fe23ed84a75f",
                                 "ms-sampleorder608-1", "sampleorder608", 8600, 8600, None,
                                 None, "202238567896952"),
    "refund_initiate.json": (OTHER, "evt_V2_6d18def52abc4810aaef89a91064b045",
                             "ms-sample_ord_403-1", "sample_ord_403", 800, 800, None, None,
                             "ef9cyl"),
    "refund_manual_review.json": (OTHER, "evt_V2_1750c1958ed71230991e6740c18af364",
                                  "confirm-ctkt174582939-1", "ctkt174582939", 155100, 155100,
                                  None, None, "207506348187"),
    "auto_refund_failed.json": (OTHER, "evt_V2_9380da4b07e74b6792f3fe23ed84a75f",
                                "ms-sampleorder507-1", "sampleorder507", 100000, 100000, None,
                                None, "202238567896952"),
    "auto_refund_succeeded.json": (OTHER, "evt_V2_c911db219e6845ce9c6b551b9e88cbc4",
                                   "ms-sample_ord_408-1", "sample_ord_408", 800, 800, None, None,
                                   "106027"),
    "surcharge_auto_refund_succeeded.json": (OTHER, "evt_V2_773f8b7e42754f898b8e34873aa5",
                                             "merchant-JUSPLP0037001-1", "JUSPLP0037001", 65000,
                                             66534, None, None, "41091612076857776"),
    **{
        f"{name}.json": (OTHER, ident, None, None, None, None, None, None, None)
        for name, ident in {
            "mandate_created": "evt_V2_14596cec6cd34c6380212cc3115030cb",
            "mandate_activated": "evt_V2_7c242ac8f082499f8398ab56ce603187",
            "mandate_failed": "evt_V2_5692cc60687042cc8a7efac8373894f7",
            "mandate_paused": "evt_V2_98b67d9bfe334c84a7d4971d932b9465",
            "mandate_expired": "evt_V2_98b67d9bfe334c84a7d4971d932b9465",
            "mandate_revoked": "evt_V2_2fa69b2aab7147a78363517fdaf57d01",
            "notification_succeeded": "evt_V2_9380da4b07e74b6792f3fe23ed84a75f",
            "notification_failed": "evt_V2_93ca6871b7fc4efcafe24ede6e25ecb7",
        }.items()
    },
}  # fmt: skip
NOT_JSON = ("response_structure.json", "sample_response_structure.json")


def test_every_sample_file_is_covered():
    files = {path.name for path in (DATA / "webhooks").glob("*.json")}
    assert files == set(SAMPLES) | set(NOT_JSON)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_of_juspays_sample_webhooks_reads_as_the_event_it_describes(name):
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
    assert adapter().headers_read == ()


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
    assert event.payment_id == "moziqFZtYKQkTsRFGXX"


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
    assert event.event_id == f"evt_V2_b737837102414514ae0e9717a9f2664d:{event.merchant_ref}"


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
        ({"rrn": None, "epg_txn_id": "NA", "auth_id_code": "T34689"}, "T34689"),
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

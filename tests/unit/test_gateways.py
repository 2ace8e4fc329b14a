"""The gateway registry: every gateway payhooks names is found through it, its settings name no
other gateway's, and a gateway it lacks is refused, never read as another one."""

from __future__ import annotations

import importlib

import pytest

from payhooks.events import EventKind, Provider
from payhooks.gateways import GATEWAYS, UnknownGateway, gateway
from payhooks.gateways._status import listed
from payhooks.plumbing.errors import MalformedPayload
from tests.factories import KEYS, SETTINGS


def test_every_provider_has_a_registry_line():
    assert set(GATEWAYS) == set(Provider)
    assert all(GATEWAYS[provider].provider is provider for provider in Provider)


def test_no_two_gateways_share_a_setting_name():
    names = [
        name
        for found in GATEWAYS.values()
        for name in (
            *(secret.variable for secret in found.secrets),
            *(secret.django_key for secret in found.secrets),
            found.status_api.id_variable,
            found.status_api.secret_variable,
            found.status_api.url_variable,
        )
    ]
    assert len(names) == len(set(names))


def test_every_gateway_names_a_status_module_with_a_client_and_a_stored_reader():
    for found in GATEWAYS.values():
        module = importlib.import_module(found.status_api.module)
        assert callable(module.client) and callable(module.stored)


def test_no_adapters_repr_shows_its_secrets():
    """An adapter is a variable of the frames a delivery's error passes through: Django's
    DEBUG page and its HTML error email print it, as debuggers and error trackers do."""
    secrets = [
        KEYS.env()[secret.variable]
        for found in GATEWAYS.values()
        for secret in found.secrets
        if secret.several  # PayU's merchant key is no secret: its checkout form carries it
    ]
    shown = repr(SETTINGS.adapters())
    assert len(secrets) == len(GATEWAYS) and [s for s in secrets if s in shown] == []


def _having(rule: str) -> set[Provider]:
    return {provider for provider, found in GATEWAYS.items() if getattr(found, rule)}


def test_only_payus_order_is_final_once_captured():
    from payhooks.reconcile.checkouts import FINAL_WHEN_CAPTURED

    assert _having("final_when_captured") == {Provider.PAYU}
    assert {"payu"} == FINAL_WHEN_CAPTURED


def test_only_cashfrees_refunds_name_their_order():
    assert _having("refund_needs_order") == {Provider.CASHFREE}


def test_only_razorpays_authorisations_are_captured_by_payhooks():
    assert _having("captures_authorized") == {Provider.RAZORPAY}


def test_payus_refuted_callbacks_get_their_own_advice_with_no_credential_to_rotate():
    from payhooks.operations.alarms import _refuted_text

    assert _having("refuted_advice") == {Provider.PAYU}
    assert "No credential to rotate" in _refuted_text("payu", 2)
    assert "set a new one" in _refuted_text("razorpay", 2)


def test_an_unknown_gateway_is_refused():
    with pytest.raises(UnknownGateway):
        gateway("stripe")  # type: ignore[arg-type]


def test_a_gateway_with_only_some_of_its_settings_is_incomplete():
    payu = gateway(Provider.PAYU)
    assert payu.incomplete([("key",), ()]) == payu.secrets
    assert payu.incomplete([("key",), ("salt",)]) is None
    assert payu.adapter([(), ()]) is None


def _listed(entities, order_id="o1"):
    def identify(entity, asked):
        if not isinstance(entity.get("status"), str):
            raise MalformedPayload(Provider.RAZORPAY, "status is not a string")
        return entity["status"], entity["id"], entity.get("order", asked)

    def deliver(entity, asked, kind, status, payment_id):
        return (asked, kind, status, payment_id)

    kinds = {"paid": EventKind.PAYMENT_CAPTURED}
    return listed(entities, order_id, kinds, identify, deliver, id_field="id")


def test_listed_delivers_a_payment_the_webhook_acts_on_and_skips_the_rest():
    report = _listed(
        [
            {"status": "paid", "id": "p1"},
            {"status": "refunded", "id": "p2"},
            {"status": "paid", "id": "p3", "order": "o2"},
        ]
    )
    assert report.received == (("o1", "payment_captured", "paid", "p1"),)
    assert report.skipped == ("p2:refunded",)
    assert report.unreadable == ("payment p3 unreadable: payment p3 names another order: o2",)


def test_listed_reads_the_rest_past_a_payment_it_cannot_read_and_names_it():
    report = _listed([{"status": ["paid"], "id": "p0"}, {"status": "paid", "id": "p1"}, {}])
    assert report.received == (("o1", "payment_captured", "paid", "p1"),)
    assert report.unreadable == (
        "payment p0 unreadable: status is not a string",
        "payment #3 unreadable: status is not a string",
    )


# --- no gateway's key takes a key space payhooks mints ----------------------------------------


def _reserved_namers():
    from decimal import Decimal

    from tests.factories import GATEWAY

    yield GATEWAY.razorpay("reconcile", payment_id="pay_1", order_id="order_1",
                           amount_paise=100, with_event_id=False)  # fmt: skip
    yield GATEWAY.cashfree("reconcile", order_id="cf_1", cf_payment_id="1",
                           order_amount=Decimal("1.00"))  # fmt: skip
    yield GATEWAY.payu(txnid="reconcile", mihpayid="1", amount="1.00")


@pytest.mark.parametrize("delivery", list(_reserved_namers()), ids=lambda d: d.provider.value)
def test_a_signed_body_naming_reconcile_never_takes_reconciliations_key_space(delivery):
    """Every key space payhooks mints (``gateways._common.RESERVED_PREFIXES``) is out of reach
    of what a body names, signed or not: such a key is moved under ``<gateway>:``."""
    from payhooks.gateways._common import RESERVED_PREFIXES
    from payhooks.intake.expectations import RECONCILED
    from payhooks.intake.ingest import receive
    from tests.factories import ADAPTERS

    headers = {k: v for k, v in delivery.headers.items() if k != "x-idempotency-key"}
    event = receive(ADAPTERS[delivery.provider], delivery.body, headers).event
    assert RESERVED_PREFIXES == (RECONCILED + ":",)
    assert not event.event_id.startswith(RESERVED_PREFIXES)
    assert event.event_id.startswith(f"{delivery.provider.value}:reconcile")


@pytest.mark.parametrize(
    ("provider", "entity"),
    [
        (Provider.RAZORPAY, {"id": "pay_1", "order_id": "o1", "status": "captured", "amount": 100}),
        (Provider.CASHFREE, {"cf_payment_id": 1, "order_id": "o1", "payment_status": "SUCCESS",
                             "order_amount": 1, "payment_amount": 1}),
    ],
)  # fmt: skip
def test_a_payment_the_status_api_reports_naming_no_currency_is_unreadable(provider, entity):
    """As its webhook would be: never compared with the order as rupees unsaid."""
    import json

    from payhooks.gateways.cashfree import status as cashfree_status
    from payhooks.gateways.razorpay import status as razorpay_status

    body = json.dumps({"items": [entity]} if provider is Provider.RAZORPAY else [entity])
    status = razorpay_status if provider is Provider.RAZORPAY else cashfree_status
    report = status.payments("o1", body.encode())
    assert report.received == ()
    assert report.unreadable == (f"payment {entity.get('id', 1)} unreadable: payment "
                                 f"{entity.get('id', 1)} names no currency",)  # fmt: skip


@pytest.mark.parametrize(
    ("provider", "entity"),
    [
        (Provider.RAZORPAY, {"id": "pay_1", "order_id": "o2", "status": "captured", "amount": 100,
                             "currency": "INR"}),
        (Provider.CASHFREE, {"cf_payment_id": 1, "order_id": "o2", "payment_status": "SUCCESS",
                             "order_amount": 1, "payment_amount": 1, "payment_currency": "INR"}),
    ],
)  # fmt: skip
def test_a_payment_of_another_order_in_an_orders_payments_is_unreadable_not_skipped(
    provider, entity
):
    """An order's payments answer listing a payment of another order (the gateway's or a
    proxy's mix-up) was skipped as a payment in a state nothing acts on: nothing applied, but
    nothing said either, the checkout read as "no payment yet". It is the answer's trouble."""
    import json

    from payhooks.gateways.cashfree import status as cashfree_status
    from payhooks.gateways.razorpay import status as razorpay_status

    body = json.dumps({"items": [entity]} if provider is Provider.RAZORPAY else [entity])
    status = razorpay_status if provider is Provider.RAZORPAY else cashfree_status
    report = status.payments("o1", body.encode())
    assert (report.received, report.skipped) == ((), ())
    assert report.unreadable == (f"payment {entity.get('id', 1)} unreadable: payment "
                                 f"{entity.get('id', 1)} names another order: o2",)  # fmt: skip


@pytest.mark.parametrize(("named", "refund_id"), [("rfnd_X1", "rfnd_X1"), (900011, "900011")])
def test_a_refund_answer_saying_failed_under_an_id_is_failed_with_that_id(named, refund_id):
    from payhooks.gateways._refunds import RefundFailed, failed_refund

    found = failed_refund(Provider.CASHFREE, "Cashfree's refund is FAILED", named)
    assert isinstance(found, RefundFailed) and found.gateway_refund_id == refund_id


@pytest.mark.parametrize("named", [None, "", " ", True, ["rfnd_X1"], "rfnd\ud800"])
def test_a_refund_answer_saying_failed_under_no_readable_id_is_refused_not_asked_for_ever(named):
    """Asked again, it would fail the same way at every pass: closed, as before, without one."""
    from payhooks.gateways._refunds import RefundFailed, RefundRefused, failed_refund

    found = failed_refund(Provider.RAZORPAY, "Razorpay's refund failed", named)
    assert isinstance(found, RefundRefused) and not isinstance(found, RefundFailed)

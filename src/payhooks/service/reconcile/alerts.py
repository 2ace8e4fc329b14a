"""What reconciliation finds that a person must act on, as the reference service says it: an
alert email through the outbox, in the same transaction as what it reports (once per payment),
and the warning in the log. Refused credentials are the alerts' own condition
(``payhooks.operations.alerts.reconciliation``: raised, repeated, resolved), not an email of
their own beside it."""

from __future__ import annotations

from payhooks.events import Event
from payhooks.gateways import title_of
from payhooks.plumbing.db import Connection
from payhooks.reconcile.passes import Logged
from payhooks.service import outbox


class Alerts(Logged):
    def missing_webhook(self, conn: Connection, event: Event) -> None:
        """A payment no webhook ever brought is a broken integration an operator must hear
        about: one alert per payment, however many passes or statuses report it."""
        provider, payment_id = event.provider.value, event.payment_id
        gateway = title_of(provider)
        outbox.enqueue(
            conn,
            outbox.alert(
                f"alert:reconciled:{provider}:{payment_id}",
                f"Webhook missing: {gateway} payment {payment_id} found by reconciliation",
                f"{gateway} reported payment {payment_id} ({event.event_type}) for checkout "
                f"{event.merchant_ref}, and no webhook for it ever arrived. It was applied "
                "(order, stock, email as usual); check the webhook endpoint, its secret and "
                "the gateway's delivery log.",
                provider=provider,
                payment_id=payment_id,
                event_id=event.event_id,
                reference=event.merchant_ref,
            ),
        )
        super().missing_webhook(conn, event)


ALERTS = Alerts()

__all__ = ["ALERTS", "Alerts"]

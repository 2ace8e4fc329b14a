"""What reconciliation finds that a person must act on, as the reference service says it: an
alert email through the outbox, in the same transaction as what it reports (once per payment,
once per refusal episode), and the warning in the log."""

from __future__ import annotations

from datetime import datetime

from payhooks.events import Event, Provider
from payhooks.plumbing.db import Connection
from payhooks.reconcile.passes import Logged, credentials_of
from payhooks.service import outbox


class Alerts(Logged):
    def credentials_refused(
        self, conn: Connection, provider: Provider, since: datetime, reason: str
    ) -> None:
        """Every call to this gateway fails until the API credentials are fixed, and every
        payment whose webhook is missed stays unrecovered meanwhile: one alert per episode
        (from the first refusal until a call succeeds again), however many passes see it."""
        outbox.enqueue(
            conn,
            outbox.alert(
                f"alert:reconcile_refused:{provider.value}:{since.isoformat()}",
                f"Reconciliation refused: {provider.value} does not accept the API credentials",
                f"{provider.value}'s status API refused payhooks' API credentials ({reason}). "
                "Reconciliation cannot recover payments whose webhook was missed until they "
                f"are fixed: check {credentials_of(provider)}. /readyz lists the gateway under "
                "reconciliation_refused until a call succeeds again.",
                provider=provider.value,
                reason=reason,
            ),
        )
        super().credentials_refused(conn, provider, since, reason)

    def missing_webhook(self, conn: Connection, event: Event) -> None:
        """A payment no webhook ever brought is a broken integration an operator must hear
        about: one alert per payment, however many passes or statuses report it."""
        provider, payment_id = event.provider.value, event.payment_id
        outbox.enqueue(
            conn,
            outbox.alert(
                f"alert:reconciled:{provider}:{payment_id}",
                f"Webhook missing: {provider} payment {payment_id} found by reconciliation",
                f"{provider} reported payment {payment_id} ({event.event_type}) for checkout "
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

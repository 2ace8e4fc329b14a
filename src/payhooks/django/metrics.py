"""Prometheus metrics from the core's tables in a Django project (the ``metrics`` extra)::

    # urls.py
    from payhooks.django.metrics import view as payhooks_metrics
    urlpatterns = [..., path("metrics", payhooks_metrics)]

Read on Django's own connection to ``PAYHOOKS["DATABASE"]`` inside a transaction with a
one-second statement timeout, at most once per five seconds however many scrapes arrive
(``payhooks.operations.metrics``). Guard the path as you guard any metrics endpoint.
"""

from __future__ import annotations

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from payhooks.django import conf
from payhooks.django.deliveries import raw_connection
from payhooks.operations.metrics import STATEMENT_TIMEOUT_MS, Snapshot, read, registry


def _read() -> Snapshot:
    alias = conf.current().database
    with transaction.atomic(using=alias):
        conn = raw_connection(alias)
        conn.execute(
            "SELECT set_config('statement_timeout', %s, true)", (str(STATEMENT_TIMEOUT_MS),)
        )
        return read(conn)


_REGISTRY = registry(_read)


def view(request: HttpRequest) -> HttpResponse:
    """``/metrics`` in Prometheus' text format, from the core's tables."""
    return HttpResponse(generate_latest(_REGISTRY), content_type=CONTENT_TYPE_LATEST)

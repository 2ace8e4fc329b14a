"""The delivery records in Django's admin: read-only, searchable by payment id, gateway order
id, order or delivery key, filtered by gateway and outcome, with an action that replays parked
deliveries (each in a transaction of its own, answered only once committed). Beside them,
"Webhook health" (``payhooks.operations.health.summary``), the forged-signature banner on the list,
and "Payment timeline" (``payhooks.operations.timeline``): one gateway order's expectation,
deliveries, payments, requests, reconciliation and disputes, its parked deliveries replayed by
the list's action. And the disputes (``payhooks.intake.disputes``), read-only, the open ones
first by deadline, each with its timeline and its gateway's dashboard."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

import psycopg
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.template import engines
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from payhooks.django import conf, connection, deliveries, replays
from payhooks.django.models import PROVIDERS, Dispute, ProcessedWebhook
from payhooks.gateways import GATEWAYS
from payhooks.operations import health, timeline
from payhooks.settlements import listing

_ALL_PROVIDERS = [value for value, _ in PROVIDERS]
M = TypeVar("M", ProcessedWebhook, Dispute)
CHANGELIST = "admin:payhooks_processedwebhook_changelist"
CHANGE = "admin:payhooks_processedwebhook_change"
_DELIVERY = ("provider", "event_id", "event_type", "outcome", "payment_id", "merchant_ref")
"""What a delivery is, first in the list and on its page alike."""


_HEALTH = """{% extends "admin/base_site.html" %}
{% block content %}
<p><a href="{% url 'admin:payhooks_timeline' %}">Payment timeline</a></p>
{% for provider in summary.forged %}<ul class="messagelist"><li class="warning">{{ provider }}:
{{ forged_text }}</li></ul>{% endfor %}
<table>
<thead><tr><th>Gateway</th><th>Last 2xx</th><th>Last hour, by status</th>
<th>Signature refused (last hour)</th><th>Parked</th></tr></thead>
<tbody>{% for g in summary.gateways %}<tr>
<td>{{ g.provider }}</td><td>{{ g.last_2xx|default:"never" }}</td>
<td>{% for status, n in g.by_status.items %}{{ status }}: {{ n }}{% if not forloop.last %},
{% endif %}{% empty %}none{% endfor %}</td>
<td>{{ g.signature_refused }}</td><td>{{ g.parked }}</td>
</tr>{% endfor %}</tbody>
</table>
{% endblock %}
"""
_FORGED = (
    "many deliveries in the last hour failed the signature check. Was a webhook secret "
    "rotated in the gateway's dashboard and not yet added to PAYHOOKS, or is someone forging "
    "deliveries?"
)


def summary() -> health.Summary:
    return health.summary(connection(conf.current().database), datetime.now(UTC))


def forged_now() -> tuple[str, ...]:
    """The gateways under the forged-signature banner, read within a second; none when the
    read takes longer (a flood makes the log it reads big): the list the banner sits on is
    where parked deliveries are replayed, and must stay usable."""
    alias = conf.current().database
    try:
        with transaction.atomic(using=alias):
            conn = connection(alias)
            conn.execute(_BOUNDED)
            return tuple(health.summary(conn, datetime.now(UTC)).forged)
    except psycopg.Error:
        log.warning("health_banner_unread", exc_info=True)
        return ()


_BOUNDED = "SELECT set_config('statement_timeout', '1000', true)"
SETTLEMENT_DAYS = 31
"""The days of payouts the admin's Settlements page shows."""
log = logging.getLogger("payhooks.django")


def told(text: str) -> list[tuple[timeline.Found, timeline.Story]]:
    """Each gateway order ``text`` names, with its story."""
    conn = connection(conf.current().database)
    found = (
        (f, timeline.story(conn, f.provider, f.gateway_order_id)) for f in timeline.find(conn, text)
    )
    return [(f, story) for f, story in found if story is not None]


def _changelist(**query: str) -> str:
    return f"{reverse(CHANGELIST)}?{urlencode(query)}"


def _shown(found: timeline.Found, story: timeline.Story) -> dict[str, Any]:
    """A story with the admin's links: each record's page, the replay action's address (the
    list filtered by gateway, so a key two gateways share names one record), the parked list."""
    records = [
        {
            "record": record,
            "url": f"{reverse(CHANGE, args=(quote(record.event_id),))}?"
            + urlencode({"provider": story.provider}),
            "replay_url": _changelist(provider__exact=story.provider),
        }
        for record in story.records
    ]
    parked = _changelist(
        provider__exact=story.provider, outcome__exact="parked", q=story.gateway_order_id
    )
    return {"found": found, "story": story, "records": records, "parked_url": parked}


class _ByGateway(ChangeList):
    def url_for_result(self, result: ProcessedWebhook | Dispute) -> str:
        """A row's page names its gateway too: the core keys deliveries and disputes by
        gateway and id, and two gateways may send the same delivery key or dispute id."""
        return f"{super().url_for_result(result)}?{urlencode({'provider': result.provider})}"


class _ReadOnly(admin.ModelAdmin, Generic[M]):
    """Rows the claim writes, only read here: none added, changed or deleted; each found by
    its id and gateway (``_ByGateway``), and searched by exact ids (``matching``)."""

    key: str
    """The id a row's page names, beside its gateway."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return _ByGateway

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(self.matching(term)), False

    def matching(self, term: str) -> Q:
        """The rows a search for ``term`` finds."""
        raise NotImplementedError

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> M | None:
        """By its id and, when the link names one, gateway (see ``_ByGateway``)."""
        found = self.get_queryset(request).filter(**{self.key: unquote(object_id)})
        return _one_of(found, request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _timeline_link(q: str) -> Any:
    """A link to the Payment timeline of the gateway orders ``q`` names."""
    url = f"{reverse('admin:payhooks_timeline')}?{urlencode({'q': q})}"
    return format_html('<a href="{}">timeline</a>', url)


@admin.register(ProcessedWebhook)
class ProcessedWebhookAdmin(_ReadOnly[ProcessedWebhook]):
    list_display = ("processed_at", *_DELIVERY, "order_ref", "mismatches", "timeline_link")
    list_filter = ("provider", "outcome")
    search_fields = ("event_id", "payment_id", "merchant_ref", "order_ref", "bank_ref")
    search_help_text = (
        "An exact payment id, gateway order id, order, delivery key or bank reference (UTR/RRN)."
    )
    ordering = ("-processed_at",)
    show_full_result_count = False  # one count per page over millions of records, not two
    actions = ("replay_parked",)
    fields = (
        *_DELIVERY,
        "bank_ref",
        "order_ref",
        "processed_at",
        "payload_sha256",
        "body_bytes",
        "mismatches",
        "last_mismatch_at",
    )
    readonly_fields = fields  # the body and headers (customer details, signature) stay out
    key = "event_id"

    change_list_template = "admin/payhooks/processedwebhook/change_list.html"

    @admin.display(description="timeline")
    def timeline_link(self, record: ProcessedWebhook) -> Any:
        """Its gateway order's timeline."""
        if not record.merchant_ref:
            return "—"
        return _timeline_link(record.merchant_ref)

    @admin.display(description="body (bytes)")
    def body_bytes(self, record: ProcessedWebhook) -> int:
        return len(record.body)

    def matching(self, term: str) -> Q:
        """Exact matches: ids are case-sensitive, and naming every provider lets PostgreSQL
        use the (provider, ...) indexes rather than scan millions of records."""
        every = Q(provider__in=_ALL_PROVIDERS)
        return (
            (every & Q(event_id=term))
            | (every & Q(payment_id=term))
            | Q(merchant_ref=term)
            | Q(order_ref=term)
            | Q(bank_ref=term)
        )

    @deliveries.non_atomic  # each replay commits on its own, even under ATOMIC_REQUESTS
    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "GET":
            for provider in forged_now():
                self.message_user(request, f"{provider}: {_FORGED}", messages.WARNING)
        return super().changelist_view(request, extra_context)

    def get_urls(self) -> list[URLPattern]:
        health_view = self.admin_site.admin_view(self.health_view)
        timeline_view = self.admin_site.admin_view(self.timeline_view)
        settlements_view = self.admin_site.admin_view(self.settlements_view)
        return [
            path("health/", health_view, name="payhooks_health"),
            path("timeline/", timeline_view, name="payhooks_timeline"),
            path("settlements/", settlements_view, name="payhooks_settlements"),
            *super().get_urls(),
        ]

    def health_view(self, request: HttpRequest) -> HttpResponse:
        """Webhook health: when each gateway was last answered 2xx, its answers by status in
        the last hour, the signature failures among them, its parked deliveries."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Webhook health",
            "summary": summary(),
            "forged_text": _FORGED,
        }
        template = engines["django"].from_string(_HEALTH)
        return TemplateResponse(request, template, context)

    def timeline_view(self, request: HttpRequest) -> HttpResponse:
        """Payment timeline: what the operator typed, to each gateway order it names and its
        story; parked deliveries offer the list's replay action to those allowed it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        typed = request.GET.get("q", "")
        q = typed.strip()
        try:
            found = told(typed) if typed else []
        except timeline.UnreadableQuery as exc:
            return HttpResponseBadRequest(f"Payment timeline: {exc}.", content_type="text/plain")
        context = {
            **self.admin_site.each_context(request),
            "title": "Payment timeline",
            "q": q,
            "told": [_shown(f, story) for f, story in found],
            "can_replay": self.has_replay_permission(request),
        }
        return TemplateResponse(request, "admin/payhooks/timeline.html", context)

    def settlements_view(self, request: HttpRequest) -> HttpResponse:
        """Settlements: the payouts of the last ``SETTLEMENT_DAYS`` days with their totals and
        whether their lines add up, the captures flagged unsettled, the lines naming no
        payment payhooks knows, and the report lines it could not read
        (``manage.py payhooks_settlements`` fetches them)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        conn = connection(conf.current().database)
        now = datetime.now(UTC)
        start = now - timedelta(days=SETTLEMENT_DAYS)
        context = {
            **self.admin_site.each_context(request),
            "title": "Settlements",
            "days": SETTLEMENT_DAYS,
            "payouts": listing.payouts(conn, start, now, limit=listing.PAGE),
            "totals": listing.totals(conn, start, now),
            "unsettled": listing.unsettled(conn),
            "unmatched": listing.unmatched_lines(conn),
            "unreadable": listing.unreadable(conn),
        }
        return TemplateResponse(request, "admin/payhooks/settlements.html", context)

    def has_replay_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("payhooks.replay_processedwebhook"))

    @admin.action(description="Replay selected parked deliveries", permissions=["replay"])
    def replay_parked(self, request: HttpRequest, queryset: QuerySet) -> None:
        report = replays.replay_parked(queryset.order_by("processed_at", "event_id"))
        self._tell(request, messages.SUCCESS, "Applied", report.applied)
        self._tell(
            request,
            messages.INFO,
            "Waiting for the gateway's status API, nothing applied yet (the confirmation pass "
            "applies what it reports)",
            report.waiting,
        )
        self._tell(
            request, messages.INFO, "Ignored by your handler, no longer parked", report.ignored
        )
        self._tell(
            request, messages.WARNING, "Still matching nothing, kept parked", report.still_parked
        )
        self._tell(
            request,
            messages.WARNING,
            "Still another amount than expected, kept parked (correct the expectation, or "
            "resolve it)",
            report.wrong_amount,
        )
        self._tell(request, messages.INFO, "Not parked, left alone", report.not_parked)
        self._tell(request, messages.ERROR, "Not replayed", report.failed)

    def _tell(self, request: HttpRequest, level: int, what: str, keys: tuple[str, ...]) -> None:
        if keys:
            self.message_user(request, f"{what} ({len(keys)}): {', '.join(keys)}", level)


class _Stands(admin.SimpleListFilter):
    """Open (not yet won, lost or closed) or decided."""

    title = "stands"
    parameter_name = "stands"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("open", "open"), ("decided", "won, lost or closed")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "open":
            return queryset.filter(closed_at__isnull=True)
        if self.value() == "decided":
            return queryset.filter(closed_at__isnull=False)
        return queryset


_DASHBOARDS = {p.value: g.disputes_dashboard for p, g in GATEWAYS.items() if g.disputes_dashboard}


@admin.register(Dispute)
class DisputeAdmin(_ReadOnly[Dispute]):
    """The disputes, read-only: the nearest deadline first (those decided have none to
    meet), filtered open or decided, by gateway and status."""

    list_display = (
        "respond_by", "provider", "dispute_id", "status", "phase", "amount_paise", "reason",
        "payment_id", "lost_paise", "timeline_link", "dashboard_link",
    )  # fmt: skip
    list_filter = (_Stands, "provider", "status")
    search_fields = ("dispute_id", "payment_id", "gateway_order_id")
    search_help_text = "An exact dispute id, payment id or gateway order id."
    ordering = (F("closed_at").asc(nulls_first=True), F("respond_by").asc(nulls_last=True))
    fields = ("provider", "dispute_id", "payment_id", "gateway_order_id", "status", "phase",
              "gateway_status", "amount_paise", "currency", "reason", "respond_by",
              "lost_paise", "event_id", "opened_at", "updated_at", "closed_at")  # fmt: skip
    readonly_fields = fields
    key = "dispute_id"

    @admin.display(description="timeline")
    def timeline_link(self, dispute: Dispute) -> Any:
        """Its gateway order's timeline (found by its id)."""
        return _timeline_link(dispute.dispute_id)

    @admin.display(description="answer it")
    def dashboard_link(self, dispute: Dispute) -> Any:
        """Where a person answers it: its gateway's dashboard."""
        found = _DASHBOARDS.get(dispute.provider)
        if not found:
            return "its gateway's dashboard"
        return format_html('<a href="{}" rel="noopener noreferrer">{} dashboard</a>', found,
                           dispute.provider)  # fmt: skip

    def matching(self, term: str) -> Q:
        """Exact matches, as for the deliveries."""
        return Q(dispute_id=term) | Q(payment_id=term) | Q(gateway_order_id=term)


def _one_of(found: QuerySet[M], request: HttpRequest) -> M | None:
    """The one row of ``found`` of the gateway the link names, when it names one; None when
    there is none, or several (two gateways' rows under one id, and no gateway named)."""
    if provider := request.GET.get("provider"):
        found = found.filter(provider=provider)
    rows = list(found[:2])
    return rows[0] if len(rows) == 1 else None

"""The shop's addresses: the admin, the gateways' webhooks at ``/webhooks/<gateway>``, and
payhooks' Prometheus metrics at ``/metrics`` (keep it off the public internet)."""

from django.contrib import admin
from django.urls import include, path

from payhooks.django.metrics import view as payhooks_metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("webhooks/", include("payhooks.django.urls")),
    path("metrics", payhooks_metrics),
]

"""The shop's addresses: the admin, the gateways' webhooks at ``/webhooks/<gateway>``, PayU's
return page (``surl``, ``furl``) at ``/payu/return``, and payhooks' Prometheus metrics at
``/metrics`` (keep it off the public internet)."""

from django.contrib import admin
from django.urls import include, path
from orders.views import payu_return

from payhooks.django.metrics import view as payhooks_metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("webhooks/", include("payhooks.django.urls")),
    path("payu/return", payu_return),
    path("metrics", payhooks_metrics),
]

"""The shop's addresses: the admin, and the gateways' webhooks at ``/webhooks/<gateway>``."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("webhooks/", include("payhooks.django.urls")),
]

"""``path("webhooks/", include("payhooks.django.urls"))`` serves ``webhooks/<provider>``."""

from __future__ import annotations

from django.urls import path

from payhooks.django import views

app_name = "payhooks"
urlpatterns = [path("<str:provider>", views.receive, name="webhook")]

"""The example shop's addresses, plus the webhook view wrapped in a transaction of the
merchant's own (a decorator or middleware holding one open across the view)."""

from __future__ import annotations

from django.db import transaction
from django.urls import path
from django_shop.urls import urlpatterns as shop

from payhooks.django import views

urlpatterns = [
    *shop,
    path("inside-atomic/<str:provider>", transaction.atomic(views.receive)),
]

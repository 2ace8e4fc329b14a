from django.contrib import admin

from .models import Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("reference", "amount_paise", "status", "payment_id", "paid_at")
    list_filter = ("status",)
    search_fields = ("=reference", "=payment_id")

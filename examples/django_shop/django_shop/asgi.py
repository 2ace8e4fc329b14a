"""ASGI entry point: ``uvicorn django_shop.asgi:application``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_shop.settings")
application = get_asgi_application()

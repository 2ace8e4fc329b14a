"""A small shop taking Razorpay, Cashfree, PayU, PhonePe and Juspay payments through payhooks.

Everything comes from the environment: ``DATABASE_URL`` (PostgreSQL) and the gateways'
secrets, named and written as for the payhooks service: one secret exactly as written, or
several as a JSON array (``PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS='["new", "old"]'``).
"""

import os

from psycopg.conninfo import conninfo_to_dict

DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-shop-example-not-for-production")
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "payhooks.django",
    "orders",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "django_shop.urls"
WSGI_APPLICATION = "django_shop.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def database(url: str) -> dict[str, object]:
    """A ``DATABASES`` entry from a PostgreSQL URL."""
    parts = conninfo_to_dict(url)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.get("dbname", ""),
        "USER": parts.get("user", ""),
        "PASSWORD": parts.get("password", ""),
        "HOST": parts.get("host", ""),
        "PORT": parts.get("port", ""),
        # The usual Django setting; payhooks' webhook view steps out of it on its own.
        "ATOMIC_REQUESTS": True,
    }


DATABASES = {
    "default": database(os.environ.get("DATABASE_URL", "postgresql://localhost/django_shop"))
}


# A string is read as the service reads the variable (one secret, or a JSON array of them);
# unset or empty: the gateway is not served.
PAYHOOKS = {
    "RAZORPAY_WEBHOOK_SECRETS": os.environ.get("PAYHOOKS_RAZORPAY_WEBHOOK_SECRETS", ""),
    "CASHFREE_CLIENT_SECRETS": os.environ.get("PAYHOOKS_CASHFREE_CLIENT_SECRETS", ""),
    "PAYU_MERCHANT_KEY": os.environ.get("PAYHOOKS_PAYU_MERCHANT_KEY", ""),
    "PAYU_SALTS": os.environ.get("PAYHOOKS_PAYU_SALTS", ""),
    # PhonePe's and Juspay's callbacks carry only the username:password set in their
    # dashboards: each takes effect when the gateway's status API confirms it, so their API
    # credentials below are needed too, and manage.py payhooks_confirm beside the server.
    "PHONEPE_WEBHOOK_CREDENTIALS": os.environ.get("PAYHOOKS_PHONEPE_WEBHOOK_CREDENTIALS", ""),
    "JUSPAY_WEBHOOK_CREDENTIALS": os.environ.get("PAYHOOKS_JUSPAY_WEBHOOK_CREDENTIALS", ""),
    # Reconciliation (manage.py payhooks_reconcile): each gateway's status-API credentials.
    "RAZORPAY_KEY_ID": os.environ.get("PAYHOOKS_RAZORPAY_KEY_ID", ""),
    "RAZORPAY_KEY_SECRET": os.environ.get("PAYHOOKS_RAZORPAY_KEY_SECRET", ""),
    "CASHFREE_CLIENT_ID": os.environ.get("PAYHOOKS_CASHFREE_CLIENT_ID", ""),
    "CASHFREE_API_SECRET": os.environ.get("PAYHOOKS_CASHFREE_API_SECRET", ""),
    "PAYU_API_KEY": os.environ.get("PAYHOOKS_PAYU_API_KEY", ""),
    "PAYU_API_SALT": os.environ.get("PAYHOOKS_PAYU_API_SALT", ""),
    "PHONEPE_CLIENT_ID": os.environ.get("PAYHOOKS_PHONEPE_CLIENT_ID", ""),
    "PHONEPE_CLIENT_SECRET": os.environ.get("PAYHOOKS_PHONEPE_CLIENT_SECRET", ""),
    "JUSPAY_MERCHANT_ID": os.environ.get("PAYHOOKS_JUSPAY_MERCHANT_ID", ""),
    "JUSPAY_API_KEY": os.environ.get("PAYHOOKS_JUSPAY_API_KEY", ""),
    # Each status API's base URL; unset or empty: production. A sandbox's (PhonePe's
    # https://api-preprod.phonepe.com/apis/pg-sandbox), HDFC SmartGateway's host for Juspay.
    **{
        f"{gateway}_API_URL": os.environ.get(f"PAYHOOKS_{gateway}_API_URL", "")
        for gateway in ("RAZORPAY", "CASHFREE", "PAYU", "PHONEPE", "JUSPAY")
    },
}

# Django's error reports (the 500 email, the DEBUG page) mask the PayU salts and the webhook
# credentials above too: Django's own filter masks only names saying SECRET, KEY, PASS, ...
DEFAULT_EXCEPTION_REPORTER_FILTER = "payhooks.django.reporting.SafeExceptionReporterFilter"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "Asia/Kolkata"
STATIC_URL = "static/"

#!/usr/bin/env python
"""The shop's command line: ``python manage.py migrate``, ``runserver``, ``payhooks_parked``."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "django_shop.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)

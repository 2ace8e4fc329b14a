"""Moved to ``payhooks.intake.payments``; this path stays for existing imports."""

import sys

from payhooks.intake import payments as _moved

sys.modules[__name__] = _moved

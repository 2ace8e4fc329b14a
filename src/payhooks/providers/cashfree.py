"""Moved to ``payhooks.gateways.cashfree``; this path stays for existing imports."""

import sys

from payhooks.gateways import cashfree as _moved

sys.modules[__name__] = _moved

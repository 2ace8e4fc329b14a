"""Moved to ``payhooks.gateways.razorpay``; this path stays for existing imports."""

import sys

from payhooks.gateways import razorpay as _moved

sys.modules[__name__] = _moved

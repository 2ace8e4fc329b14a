"""Moved to ``payhooks.gateways.phonepe``; this path stays for existing imports."""

import sys

from payhooks.gateways import phonepe as _moved

sys.modules[__name__] = _moved

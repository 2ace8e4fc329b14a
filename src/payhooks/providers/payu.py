"""Moved to ``payhooks.gateways.payu``; this path stays for existing imports."""

import sys

from payhooks.gateways import payu as _moved

sys.modules[__name__] = _moved

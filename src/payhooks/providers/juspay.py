"""Moved to ``payhooks.gateways.juspay``; this path stays for existing imports."""

import sys

from payhooks.gateways import juspay as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.gateways._common``; this path stays for existing imports."""

import sys

from payhooks.gateways import _common as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.refunding.refunds``; this path stays for existing imports."""

import sys

from payhooks.refunding import refunds as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.operations.alerts``; this path stays for existing imports."""

import sys

from payhooks.operations import alerts as _moved

sys.modules[__name__] = _moved

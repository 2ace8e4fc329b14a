"""Moved to ``payhooks.operations.retention``; this path stays for existing imports."""

import sys

from payhooks.operations import retention as _moved

sys.modules[__name__] = _moved

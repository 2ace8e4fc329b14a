"""Moved to ``payhooks.operations.health``; this path stays for existing imports."""

import sys

from payhooks.operations import health as _moved

sys.modules[__name__] = _moved

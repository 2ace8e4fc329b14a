"""Moved to ``payhooks.operations.notifier``; this path stays for existing imports."""

import sys

from payhooks.operations import notifier as _moved

sys.modules[__name__] = _moved

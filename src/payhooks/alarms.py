"""Moved to ``payhooks.operations.alarms``; this path stays for existing imports."""

import sys

from payhooks.operations import alarms as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.operations.deliverylog``; this path stays for existing imports."""

import sys

from payhooks.operations import deliverylog as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.intake.confirmations``; this path stays for existing imports."""

import sys

from payhooks.intake import confirmations as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.intake.endpoint``; this path stays for existing imports."""

import sys

from payhooks.intake import endpoint as _moved

sys.modules[__name__] = _moved

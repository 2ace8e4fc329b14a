"""Moved to ``payhooks.intake.stored``; this path stays for existing imports."""

import sys

from payhooks.intake import stored as _moved

sys.modules[__name__] = _moved

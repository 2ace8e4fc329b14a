"""Moved to ``payhooks.intake.hooks``; this path stays for existing imports."""

import sys

from payhooks.intake import hooks as _moved

sys.modules[__name__] = _moved

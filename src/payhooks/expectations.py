"""Moved to ``payhooks.intake.expectations``; this path stays for existing imports."""

import sys

from payhooks.intake import expectations as _moved

sys.modules[__name__] = _moved

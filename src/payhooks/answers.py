"""Moved to ``payhooks.intake.answers``; this path stays for existing imports."""

import sys

from payhooks.intake import answers as _moved

sys.modules[__name__] = _moved

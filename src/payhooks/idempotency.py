"""Moved to ``payhooks.intake.idempotency``; this path stays for existing imports."""

import sys

from payhooks.intake import idempotency as _moved

sys.modules[__name__] = _moved

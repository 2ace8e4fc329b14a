"""Moved to ``payhooks.plumbing.retries``; this path stays for existing imports."""

import sys

from payhooks.plumbing import retries as _moved

sys.modules[__name__] = _moved

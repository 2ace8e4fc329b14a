"""Moved to ``payhooks.plumbing.pools``; this path stays for existing imports."""

import sys

from payhooks.plumbing import pools as _moved

sys.modules[__name__] = _moved

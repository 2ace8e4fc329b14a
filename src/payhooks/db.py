"""Moved to ``payhooks.plumbing.db``; this path stays for existing imports."""

import sys

from payhooks.plumbing import db as _moved

sys.modules[__name__] = _moved

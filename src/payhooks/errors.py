"""Moved to ``payhooks.plumbing.errors``; this path stays for existing imports."""

import sys

from payhooks.plumbing import errors as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.plumbing.schema``; this path stays for existing imports."""

import sys

from payhooks.plumbing import schema as _moved

sys.modules[__name__] = _moved

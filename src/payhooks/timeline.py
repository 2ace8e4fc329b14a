"""Moved to ``payhooks.operations.timeline``; this path stays for existing imports."""

import sys

from payhooks.operations import timeline as _moved

sys.modules[__name__] = _moved

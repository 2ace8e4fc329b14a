"""Moved to ``payhooks.refunding.sending``; this path stays for existing imports."""

import sys

from payhooks.refunding import sending as _moved

sys.modules[__name__] = _moved

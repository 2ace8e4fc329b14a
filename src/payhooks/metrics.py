"""Moved to ``payhooks.operations.metrics``; this path stays for existing imports."""

import sys

from payhooks.operations import metrics as _moved

sys.modules[__name__] = _moved

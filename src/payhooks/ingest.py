"""Moved to ``payhooks.intake.ingest``; this path stays for existing imports."""

import sys

from payhooks.intake import ingest as _moved

sys.modules[__name__] = _moved

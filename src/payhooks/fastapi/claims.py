"""Moved to ``payhooks.aio.claims``. This old path is that very module, so imports
and monkeypatching through it keep working."""

import sys

from payhooks.aio import claims as _moved

sys.modules[__name__] = _moved

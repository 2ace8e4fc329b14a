"""Moved to ``payhooks.aio.reconcile``. This old path is that very module, so imports
and monkeypatching through it keep working."""

import sys

from payhooks.aio import reconcile as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.aio.deliveries``. This old path is that very module, so imports
and monkeypatching through it keep working."""

import sys

from payhooks.aio import deliveries as _moved

sys.modules[__name__] = _moved

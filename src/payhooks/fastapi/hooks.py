"""Moved to ``payhooks.aio.hooks``. This old path is that very module, so imports
and monkeypatching through it keep working."""

import sys

from payhooks.aio import hooks as _moved

sys.modules[__name__] = _moved

"""Moved to ``payhooks.operations.metrics``; this path is deprecated and goes in payhooks 0.2.
Until then it warns (``DeprecationWarning``) and is that very module, so imports and
monkeypatching through it keep working."""

import sys
import warnings

from payhooks.operations import metrics as _moved

warnings.warn(
    f"{__name__} is deprecated and goes in payhooks 0.2: import {_moved.__name__}",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved

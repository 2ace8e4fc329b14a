"""The old import paths of modules that moved into the rooms (``payhooks.db``,
``payhooks.providers.razorpay``, ...): each is deprecated and goes in payhooks 0.2. Until then
importing one warns (``DeprecationWarning``, naming the new path) and gives that very module,
so imports and monkeypatching through it keep working."""

import sys
import warnings
from types import ModuleType


def moved(old: str, new: ModuleType) -> None:
    """Make the module at ``old`` (being imported) be ``new``, with a warning for its importer."""
    warnings.warn(
        f"{old} is deprecated and goes in payhooks 0.2: import {new.__name__}",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old] = new

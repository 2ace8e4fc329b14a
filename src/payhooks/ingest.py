"""Moved to ``payhooks.intake.ingest``; this path is deprecated and goes in payhooks 0.2.
``payhooks.ingest`` is also the function ``payhooks`` exports, so this path cannot be the moved
module: the package loads it first (the name stays the function's), and each name read through
it warns (``DeprecationWarning``) and is the moved module's own object."""

import warnings

from payhooks.intake import ingest as _moved


def __getattr__(name: str) -> object:
    warnings.warn(
        "payhooks.ingest is deprecated and goes in payhooks 0.2: import payhooks.intake.ingest",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_moved, name)

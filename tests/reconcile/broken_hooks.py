"""An app module whose import fails with something other than an ImportError: a setting its
module reads at import time is missing."""

raise RuntimeError("MYSHOP_SETTINGS is not set")

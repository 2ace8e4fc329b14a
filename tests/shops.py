"""The example shops started as a merchant starts them (``python -m examples.<shop>``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REFUSED_SETTINGS = [
    ("PHONEPE_WEBHOOK_CREDENTIALS", "nocolon"),
    ("JUSPAY_WEBHOOK_CREDENTIALS", "user:"),
    ("RAZORPAY_WEBHOOK_SECRETS", '["whsec_a", '),
]
"""Webhook settings payhooks refuses, each in a variable of the shops' own."""


def refused_at_start(shop: str, variable: str, value: str) -> None:
    """``shop`` started with ``variable`` set to ``value`` stops before it connects to its
    database: exit 1, one line naming the variable, never quoting it, no traceback."""
    env = {**os.environ, "DATABASE_URL": "postgresql://127.0.0.1:9/shop", variable: value}
    started = subprocess.run(
        [sys.executable, "-m", f"examples.{shop}"],
        env=env, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1],
    )  # fmt: skip
    assert started.returncode == 1, started.stderr
    assert started.stderr.startswith(f"{shop}: {variable} ")
    assert started.stderr.count("\n") == 1 and "nocolon" not in started.stderr

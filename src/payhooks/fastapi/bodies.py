"""The bounded body reader, now in ``payhooks.starlette`` (no FastAPI needed): kept here
for the imports that name this path."""

from __future__ import annotations

from payhooks.starlette import read_bounded, replaying

__all__ = ["read_bounded", "replaying"]

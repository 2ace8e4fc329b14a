"""Moved to ``payhooks.aio.claims``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.aio import claims
from payhooks.plumbing.moved import moved

moved(__name__, claims)

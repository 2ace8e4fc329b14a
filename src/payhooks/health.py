"""Moved to ``payhooks.operations.health``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import health
from payhooks.plumbing.moved import moved

moved(__name__, health)

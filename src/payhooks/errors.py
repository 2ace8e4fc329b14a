"""Moved to ``payhooks.plumbing.errors``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing import errors
from payhooks.plumbing.moved import moved

moved(__name__, errors)

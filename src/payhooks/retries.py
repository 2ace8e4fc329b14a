"""Moved to ``payhooks.plumbing.retries``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing import retries
from payhooks.plumbing.moved import moved

moved(__name__, retries)

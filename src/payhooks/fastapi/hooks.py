"""Moved to ``payhooks.aio.hooks``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.aio import hooks
from payhooks.plumbing.moved import moved

moved(__name__, hooks)

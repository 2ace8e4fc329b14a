"""Moved to ``payhooks.aio.reconcile``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.aio import reconcile
from payhooks.plumbing.moved import moved

moved(__name__, reconcile)

"""Moved to ``payhooks.operations.notifier``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import notifier
from payhooks.plumbing.moved import moved

moved(__name__, notifier)

"""Moved to ``payhooks.aio.deliveries``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.aio import deliveries
from payhooks.plumbing.moved import moved

moved(__name__, deliveries)

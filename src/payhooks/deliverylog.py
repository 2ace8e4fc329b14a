"""Moved to ``payhooks.operations.deliverylog``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import deliverylog
from payhooks.plumbing.moved import moved

moved(__name__, deliverylog)

"""Moved to ``payhooks.operations.alerts``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import alerts
from payhooks.plumbing.moved import moved

moved(__name__, alerts)

"""Moved to ``payhooks.operations.metrics``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import metrics
from payhooks.plumbing.moved import moved

moved(__name__, metrics)

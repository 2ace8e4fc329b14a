"""Moved to ``payhooks.operations.timeline``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import timeline
from payhooks.plumbing.moved import moved

moved(__name__, timeline)

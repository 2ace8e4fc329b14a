"""Moved to ``payhooks.operations.alarms``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import alarms
from payhooks.plumbing.moved import moved

moved(__name__, alarms)

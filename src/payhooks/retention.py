"""Moved to ``payhooks.operations.retention``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.operations import retention
from payhooks.plumbing.moved import moved

moved(__name__, retention)

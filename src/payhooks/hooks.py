"""Moved to ``payhooks.intake.hooks``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import hooks
from payhooks.plumbing.moved import moved

moved(__name__, hooks)

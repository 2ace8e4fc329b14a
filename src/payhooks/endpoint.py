"""Moved to ``payhooks.intake.endpoint``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import endpoint
from payhooks.plumbing.moved import moved

moved(__name__, endpoint)

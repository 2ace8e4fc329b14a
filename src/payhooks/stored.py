"""Moved to ``payhooks.intake.stored``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import stored
from payhooks.plumbing.moved import moved

moved(__name__, stored)

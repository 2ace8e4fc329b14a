"""Moved to ``payhooks.intake.answers``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import answers
from payhooks.plumbing.moved import moved

moved(__name__, answers)

"""Moved to ``payhooks.intake.expectations``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import expectations
from payhooks.plumbing.moved import moved

moved(__name__, expectations)

"""Moved to ``payhooks.intake.confirmations``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import confirmations
from payhooks.plumbing.moved import moved

moved(__name__, confirmations)

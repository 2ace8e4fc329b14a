"""Moved to ``payhooks.intake.payments``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import payments
from payhooks.plumbing.moved import moved

moved(__name__, payments)

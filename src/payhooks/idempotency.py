"""Moved to ``payhooks.intake.idempotency``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.intake import idempotency
from payhooks.plumbing.moved import moved

moved(__name__, idempotency)

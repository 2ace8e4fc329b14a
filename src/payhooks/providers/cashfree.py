"""Moved to ``payhooks.gateways.cashfree``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.gateways import cashfree
from payhooks.plumbing.moved import moved

moved(__name__, cashfree)

"""Moved to ``payhooks.gateways.phonepe``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.gateways import phonepe
from payhooks.plumbing.moved import moved

moved(__name__, phonepe)

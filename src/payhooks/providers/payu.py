"""Moved to ``payhooks.gateways.payu``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.gateways import payu
from payhooks.plumbing.moved import moved

moved(__name__, payu)

"""Moved to ``payhooks.gateways._common``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.gateways import _common
from payhooks.plumbing.moved import moved

moved(__name__, _common)

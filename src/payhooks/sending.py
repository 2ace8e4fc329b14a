"""Moved to ``payhooks.refunding.sending``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing.moved import moved
from payhooks.refunding import sending

moved(__name__, sending)

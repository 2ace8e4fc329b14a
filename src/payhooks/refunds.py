"""Moved to ``payhooks.refunding.refunds``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing.moved import moved
from payhooks.refunding import refunds

moved(__name__, refunds)

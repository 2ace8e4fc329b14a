"""Moved to ``payhooks.plumbing.pools``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing import pools
from payhooks.plumbing.moved import moved

moved(__name__, pools)

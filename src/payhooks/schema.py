"""Moved to ``payhooks.plumbing.schema``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing import schema
from payhooks.plumbing.moved import moved

moved(__name__, schema)

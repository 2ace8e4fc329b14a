"""Moved to ``payhooks.plumbing.db``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.plumbing import db
from payhooks.plumbing.moved import moved

moved(__name__, db)

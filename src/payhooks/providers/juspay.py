"""Moved to ``payhooks.gateways.juspay``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.gateways import juspay
from payhooks.plumbing.moved import moved

moved(__name__, juspay)

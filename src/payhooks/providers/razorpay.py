"""Moved to ``payhooks.gateways.razorpay``; deprecated (``payhooks.plumbing.moved``)."""

from payhooks.gateways import razorpay
from payhooks.plumbing.moved import moved

moved(__name__, razorpay)

"""Simulators: a gateway that signs real-format deliveries, the demo, and ``payhooks storm``.

Installed with ``pip install 'payhooks[sim]'``; they drive the service over HTTP.
"""

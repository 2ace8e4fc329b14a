"""The reference service: the shop's HTTP API and webhook endpoint, the worker, the CLI.

Installed with ``pip install 'payhooks[service]'``; built on the core library one level up.
"""

"""``python -m payhooks``: the ``payhooks`` command."""

from payhooks.cli import main

main()

"""The ``payhooks`` command: a thin shell over the service and the simulators.

The commands live in ``payhooks.cli.commands``; this front door only says clearly when the
library was installed without the extra the command needs (``cli`` or ``service``).
"""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from payhooks.cli.commands import main as run
    except ImportError as exc:  # a bare `pip install payhooks`: the library, not the service
        sys.stderr.write(
            f"payhooks: the command needs an extra ({exc.name} is not installed): "
            "pip install 'payhooks[cli]' to operate your own app's database, or "
            "pip install 'payhooks[service,sim]' for the reference service\n"
        )
        raise SystemExit(1) from exc
    run()

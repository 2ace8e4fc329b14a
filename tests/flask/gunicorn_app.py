"""The example shop as gunicorn imports it: ``tests.flask.gunicorn_app:app``, configured from
the environment as ``examples/flask_shop`` is."""

import os

from examples.flask_shop.app import adapters_from, create_app, engine_from

app = create_app(engine_from(os.environ["DATABASE_URL"]), adapters_from(os.environ))

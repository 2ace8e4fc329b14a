"""The relay: payment events from the outbound queue to a message broker, after commit, and the
consumer's inbox that applies each one once (docs/operations.md, "The relay").

``relaying`` is the loop (``Relay``), broker-agnostic; ``brokers`` the one interface it
publishes through; ``nats`` (the ``nats`` extra: nats-py) and ``rabbitmq`` (the ``rabbitmq``
extra: aio-pika) the two brokers; ``inbox`` the consumer's side, with psycopg alone.
"""

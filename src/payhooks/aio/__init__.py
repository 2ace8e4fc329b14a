"""The async core: the claim on an ``AsyncConnection`` (``claims``), async hooks (``hooks``),
a delivery taken from a pool (``deliveries``) and the reconcile pass applied through async
hooks (``reconcile``). None of it needs a web framework: ``payhooks.fastapi``,
``payhooks.starlette`` and the console build on it, and so can any other framework."""

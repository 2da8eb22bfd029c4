"""The ``masorch`` command line: one module per command, each with a ``register(app)`` function."""

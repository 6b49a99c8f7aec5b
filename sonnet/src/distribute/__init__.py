"""2.0.2's `sonnet.src.distribute` path (see `sonnet.src`)."""

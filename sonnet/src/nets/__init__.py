"""2.0.2's `sonnet.src.nets` path (see `sonnet.src`)."""

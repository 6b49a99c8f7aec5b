"""2.0.2's `sonnet.src.optimizers` path (see `sonnet.src`)."""

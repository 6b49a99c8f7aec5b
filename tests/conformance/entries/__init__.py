"""One file per module family, each defining `CASES` and `NOT_REGISTERED`."""

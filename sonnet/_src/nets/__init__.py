"""Implementation of `snt.nets`."""

"""Implementation of `snt.functional` (a Haiku/JAX-style API on TF2)."""

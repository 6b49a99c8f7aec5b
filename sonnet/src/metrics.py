"""2.0.2's `sonnet.src.metrics` path (see `sonnet.src`)."""

from sonnet._src.metrics import Mean, Metric, Sum

__all__ = ["Mean", "Metric", "Sum"]

"""2.0.2's `sonnet.src.batch_apply` path (see `sonnet.src`)."""

from sonnet._src.batch_apply import BatchApply, merge_leading_dims, split_leading_dim

__all__ = ["BatchApply", "merge_leading_dims", "split_leading_dim"]

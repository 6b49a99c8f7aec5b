"""2.0.2's `sonnet.src.embed` path (see `sonnet.src`)."""

from sonnet._src.embed import Embed, embedding_dim

__all__ = ["Embed", "embedding_dim"]

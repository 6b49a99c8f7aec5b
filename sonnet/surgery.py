"""Model surgery: get, set and replace submodules by path (`"blocks/3/mlp_in"`)."""

from sonnet._src.surgery import find as find
from sonnet._src.surgery import get as get
from sonnet._src.surgery import replace as replace
from sonnet._src.surgery import set as set

__all__ = ["find", "get", "replace", "set"]

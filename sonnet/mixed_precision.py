"""Mixed precision: `snt.mixed_precision.enable`, `disable`, `scope`, `modes`."""

from sonnet._src.mixed_precision import disable as disable
from sonnet._src.mixed_precision import enable as enable
from sonnet._src.mixed_precision import modes as modes
from sonnet._src.mixed_precision import scope as scope

__all__ = ["disable", "enable", "modes", "scope"]

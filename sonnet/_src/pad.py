"""Padding functions for convolutions (`snt.pad`).

A padding function maps the *effective* kernel size of one spatial dimension,
`(kernel - 1) * rate + 1`, to the `[before, after]` amounts of padding. Give
one (or one per spatial dimension) as a convolution's `padding` to pad
explicitly and then run a VALID convolution.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from sonnet._src import checks, errors, utils

__all__ = ["causal", "create", "full", "reverse_causal", "same", "valid"]

Padding = Callable[[int], list[int]]


def valid(effective_kernel_size: int) -> list[int]:
    """No padding: the output only covers positions where the kernel fits.

    The argument is not used (as in the original, any value works).

    >>> snt.pad.valid(3)
    [0, 0]
    """
    del effective_kernel_size  # Unused.
    return [0, 0]


def same(effective_kernel_size: int) -> list[int]:
    """Pads so that (at stride 1) the output has the input's size.

    Odd padding puts the extra element after, as TensorFlow's "SAME" does.

    >>> snt.pad.same(4)
    [1, 2]
    """
    k = checks.whole_size("effective_kernel_size", effective_kernel_size)
    return [(k - 1) // 2, k // 2]


def full(effective_kernel_size: int) -> list[int]:
    """Pads `k - 1` on both sides: every partial overlap gives an output.

    >>> snt.pad.full(3)
    [2, 2]
    """
    k = checks.whole_size("effective_kernel_size", effective_kernel_size)
    return [k - 1, k - 1]


def causal(effective_kernel_size: int) -> list[int]:
    """Pads `k - 1` before: output `t` only sees inputs `<= t`.

    >>> snt.pad.causal(3)
    [2, 0]
    """
    k = checks.whole_size("effective_kernel_size", effective_kernel_size)
    return [k - 1, 0]


def reverse_causal(effective_kernel_size: int) -> list[int]:
    """Pads `k - 1` after: output `t` only sees inputs `>= t`.

    >>> snt.pad.reverse_causal(3)
    [0, 2]
    """
    k = checks.whole_size("effective_kernel_size", effective_kernel_size)
    return [0, k - 1]


def create(
    padding: Padding | Sequence[Padding],
    kernel: int | Sequence[int],
    rate: int | Sequence[int],
    n: int,
    channel_index: int,
) -> list[list[int]]:
    """Builds `tf.pad` paddings for an `n`-D convolution input.

    Args:
      padding: A padding function, or a sequence of 1 or `n` of them (one per
        spatial dimension).
      kernel: Kernel size, or a sequence of 1 or `n` sizes.
      rate: Dilation rate, or a sequence of 1 or `n` rates.
      n: Number of spatial dimensions.
      channel_index: 1 for channels-first inputs, -1 (or `n + 1`) for
        channels-last ones.

    Returns:
      A list of `n + 2` `[before, after]` pairs: `[0, 0]` for the batch and
      channel dimensions and the padding function's result (applied to the
      effective kernel size `(kernel - 1) * rate + 1`) for each spatial one.

    >>> snt.pad.create([snt.pad.causal, snt.pad.full], 3, 1, 2, -1)
    [[0, 0], [2, 0], [2, 2], [0, 0]]
    >>> snt.pad.create(snt.pad.same, 4, 3, 2, 1)
    [[0, 0], [0, 0], [4, 5], [4, 5]]
    """
    n = checks.size("n", n, allow_zero=True)
    # The original failed with `TypeError`s on malformed sizes and paddings.
    kernels = _sizes("kernel", kernel, n)
    rates = _sizes("rate", rate, n)
    paddings = utils.replicate(padding, n, "padding")
    channels_first = _channels_first(channel_index, n)
    result: list[list[int]] = []
    for fn, k, r in zip(paddings, kernels, rates, strict=True):
        if not callable(fn):
            raise errors.bad_type(
                "padding", "must be a padding function such as snt.pad.same", fn
            )
        result.append(list(fn((k - 1) * r + 1)))
    if channels_first:
        return [[0, 0], [0, 0], *result]
    return [[0, 0], *result, [0, 0]]


def _sizes(argument: str, value: Any, n: int) -> tuple[int, ...]:
    """A size or a sequence of 1 or `n` sizes, as a tuple of `n` ints.

    A string or None is a `TypeError` (as in the original's arithmetic); a
    1-D array or tensor is refused too: the original gave every spatial
    dimension the paddings of all of them.
    """
    if value is None or isinstance(value, (str, bytes)):
        raise errors.bad_type(
            argument, "must be a positive integer or a sequence", value
        )
    values = utils.replicate(value, n, argument)
    return tuple(checks.whole_size(argument, v) for v in values)


def _channels_first(channel_index: Any, n: int) -> bool:
    """Whether `channel_index` (1, or -1 / `n + 1` for the last axis) is 1.

    The original tested only `channel_index == 1` and padded every other
    value as channels-last, which is wrong for any other axis; those are
    refused.
    """
    index = checks.as_index(channel_index)
    if index is None and not isinstance(channel_index, (str, bytes)):
        # Whole floats (3.0), as the original's comparison took them.
        with contextlib.suppress(errors.InvalidArgumentError):
            index = checks.whole_size("channel_index", channel_index)
    if index is None:
        raise errors.bad_type(
            "channel_index", f"must be 1, -1 or {n + 1} (an integer)", channel_index
        )
    # Without spatial dimensions every channel axis gives the same result.
    if index not in (1, -1, n + 1) and n:
        raise errors.bad_value(
            "channel_index",
            f"must be 1 (channels first), -1 or {n + 1} (channels last)",
            channel_index,
        )
    return index == 1

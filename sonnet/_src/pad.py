"""Padding functions for convolutions (`snt.pad`).

A padding function maps the *effective* kernel size of one spatial dimension,
`(kernel - 1) * rate + 1`, to the `[before, after]` amounts of padding. Give
one (or one per spatial dimension) as a convolution's `padding` to pad
explicitly and then run a VALID convolution.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sonnet._src import checks, utils

__all__ = ["causal", "create", "full", "reverse_causal", "same", "valid"]

Padding = Callable[[int], list[int]]


def valid(effective_kernel_size: int) -> list[int]:
    """No padding: the output only covers positions where the kernel fits.

    >>> snt.pad.valid(3)
    [0, 0]
    """
    checks.size("effective_kernel_size", effective_kernel_size)
    return [0, 0]


def same(effective_kernel_size: int) -> list[int]:
    """Pads so that (at stride 1) the output has the input's size.

    Odd padding puts the extra element after, as TensorFlow's "SAME" does.

    >>> snt.pad.same(4)
    [1, 2]
    """
    k = checks.size("effective_kernel_size", effective_kernel_size)
    return [(k - 1) // 2, k // 2]


def full(effective_kernel_size: int) -> list[int]:
    """Pads `k - 1` on both sides: every partial overlap gives an output.

    >>> snt.pad.full(3)
    [2, 2]
    """
    k = checks.size("effective_kernel_size", effective_kernel_size)
    return [k - 1, k - 1]


def causal(effective_kernel_size: int) -> list[int]:
    """Pads `k - 1` before: output `t` only sees inputs `<= t`.

    >>> snt.pad.causal(3)
    [2, 0]
    """
    k = checks.size("effective_kernel_size", effective_kernel_size)
    return [k - 1, 0]


def reverse_causal(effective_kernel_size: int) -> list[int]:
    """Pads `k - 1` after: output `t` only sees inputs `>= t`.

    >>> snt.pad.reverse_causal(3)
    [0, 2]
    """
    k = checks.size("effective_kernel_size", effective_kernel_size)
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
      channel_index: 1 for channels-first inputs, -1 for channels-last.

    Returns:
      A list of `n + 2` `[before, after]` pairs: `[0, 0]` for the batch and
      channel dimensions and the padding function's result (applied to the
      effective kernel size `(kernel - 1) * rate + 1`) for each spatial one.

    >>> snt.pad.create([snt.pad.causal, snt.pad.full], 3, 1, 2, -1)
    [[0, 0], [2, 0], [2, 2], [0, 0]]
    >>> snt.pad.create(snt.pad.same, 4, 3, 2, 1)
    [[0, 0], [0, 0], [4, 5], [4, 5]]
    """
    n = checks.size("n", n)
    if (
        isinstance(channel_index, (bool, np.bool_))
        or not isinstance(channel_index, (int, np.integer))
        or channel_index not in (1, -1)
    ):
        raise utils.bad_value("channel_index", "must be 1 or -1", channel_index)
    paddings = utils.replicate(padding, n, "padding")
    kernels = utils.replicate(kernel, n, "kernel")
    rates = utils.replicate(rate, n, "rate")
    result: list[list[int]] = []
    for fn, k, r in zip(paddings, kernels, rates, strict=True):
        if not callable(fn):
            raise utils.bad_type(
                "padding", "must be a padding function such as snt.pad.same", fn
            )
        k = checks.size("kernel", k)
        r = checks.size("rate", r)
        result.append(list(fn((k - 1) * r + 1)))
    if channel_index == 1:
        return [[0, 0], [0, 0], *result]
    return [[0, 0], *result, [0, 0]]

"""Sonnet 2.0.2's internal import paths (`sonnet.src.*`), kept for code written
against them.

Code that imported 2.0.2's modules by their internal paths (custom optimizers
built on `sonnet.src.optimizers.adam.adam_update` and
`sonnet.src.optimizers.optimizer_utils`, type hints from `sonnet.src.types`,
modules from `sonnet.src.linear`, ...) runs unchanged: each module here names
the same objects as the public API (`snt.Linear is
sonnet.src.linear.Linear`), plus the few helpers 2.0.2 kept there. Not an API
of its own: new code should use `snt.*`. 2.0.2's deeper internals (name-scope
wrappers, `CuDNNGRU`) are not provided; the DNC's building blocks
(`sonnet.src.nets.dnc`, which 2.0.2 never exported) and `ParallelLinears`
(`sonnet.src.parallel_linear`) are.
"""

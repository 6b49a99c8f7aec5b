"""Recurrent cores, their wrappers and the functions that unroll them over time.

`base` holds the abstract `RNNCore`/`UnrolledRNN`, `LSTMState` and the checks
every core shares; each concrete core or wrapper lives in its own file.
"""

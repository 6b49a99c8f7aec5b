"""Sonnet optimizers: SGD, Momentum, Adam and RMSProp as `snt.Optimizer`s."""

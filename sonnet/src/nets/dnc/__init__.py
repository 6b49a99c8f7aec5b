"""2.0.2's `sonnet.src.nets.dnc` path: the Differentiable Neural Computer's
building blocks (controllers, memory reads and writes, helpers), which 2.0.2
kept here without exporting them (see `sonnet.src`)."""

"""Deliberate differences from 2.0.2 in the recurrent family (see `expectations`)."""

from __future__ import annotations

ALLOWED: dict[str, tuple[str, str]] = {
    # The original iterates `layers` twice, so a generator gives a DeepRNN
    # without layers (outputs = inputs); we keep the layers.
    "recurrent/DeepRNN(layers=generator)": ("fixed", "generator layers dropped"),
}

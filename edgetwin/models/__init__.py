"""Pure models (layer 2): no I/O, no SimPy, no torch."""

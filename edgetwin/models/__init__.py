"""Pure models the twin and the real code share (layer 2: no I/O, no SimPy, no torch):
cost plans, layouts, the strategy registry, the crowd decision core."""

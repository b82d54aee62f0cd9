"""Experiments that score the policies: against the twin, the emulator and the offline optimum."""

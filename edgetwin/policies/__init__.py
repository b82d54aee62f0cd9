"""Policies: scheduling and selection, shared by the twin and the real code paths."""

"""What-if questions answered by sweeps in the twin (``edgetwin plan``); see docs/plan.md."""

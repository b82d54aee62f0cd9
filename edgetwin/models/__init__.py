"""Pure models the twin and the real code share: cost plans, layouts, the strategy registry."""

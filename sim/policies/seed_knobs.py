"""The seed engine's grid knobs: the settings the lanes (``sim.engine.fast.seed_grid``,
``sim.engine.fast.seed_lanes``) replay together. Every other knob must be the same across a grid's
settings; these two only move where the prune bound and the summary cut sit. Held here, apart from the
policy, because this module loads nothing (no numpy): a sweep's resume path groups chunks by them
without importing the engine.
"""

GRID_KNOBS = ("context_token_limit", "keep_recent_tokens")

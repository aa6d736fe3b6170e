"""Context-management policies: one module per policy, registered by name in ``sim.policies.base``."""

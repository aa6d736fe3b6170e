"""Embedded scenarios: seeded synthetic traces so policies can be compared without recorded data."""

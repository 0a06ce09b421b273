"""dpsieve.filters (see docs/architecture.md)."""

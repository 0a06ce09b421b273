"""dpsieve.robust (see docs/architecture.md)."""

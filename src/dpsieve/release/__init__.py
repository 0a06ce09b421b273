"""dpsieve.release (see docs/architecture.md)."""

"""dpsieve.service (see docs/architecture.md)."""

"""dpsieve.mechanisms (see docs/architecture.md)."""

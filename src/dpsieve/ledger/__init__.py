"""dpsieve.ledger (see docs/architecture.md)."""

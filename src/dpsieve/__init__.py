"""dpsieve: differential privacy with exact, adaptive privacy accounting.

Importing the package has no side effects. Layers (imports flow downwards only)::

    session / service / cli        what users touch (I/O)
    ledger, queries                budget stores; query plans, schemas, engines (read data)
    interactive                    children: sparse vector, continual counter, answer cache
    release, robust                query release; Propose-Filter-Release
    training                       DP-SGD accountant, calibration, adapters
    filters                        residue and natural filters, auditor, training filters
    mechanisms                     samplers with known privacy
    accounting                     PLDs, curves, Blackwell order, closed-form families
    errors, _validation, _rounding exception tree, parameter checks, directed rounding

(docs/architecture.md; tests/test_architecture.py checks the imports.)
"""

from __future__ import annotations

from typing import Any

from dpsieve.errors import (
    BudgetExceededError,
    ConcurrencyError,
    DPError,
    IncompatiblePrivacyError,
    LedgerError,
    NeighbourRelationError,
    NumericalError,
    UnsupportedError,
    ValidationError,
)

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Lazy exports: ``dpsieve.Session`` imports the session layer only when used."""
    if name == "Session":
        from dpsieve.session import Session

        return Session
    raise AttributeError(f"module 'dpsieve' has no attribute {name!r}")


__all__ = [
    "BudgetExceededError",
    "ConcurrencyError",
    "DPError",
    "IncompatiblePrivacyError",
    "LedgerError",
    "NeighbourRelationError",
    "NumericalError",
    "Session",
    "UnsupportedError",
    "ValidationError",
    "__version__",
]

"""The budget-store protocol every ledger backend implements, and its value objects.

A ledger keeps, per budget, the exact ``to_json()`` state of a privacy filter
(:class:`dpsieve.filters.base.PrivacyFilter`), the admitted spends keyed by idempotency key,
and an append-only audit log. Its one promise about privacy:

* **Check-and-spend is one transaction.** :meth:`BudgetStore.spend` loads the filter state,
  asks the filter, writes the new state, the spend row and the audit rows, and commits,
  all while holding the budget's write lock. Two concurrent spends on one budget are
  serialised, so the filter sees every admitted query (no overspend under any interleaving).
* **Durable before released.** The caller computes and releases an answer only after
  ``spend`` returned (the commit is on disk). A crash between spend and answer loses the
  answer, never the charge: the charge errs on the side of privacy.
* **A key is charged once.** A second ``spend`` with the same idempotency key and the same
  request is a *replay*: nothing is charged, and the stored answer (if any) is returned.
  :meth:`BudgetStore.record_answer` is first-writer-wins, so concurrent replays of an
  unanswered spend still release one answer only. Reusing a key for a different request
  raises :class:`IdempotencyKeyReuseError`.

Registry (data sets, principals, API-key hashes, grants) lives in the same store so a
service needs one database.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from dpsieve.errors import LedgerError
from dpsieve.filters.base import BudgetLeft, Cost, Decision, PrivacyFilter
from dpsieve.filters.charge import Charge

__all__ = [
    "AuditEvent",
    "BudgetNotFoundError",
    "BudgetStore",
    "FilterLoader",
    "IdempotencyKeyReuseError",
    "KeyRevokedError",
    "LedgerIntegrityError",
    "LedgerUnavailableError",
    "Principal",
    "SpendOutcome",
    "SpendRecord",
    "canonical_json",
    "fingerprint",
    "has_budget",
    "left_json",
    "load_filters",
    "note_committed",
    "query_to_dict",
    "refusal_record",
    "spend_journal",
    "spend_key",
    "utcnow",
]

FilterLoader = Callable[[str], PrivacyFilter]

_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encode_str: Any = getattr(json.encoder, "c_encode_basestring_ascii", None)


class IdempotencyKeyReuseError(LedgerError):
    """An idempotency key was sent again with a different request; nothing was spent."""


#: The API-key hash a spend is made with (set by the service around a query): checked
#: inside the spend's transaction, so no spend with a key commits after its revocation did.
spend_key: ContextVar[str | None] = ContextVar("dpsieve_spend_key", default=None)


#: Set by a caller around a spend (the service, per query): the ledger appends
#: ``"committed"`` once the spend's transaction committed, so a failure after it (storing
#: the answer, reading the budget) is known to come after the charge, never reported as
#: "nothing was spent".
spend_journal: ContextVar[list[str] | None] = ContextVar("dpsieve_spend_journal",
                                                         default=None)


def note_committed() -> None:
    """Record in :data:`spend_journal` (if set) that a spend committed."""
    journal = spend_journal.get()
    if journal is not None:
        journal.append("committed")


class KeyRevokedError(LedgerError):
    """The spend's API key was revoked (committed before this spend); nothing was spent."""


class LedgerUnavailableError(LedgerError):
    """The ledger cannot be reached or cannot commit (PostgreSQL refusing connections, a
    read-only or full SQLite file); nothing was spent. ``cannot_write`` tells the two apart.

    The message names the database with its password withheld
    (:func:`dpsieve.ledger.redact.redact`); the service answers 503 without it.
    """

    def __init__(self, message: str, *, cannot_write: bool = False,
                 uncertain: bool = False) -> None:
        super().__init__(message)
        self.cannot_write = cannot_write
        #: the failure came at the commit of a write: it may have landed or not
        self.uncertain = uncertain


class LedgerIntegrityError(LedgerError):
    """A budget's stored state or audit log fails verification (its hash chain is broken,
    or its state is not the replay of its log: :mod:`dpsieve.ledger.chain`); nothing is
    served from that budget and nothing was spent."""

    def __init__(self, budget_id: str, problem: str) -> None:
        self.budget_id, self.problem = budget_id, problem
        what = f"budget {budget_id!r}" if budget_id else "the log of key revocations"
        super().__init__(
            f"The ledger's record of {what} fails verification: {problem}. Nothing is "
            "served from it until the data owner restores it (dpsieve budget verify).")


class BudgetNotFoundError(LedgerError, KeyError):
    """No budget (or data set, principal) with that identifier; nothing was spent."""

    def __str__(self) -> str:  # KeyError would otherwise print the repr of the message
        return str(self.args[0]) if self.args else "not found"


@dataclass(frozen=True, slots=True)
class SpendOutcome:
    """What :meth:`BudgetStore.spend` did.

    ``replayed`` is True when the key had been admitted before: nothing was charged now and
    ``decision`` is the stored one; ``answer`` is the released answer if there was one (a
    replay of a spend whose answer was lost to a crash has ``answer is None``).
    """

    key: str
    decision: Decision
    replayed: bool = False
    answer: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class SpendRecord:
    """One admitted spend, in admission order.

    ``seq`` is the budget's own sequence number (1, 2, ... in admission order), never a
    number shared across budgets: gaps in a shared counter would reveal activity on data
    sets the reader cannot see. ``cost`` and ``remaining`` are the
    decision's typed values (their ``to_dict()`` is the stored JSON).
    """

    seq: int
    key: str
    principal: str
    cost: Cost
    remaining: BudgetLeft
    request: dict[str, Any]
    created_at: str
    answered: bool


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One row of the append-only audit log."""

    seq: int
    ts: str
    budget_id: str
    principal: str
    event: str
    key: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Principal:
    """A data owner (``role == "owner"``) or an analyst (``role == "analyst"``)."""

    name: str
    role: str


@runtime_checkable
class BudgetStore(Protocol):
    """Structural type of a ledger backend (memory, SQLite, PostgreSQL)."""

    def create_budget(self, budget_id: str, flt: PrivacyFilter, *, replace: bool = False) -> None:
        """Store a fresh filter; ``replace`` only while no spend has been admitted."""
        ...

    def load_filter(self, budget_id: str) -> PrivacyFilter:
        """Rebuild the current filter (read-only snapshot)."""
        ...

    def initial_filter(self, budget_id: str) -> PrivacyFilter:
        """Rebuild the filter as it was created (the full budget)."""
        ...

    def spend(
        self,
        budget_id: str,
        query: Charge,
        *,
        key: str,
        principal: str = "",
        request: dict[str, Any] | None = None,
    ) -> SpendOutcome:
        """Check and spend in one durable transaction (see module docstring). ``query`` is
        a typed charge; a dict raises :class:`~dpsieve.errors.ChargeTypeError`, nothing
        spent."""
        ...

    def record_answer(self, budget_id: str, key: str, answer: dict[str, Any]) -> dict[str, Any]:
        """Store the answer of an admitted spend, first writer wins; return the stored one."""
        ...

    def history(self, budget_id: str) -> list[SpendRecord]:
        """Admitted spends in admission order."""
        ...

    def audit(self, budget_id: str | None = None) -> list[AuditEvent]:
        """The audit log (optionally for one budget), in order."""
        ...

    def budget_ids(self) -> list[str]:
        """All budget identifiers, sorted."""
        ...

    # -- registry ---------------------------------------------------------------------
    def add_principal(self, name: str, role: str, key_hash: str) -> None:
        """Create a principal with one API-key hash (or add a key to an existing one)."""
        ...

    def principal_for_key(self, key_hash: str) -> Principal | None:
        """The principal owning an API-key hash, or None."""
        ...

    def register_dataset(self, name: str, source: dict[str, Any]) -> None:
        """Register (or re-point) a data set; its budget id is ``name``."""
        ...

    def dataset(self, name: str) -> dict[str, Any] | None:
        """The stored source description of a data set, or None."""
        ...

    def datasets(self) -> list[str]:
        """All data-set names, sorted."""
        ...

    def grant(self, principal: str, dataset: str) -> None:
        """Let an analyst query a data set (idempotent)."""
        ...

    def grants(self, principal: str) -> list[str]:
        """Data sets the principal may query, sorted."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def has_budget(store: BudgetStore, budget_id: str) -> bool:
    """Whether ``store`` holds a budget named ``budget_id``: the store's own ``has_budget``
    (no filter parsed) if it has one, else whether :meth:`BudgetStore.load_filter`
    finds it."""
    has = getattr(store, "has_budget", None)
    if callable(has):
        return bool(has(budget_id))
    try:
        store.load_filter(budget_id)
    except BudgetNotFoundError:
        return False
    return True


def left_json(flt: PrivacyFilter) -> dict[str, Any]:
    """The JSON of ``flt.remaining()`` for the audit log (``budget_set`` rows, unchanged
    bytes). A :class:`BudgetLeft`; a filter written to the protocol before it was typed
    still states a dict, read as it was (``BudgetLeft`` copies either)."""
    return BudgetLeft(flt.remaining()).to_dict()


def load_filters(store: BudgetStore, budget_id: str) -> tuple[PrivacyFilter, PrivacyFilter]:
    """The budget's (current, initial) filters, for reading only (never spend on them):
    the store's ``load_filters`` (one transaction; the initial filter may be an object
    shared between calls, see :func:`dpsieve.ledger.loaders.parsed_initial`) if it has
    one, else :meth:`~BudgetStore.load_filter` then :meth:`~BudgetStore.initial_filter`."""
    both = getattr(store, "load_filters", None)
    if callable(both):
        cur, init = both(budget_id)
        return cur, init
    return store.load_filter(budget_id), store.initial_filter(budget_id)


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace); NaN and infinities are refused.

    ``json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)``, the same
    text, made by the C encoder directly (``dumps`` with options builds a
    ``JSONEncoder`` in Python on every call; several texts are made per spend). A fresh
    ``markers`` dict per call keeps the circular-reference check exact."""
    if _c_make_encoder is None or _c_encode_str is None:  # pragma: no cover - CPython
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "".join(_c_make_encoder({}, _not_json, _c_encode_str, None, ":", ",", True,
                                   False, False)(obj, 0))


def _not_json(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


#: A refused request's record keeps at most this many characters of its canonical JSON.
REFUSAL_RECORD_CHARS = 2048


def refusal_record(request: Any, text: str, fp: str) -> str:
    """The audit payload of a refused request, bounded: the request itself when its
    canonical JSON ``text`` has at most :data:`REFUSAL_RECORD_CHARS` characters, else its
    first characters (``excerpt``, a string); always its SHA-256 (``fp``) and size."""
    if len(text) <= REFUSAL_RECORD_CHARS:
        return ('{"request":' + text + ',"request_bytes":' + str(len(text.encode()))
                + ',"request_sha256":"' + fp + '"}')
    return canonical_json({"excerpt": text[:REFUSAL_RECORD_CHARS],
                           "request_bytes": len(text.encode()), "request_sha256": fp,
                           "truncated": True})


def fingerprint(request: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a request: binds an idempotency key to its request."""
    return hashlib.sha256(canonical_json(request).encode()).hexdigest()


def query_to_dict(query: Charge) -> dict[str, Any]:
    """A JSON-ready description of a query (a PLD or a privacy description): the audit
    log's request when the caller gives none (a PLD in full)."""
    to_dict = getattr(query, "to_dict", None)
    if callable(to_dict):
        d = to_dict()
        if isinstance(d, dict):
            safe: dict[str, Any] = _json_safe(d)
            return safe
    return {"repr": repr(query)}


def _json_safe(obj: Any) -> Any:
    """Replace non-finite floats by strings so the audit log stays strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    return obj


def utcnow() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")

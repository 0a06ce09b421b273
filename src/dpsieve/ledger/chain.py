"""The audit log as a hash chain, and the budget state as a function of it (no I/O here).

Each budget's audit rows form a chain (rows of no budget, e.g. key revocations, form the
chain of ``""``): row ``n`` stores its position ``n``, the hash of row ``n - 1``
(``prev``) and its own hash, SHA-256 over the position, ``prev`` and every stored field
(:func:`row_hash`). A row edited, deleted, inserted or moved breaks the chain at that
point, whoever wrote the database, unless every later hash is recomputed too; the chain's
head (``dpsieve budget verify`` prints it) copied elsewhere detects even that, as the
signed tree heads of certificate-transparency logs do.

The budget's state is a function of its chain. A ``budget_set`` row carries the filter's
full initial state; an admitted ``decision`` row carries the charge in full and the
SHA-256 of the filter's state after it. :class:`Replay` re-runs every admitted charge
through the filter from the last ``budget_set`` and requires: each admitted spend
admitted again, each resulting state's hash as logged, no ``budget_set`` after an
admitted spend (a budget is never reset), and at the end the stored state, initial
state and spend count equal the replay's. The check errs towards refusing: a state that
replays differently is treated as tampered, never served.

Rows written before the chain existed (a ledger migrated from schema version 2) carry no
position: they are bound by one digest (:func:`legacy_step` over them in order), which
the first chained row, ``chain_start``, takes as its ``prev``, with the state the ledger
held at the migration (trusted as of then; every change after it is replayed).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsieve.blocks.currency import used_fraction_of_states
from dpsieve.blocks.unlock import unlock_from_dict
from dpsieve.errors import DPError
from dpsieve.filters.base import PrivacyFilter
from dpsieve.filters.charge import Charge, charge_from_dict

if TYPE_CHECKING:
    from dpsieve.accounting.pld import PLD
    from dpsieve.filters.per_record import RecordStep
    from dpsieve.mechanisms.subsampled import DPSGDStep

__all__ = ["GENESIS", "ChainBroken", "ChainRow", "Checkpoint", "Replay", "decode_charge",
           "encode_charge", "legacy_step", "row_hash", "state_sha"]

#: The ``prev`` of a chain's first row (when no legacy rows precede it).
GENESIS = "0" * 64
_V = "dpsieve-audit-v1"


class ChainBroken(Exception):  # noqa: N818 - a verdict, raised to stop the replay
    """The chain or the state it implies is inconsistent (the message says where)."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _digest(*parts: str | int | None) -> str:
    """SHA-256 over ``parts``, each length-prefixed (``None`` apart from ``""``), so no
    two sequences of fields hash alike."""
    h = hashlib.sha256()
    for p in parts:
        if p is None:
            h.update(b"\x00")
            continue
        b = str(p).encode("utf-8")
        h.update(b"\x01" + len(b).to_bytes(8, "big"))
        h.update(b)
    return h.hexdigest()


def row_hash(prev: str, n: int, ts: str, budget_id: str, principal: str, event: str,
             key: str, payload: str, replay: str | None) -> str:
    """The hash of a chained row: every stored field, its position and its predecessor."""
    return _digest(_V, prev, n, ts, budget_id, principal, event, key, payload, replay)


def legacy_step(digest: str, seq: int, ts: str, budget_id: str, principal: str, event: str,
                key: str, payload: str) -> str:
    """The digest of the rows written before the chain, extended by one row."""
    return _digest(_V + "-legacy", digest, seq, ts, budget_id, principal, event, key,
                   payload)


def state_sha(state: str) -> str:
    """The SHA-256 of a filter's stored state text."""
    return _sha(state)


@functools.cache
def _charge_kinds() -> tuple[type[PLD], type[DPSGDStep], type[RecordStep]]:
    """The charge classes stored specially, imported on first use (not with the ledger),
    then kept (not imported again on every spend)."""
    from dpsieve.accounting.pld import PLD
    from dpsieve.filters.per_record import RecordStep
    from dpsieve.mechanisms.subsampled import DPSGDStep

    return PLD, DPSGDStep, RecordStep


def encode_charge(q: Charge) -> dict[str, Any]:
    """A charge in full, as JSON (a PLD's probabilities, a record step's norms): what a
    replay needs to charge it again."""
    pld, sgd, rec = _charge_kinds()
    if isinstance(q, pld):
        return q.to_dict()
    if isinstance(q, sgd):
        return {"type": "dpsgd_step", "sigma": q.sigma, "rate": q.rate, "sampling": q.sampling}
    if isinstance(q, rec):
        norms = np.asarray(q.norms, dtype="<f8").tobytes()
        return {"type": "record_step", "noise_std": q.noise_std,
                "norms": base64.b64encode(norms).decode("ascii"),
                "expected_step": q.expected_step}
    return q.to_dict()


def decode_charge(d: dict[str, Any]) -> Charge:
    """Inverse of :func:`encode_charge`."""
    from dpsieve.filters.per_record import RecordStep
    from dpsieve.mechanisms.subsampled import DPSGDStep

    t = d.get("type")
    if t == "dpsgd_step":
        return DPSGDStep(float(d["sigma"]), float(d["rate"]), str(d["sampling"]))
    if t == "record_step":
        norms = np.frombuffer(base64.b64decode(d["norms"]), dtype="<f8").astype(np.float64)
        return RecordStep(float(d["noise_std"]), norms, d.get("expected_step"))
    return charge_from_dict(d)


@dataclass(frozen=True, slots=True)
class ChainRow:
    """One stored audit row as the chain sees it (``payload``/``chain_data``: stored texts)."""

    seq: int
    ts: str
    budget_id: str
    principal: str
    event: str
    key: str
    payload: str
    n: int | None
    prev: str | None
    hash: str | None
    replay: str | None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A verified position of one chain: its last row and the state the replay reached."""

    seq: int
    n: int
    head: str
    state: str | None
    initial: str | None
    admitted: int


@dataclass(slots=True)
class Replay:
    """Reads one chain's rows in ``seq`` order (from ``start``, a verified checkpoint, or
    from the beginning) and raises :class:`ChainBroken` at the first inconsistency.
    ``spends`` (key -> (decision seq, SHA-256 of the decision text; None before the
    chain)) collects
    every admitted spend when read from the beginning, for the check against the spends
    table."""

    budget_id: str
    loads: Callable[[str], PrivacyFilter]
    start: Checkpoint | None = None
    seq: int = 0
    n: int = 0
    head: str = GENESIS
    state: str | None = None
    initial: str | None = None
    admitted: int = 0
    legacy_rows: int = 0
    spends: dict[str, tuple[int, str | None]] = field(default_factory=dict)
    #: read from the beginning: each admitted multi-budget spend's budgets, by key
    txns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: a block's unlocking policy and arrival time (its budget_set row), and the distinct
    #: arrivals so far: read from the beginning, every admission is re-checked against
    #: what was unlocked when the ledger decided it
    unlock: dict[str, Any] | None = None
    created: str | None = None
    arrived: set[str] = field(default_factory=set)
    _flt: PrivacyFilter | None = None

    def __post_init__(self) -> None:
        s = self.start
        if s is not None:
            self.seq, self.n, self.head = s.seq, s.n, s.head
            self.state, self.initial, self.admitted = s.state, s.initial, s.admitted

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.seq, self.n, self.head, self.state, self.initial,
                          self.admitted)

    def feed(self, row: ChainRow) -> None:
        """Check one row and apply it to the replayed state."""
        at = f"audit row {row.seq}"
        if row.n is None:
            if self.n > 0:
                raise ChainBroken(f"{at} has no chain position after the chain began "
                                  "(a row inserted)")
            self.head = legacy_step(self.head, row.seq, row.ts, row.budget_id, row.principal,
                                    row.event, row.key, row.payload)
            self.legacy_rows += 1
            self.seq = row.seq
            if row.event == "decision" and _admitted(row.payload):
                self.spends[row.key] = (row.seq, None)
            return
        if row.n != self.n + 1:
            raise ChainBroken(f"{at} is at chain position {row.n} after {self.n} (a row "
                              "deleted, inserted or moved)")
        if row.prev != self.head:
            raise ChainBroken(f"{at} does not follow the row before it (a row deleted, "
                              "inserted or moved)")
        if row.hash != row_hash(self.head, row.n, row.ts, row.budget_id, row.principal,
                                row.event, row.key, row.payload, row.replay):
            raise ChainBroken(f"{at} does not match its hash (a row edited)")
        self.seq, self.n, self.head = row.seq, row.n, row.hash
        try:
            self._apply(row, json.loads(row.replay) if row.replay else {})
        except (DPError, KeyError, TypeError, ValueError) as e:
            raise ChainBroken(f"{at} ({row.event}) cannot be replayed "
                              f"({type(e).__name__})") from None

    def _apply(self, row: ChainRow, rep: dict[str, Any]) -> None:
        at = f"audit row {row.seq}"
        if row.event == "chain_start":
            if row.n != 1:
                raise ChainBroken(f"{at} starts the chain at position {row.n}")
            if int(rep.get("legacy_rows", 0)) != self.legacy_rows:
                raise ChainBroken(f"{at} binds {rep.get('legacy_rows')} earlier rows; "
                                  f"{self.legacy_rows} are there")
            self.state, self.initial = rep.get("state"), rep.get("initial")
            self.admitted, self._flt = int(rep.get("n_spends", 0)), None
        elif row.n == 1 and self.legacy_rows:
            raise ChainBroken(f"{at} begins the chain without binding the earlier rows")
        elif row.event == "budget_set":
            if self.admitted:
                raise ChainBroken(f"{at} sets the budget again after {self.admitted} "
                                  "admitted spends (a budget reset)")
            self.state = self.initial = str(rep["state"])
            self._flt = None
            self.unlock, self.created = rep.get("unlock"), rep.get("created_at")
        elif row.event == "arrival":
            self.arrived.add(str(json.loads(row.payload)["who"]))
        elif row.event == "decision" and _admitted(row.payload):
            self._spend(row, rep)
        elif row.event == "answer" and self.start is None and row.key not in self.spends:
            raise ChainBroken(f"{at} answers the key {row.key!r}, which no admitted spend "
                              "of this budget has")

    def _spend(self, row: ChainRow, rep: dict[str, Any]) -> None:
        at = f"audit row {row.seq}"
        if self.state is None:
            raise ChainBroken(f"{at} admits a spend before any budget was set")
        if "charge" not in rep:
            raise ChainBroken(f"{at} admits a spend without its charge")
        charge = decode_charge(rep["charge"])
        flt = self._flt if self._flt is not None else self.loads(self.state)
        if not flt.try_spend(charge).admitted:
            raise ChainBroken(f"{at} admits a spend that the budget refuses on replay")
        new = flt.to_json()
        if state_sha(new) != rep.get("state_sha256"):
            # the filter kept in memory may differ from one read from text: re-read once
            flt = self.loads(self.state)
            flt.try_spend(charge)
            new = flt.to_json()
            if state_sha(new) != rep.get("state_sha256"):
                raise ChainBroken(f"{at}: the state after this spend is not the replay's")
        if self.start is None:
            self._unlocked(row, rep, new)
        self.state, self._flt = new, flt
        self.admitted += 1
        if self.start is None:
            self.spends[row.key] = (row.seq, _sha(row.payload))
            txn = rep.get("txn")
            if isinstance(txn, dict):
                self.txns[row.key] = tuple(str(b) for b in txn["budgets"])

    def _unlocked(self, row: ChainRow, rep: dict[str, Any], new: str) -> None:
        """A block's admission within what was unlocked when the ledger decided it (the
        time its transaction states, else the row's)."""
        if not self.unlock or self.unlock.get("type", "none") == "none" or not self.created:
            return
        txn = rep.get("txn")
        at = float(txn["at"]) if isinstance(txn, dict) and "at" in txn else \
            datetime.fromisoformat(row.ts).timestamp()
        age = at - datetime.fromisoformat(self.created).timestamp()
        unlocked = unlock_from_dict(self.unlock).unlocked(age, len(self.arrived))
        if used_fraction_of_states(new, str(self.initial)) > unlocked:
            raise ChainBroken(f"audit row {row.seq} admits a spend beyond what its block "
                              "had unlocked")

    def finish(self, state: str | None, initial: str | None, n_spends: int | None) -> None:
        """Compare the stored budget row (None: not a budget) with the replay."""
        if state is None:
            if self.state is not None:
                raise ChainBroken("its log sets a budget the ledger does not hold")
            return
        if self.state is None:
            raise ChainBroken("its log never set it (no budget_set row)")
        if state != self.state:
            raise ChainBroken("its stored state is not the replay of its audit log "
                              "(the state was reset or edited)")
        if initial != self.initial:
            raise ChainBroken("its stored initial budget is not the one its log set")
        if n_spends != self.admitted:
            raise ChainBroken(f"it counts {n_spends} admitted spends; its log admits "
                              f"{self.admitted}")


def _admitted(payload: str) -> bool:
    try:
        d = json.loads(payload)
    except ValueError:
        return False
    return isinstance(d, dict) and d.get("admitted") is True

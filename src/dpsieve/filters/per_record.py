"""Per-record (individual) filters for full-batch Gaussian training steps, vectorised.

A full-batch step releases sum_i g_i + N(0, s^2 I) with ||g_i|| <= c_i, where c_i is record
i's clipped gradient norm at this step (chosen from the public model and x_i). Against
removing or adding record i the step is exactly G_{c_i / s}; the sequence of these costs is
predictable (a function of past outputs and of x_i), so by fully adaptive GDP composition
(Smith & Thakurta 2022; Koskela, Tobaben & Honkela 2023, arXiv 2209.15596) record i keeps a
mu-GDP guarantee as long as its own sum of (c_{t,i} / s_t)^2 stays <= mu^2. The Renyi
variant is Feldman & Zrnic (2021, arXiv 2008.11193): cost alpha c^2 / (2 s^2) at each order.

* :class:`PerRecordGDPFilter` -- record i pays (c_i / s)^2 from mu^2 (``for_target`` takes the
  largest mu with G_mu <= R_{eps, delta}: by the paper's Sec. 6.2 the natural filter is free
  for GDP queries under *any* budget, so for Gaussian steps every residue filter we have --
  GDP residue, natural with an (eps, delta) budget -- reduces to this one; nothing is lost);
* :class:`PerRecordRDPFilter` -- Feldman-Zrnic at one order (the baseline).

Each step: ``step(noise_std, norms)`` returns the mask of records that may contribute (their
whole cost fits) and charges only them; a record outside the mask must contribute nothing
to this step (the training loop zeroes it), which costs it nothing. ``allowance(noise_std)``
gives each record the largest norm its budget still pays for, so a loop can clip to
``min(C, allowance)`` and let every record spend its budget to the end.

Threat model (docs/training.md): the guarantee of record i is about record i (its own
add/remove neighbours); other records' decisions are functions of public outputs and their
own data. The mask and the remaining budgets are *private* (functions of the data): they
stay with the data owner (here: in the state, which the ledger stores), never in an
analyst's decision (``Decision`` carries only public numbers). Only full-batch steps are
offered: with sampling, individual accounting must not use per-record sampling outcomes,
and colluding records can learn about each other's participation (Kaiser et al. 2026).

Arithmetic (docs/proofs/training.md, §3): the stored spent of a record is always an
upper bound on its exact sum of costs; costs and sums err upward, budgets downward, so a
record is admitted only if its exact spent stays within its exact budget. A step computes,
per record, ``fl(fl(fl(s + fl(fl(c K)^2)) UP_F) + TINY)`` with K >= sqrt(k) (1 + 2^-46) / s
rounded up in exact rationals once per step (k = 1 for GDP, alpha / 2 for RDP): the margin
in K covers the roundings of c K and of the square, UP_F = 1 + 2^-48 that of the sum, TINY =
2^-1000 every underflow. Overflow gives +inf (never admitted). A zero norm is never charged.
The step runs in cache-sized blocks of records with preallocated buffers (no per-record
Python objects, no n-sized float temporaries); timings in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import base64
import hashlib
import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve import _rounding as rd
from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.accounting.gdp import gdp_mu_for
from dpsieve.errors import ValidationError
from dpsieve.filters._common import FilterBase, StateReader
from dpsieve.filters._record_step import RecordStep
from dpsieve.filters.base import BudgetLeft, Charge, Decision

__all__ = ["PerRecordGDPFilter", "PerRecordRDPFilter", "RecordStep"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


#: Relative margin after each rounded operation: 2^-48 covers the 2^-53 of one rounding
#: with room to spare, so x * UP_F >= the exact value for every normal result.
UP_F = 1.0 + 2.0**-48
#: Added to each cost: covers results that underflow to subnormals or zero.
TINY = 2.0**-1000


#: Relative margin folded into the per-step scale K (see :func:`_scale_up`).
K_MARGIN = Fraction(1) + Fraction(1, 2**46)
#: Records per block of the vectorised step: 2^15 float64 (256 KiB) per buffer, so the
#: block's norms, spent and scratch stay in a core's L2 cache across the seven passes.
BLOCK = 1 << 15


def _scale_up(noise_std: float, k: Fraction) -> float:
    """K >= sqrt(k) (1 + 2^-46) / s, the least such float (exact rationals; +inf when it
    overflows). With it, ``fl(fl(c K)^2) + TINY`` is an upper bound on the exact cost
    k c^2 / s^2 for every float c >= 0: if t = fl(c K) and t^2 are normal, each rounding loses
    at most a factor (1 - 2^-53), and (1 + 2^-46)^2 (1 - 2^-53)^3 > 1; if t is subnormal the
    exact cost is below 2^-2043 < TINY; if only t^2 underflows its error is at most 2^-1075.
    K is computed once per step, so the per-record work is two multiplications."""
    q = k * K_MARGIN**2 / Fraction(noise_std) ** 2
    return rd.sqrt_up(q) if k != 1 else rd.round_up(K_MARGIN / Fraction(noise_std))


def _charge(
    norms: FloatArray,
    spent: FloatArray,
    scale: float,
    budget: float,
    out: FloatArray,
) -> BoolArray:
    """The vectorised step: for each record, u = fl(fl(fl(spent + fl(fl(c K)^2)) UP_F) + TINY),
    an upper bound on its exact spent after paying k (c / s)^2 (K = ``scale`` from
    :func:`_scale_up`; docs/proofs/training.md, §3). Returns the mask: a record is in it
    iff its norm is 0 (it costs nothing) or u <= ``budget``; ``out`` (``spent`` itself, or a
    copy of it) receives u for the records in the mask with a positive norm and is left as
    it is for all others. Blocks of :data:`BLOCK` records, every pass in place in a
    block-sized buffer: no n-sized float temporaries, no Python object per record.
    ``spent`` and ``out`` are 1-d, contiguous, of the size of ``norms``."""
    n = norms.size
    mask = np.empty(n, dtype=np.bool_)
    m = min(BLOCK, n)
    xb = np.empty(m)
    zb = np.empty(m, dtype=np.bool_)
    ub = np.empty(m, dtype=np.bool_)
    inf_scale = math.isinf(scale)
    with np.errstate(over="ignore"):
        for a in range(0, n, m):
            b = min(a + m, n)
            c, x, z, u, mk = norms[a:b], xb[: b - a], zb[: b - a], ub[: b - a], mask[a:b]
            np.less_equal(c, 0.0, out=z)  # zero norms (norms >= 0: validated)
            if inf_scale:  # s < ~5.6e-309: every positive norm costs +inf (no 0 * inf)
                x.fill(math.inf)
            else:
                np.multiply(c, scale, out=x)  # t >= c sqrt(k) / s (1 + 2^-46)(1 - 2^-53)
                np.multiply(x, x, out=x)  # >= exact cost - 2^-1075
            np.add(x, spent[a:b], out=x)  # the sum, rounded to nearest ...
            np.multiply(x, UP_F, out=x)  # ... and its margin (normal results)
            np.add(x, TINY, out=x)  # every underflow above
            np.less_equal(x, budget, out=u)  # fits (NaN cannot occur: no 0 * inf)
            np.logical_or(u, z, out=mk)
            np.logical_not(z, out=z)
            np.logical_and(u, z, out=u)  # charged: fits and a positive norm
            np.copyto(out[a:b], x, where=u)
    return mask


def _b64(a: FloatArray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f8").tobytes()).decode("ascii")


def _unb64(s: Any, name: str, n: int | None = None) -> FloatArray:
    if not isinstance(s, str):
        raise fail(name, "filter_from_json", "a base64 string of float64", "<value>")
    try:
        a = np.frombuffer(base64.b64decode(s, validate=True), dtype="<f8").astype(np.float64)
    except ValueError:
        raise fail(name, "filter_from_json", "a base64 string of float64", "<value>") from None
    if n is not None and a.size != n:
        raise fail(name, "filter_from_json", f"{n} values", a.size)
    if not bool(np.all(np.isfinite(a) & (a >= 0))):
        raise fail(name, "filter_from_json", "finite values >= 0", "<array>")
    return a


class _PerRecord(FilterBase):
    """Shared machinery: spent (n x 1) against a budget (1), a step counter, the mask."""

    _spent: FloatArray
    _budget: FloatArray
    _steps: int

    @property
    def records(self) -> int:
        return int(self._spent.shape[0])

    @property
    def steps(self) -> int:
        return self._steps

    def _factor(self) -> Fraction:
        """Each record pays k (c / s)^2 per step: k = 1 (GDP), alpha / 2 (RDP)."""
        return Fraction(1)

    def _scale(self, noise_std: float) -> float:
        """K >= sqrt(k) (1 + 2^-46) / s, rounded up (:func:`_scale_up`)."""
        return _scale_up(noise_std, self._factor())

    def _check_size(self, step: RecordStep) -> None:
        if step.norms.size != self.records:
            raise fail("norms", type(self).__name__, f"{self.records} norms", step.norms.size)

    def _plan(self, step: RecordStep) -> tuple[BoolArray, FloatArray]:
        """(mask, new spent) -- a pure function of the state and the step (the ledger's
        path: the state is left as it is)."""
        self._check_size(step)
        new = self._spent[:, 0].copy()
        mask = _charge(step.norms, self._spent[:, 0], self._scale(step.noise_std),
                       float(self._budget[0]), new)
        return mask, new[:, None]

    def mask_for(self, step: RecordStep) -> BoolArray:
        """The records ``step`` would admit (private; nothing changes)."""
        return self._plan(step)[0]

    def step(self, noise_std: float, norms: npt.ArrayLike) -> BoolArray:
        """Charge one full-batch step; returns the mask of records that may contribute
        (a zero norm is always in it and costs nothing). The spent array is updated in
        place, block by block: the same arithmetic as :meth:`mask_for` and ``try_spend``."""
        st = RecordStep(noise_std, np.asarray(norms, dtype=np.float64))
        self._check_size(st)
        col = self._spent[:, 0]
        mask = _charge(st.norms, col, self._scale(st.noise_std), float(self._budget[0]), col)
        self._steps += 1
        return mask

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        pub = {"records": self.records, "steps": self._steps}
        if not isinstance(query, RecordStep):
            return Decision.of(False, "per-record filters take RecordStep queries", pub, {}), None
        if query.expected_step is not None and query.expected_step != self._steps:
            return Decision.of(False, "the filter moved on (expected_step differs)", pub,
                            query.to_dict()), None
        if query.norms.size != self.records:
            return Decision.of(False, f"this filter holds {self.records} records", pub,
                            query.to_dict()), None
        _, new = self._plan(query)
        state = self._state_with(new, self._steps + 1)
        rem = {"records": self.records, "steps": self._steps + 1}
        return Decision.of(True, "step charged to the records whose budget covers it", rem,
                        query.to_dict()), state

    def _state_with(self, spent: FloatArray, steps: int) -> dict[str, Any]:
        """The stored state after a step; each concrete filter (GDP, RDP) defines its own
        fields. The base class is never instantiated (no KIND of its own)."""
        raise TypeError(f"{type(self).__name__} does not define its stored state")

    _FIELDS: tuple[str, ...] = ()

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        st = {k: r.raw(k) for k in cls._FIELDS}
        probe = cls.__new__(cls)
        try:
            probe._load(st)
        except ValidationError as e:
            raise r.error(str(e.parameter), str(e.constraint), e.value) from None

    def _remaining(self) -> BudgetLeft:
        """Public numbers only (records, steps): remaining budgets are private."""
        return BudgetLeft({"records": self.records, "steps": self._steps})

    def remaining_private(self) -> FloatArray:
        """Each record's remaining budget (n x K). Private: for the data owner only."""
        out: FloatArray = np.clip(self._budget[None, :] - self._spent, 0.0, None)
        return out

    def digest(self) -> str:
        """SHA-256 of the spent array (to detect a changed state; reveals nothing usable)."""
        return hashlib.sha256(self._spent.tobytes()).hexdigest()


class PerRecordGDPFilter(_PerRecord):
    """Each record keeps mu-GDP: it pays (c / s)^2 per step from mu^2 (module docstring)."""

    KIND = "per_record_gdp"
    _FIELDS = ("mu", "spent", "steps", "records")

    def __init__(self, n_records: int, mu: float) -> None:
        o = "PerRecordGDPFilter"
        n = check_int("n_records", n_records, o, minimum=1)
        mu = check_positive("mu", mu, o)
        self._mu = mu
        self._budget = np.array([rd.mul_down(mu, mu)])
        self._spent = np.zeros((n, 1))
        self._steps = 0

    @classmethod
    def for_target(cls, n_records: int, eps: float, delta: float) -> PerRecordGDPFilter:
        """mu the largest with G_mu <= R_{eps, delta} (rounded down, both conditions of
        :func:`dpsieve.accounting.leq_approx`: h(e^eps) <= delta and h(1) <= its chord)."""
        from dpsieve.accounting.order import leq_approx
        from dpsieve.accounting.pld import PLD

        mu = gdp_mu_for(eps, delta)
        while mu > 0 and not leq_approx(PLD.gdp(mu), eps, delta):
            mu = rd.mul_down(mu, 1.0 - 1e-6)
        return cls(n_records, mu)

    @property
    def mu(self) -> float:
        """Each record's GDP budget."""
        return self._mu

    def allowance(self, noise_std: float) -> FloatArray:
        """The largest norm each record's remaining budget pays for at ``noise_std``
        (rounded down; 0 when exhausted). Private."""
        s = check_positive("noise_std", noise_std, "allowance")
        # admission needs fl(fl(fl(spent + fl(fl(c K)^2)) UP_F) + TINY) <= budget (K the
        # step's scale, :func:`_scale_up`): leave a relative 2^-44 of the budget for the
        # margins and the roundings here and there (docs/proofs/training.md, §3), and
        # divide by K itself (not multiply by s: K is rounded up, and subnormal when
        # s > 2^1022), so that fl(c K) undoes it
        left = self._budget[0] * (1.0 - 2.0**-44) - self._spent[:, 0] - 2 * TINY
        k = self._scale(s)
        if math.isinf(k):
            return np.zeros(self.records)
        with np.errstate(over="ignore"):
            out: FloatArray = np.sqrt(np.clip(left, 0.0, None)) / k * (1.0 - 2.0**-44)
        return np.clip(out, 0.0, None)

    def _state_with(self, spent: FloatArray, steps: int) -> dict[str, Any]:
        return {"mu": self._mu, "spent": _b64(spent[:, 0]), "steps": steps,
                "records": spent.shape[0]}

    def _state(self) -> dict[str, Any]:
        return self._state_with(self._spent, self._steps)

    def _load(self, state: dict[str, Any]) -> None:
        try:
            n = check_int("records", state["records"], "filter_from_json", minimum=1)
            mu = check_positive("mu", state["mu"], "filter_from_json")
            steps = check_int("steps", state["steps"], "filter_from_json", minimum=0)
            spent = _unb64(state["spent"], "spent", n)
        except KeyError as e:
            raise fail(str(e.args[0]), "filter_from_json", "present", None) from None
        self._mu = mu
        self._budget = np.array([rd.mul_down(mu, mu)])
        self._spent = spent[:, None]
        self._steps = steps


class PerRecordRDPFilter(_PerRecord):
    """Feldman-Zrnic individual Renyi filter at one order alpha (module docstring).

    Record i pays alpha (c_i / s)^2 / 2 (the Gaussian's RDP) from rho. With Gaussian steps
    only, the costs at all orders are proportional, so one order chosen in advance (the one
    whose budget converts best, :meth:`for_target`) loses nothing to a set of orders.
    """

    KIND = "per_record_rdp"
    _FIELDS = ("order", "budget", "spent", "steps", "records")

    def __init__(self, n_records: int, order: float, budget: float) -> None:
        o = "PerRecordRDPFilter"
        n = check_int("n_records", n_records, o, minimum=1)
        if not (isinstance(order, float | int) and math.isfinite(order) and order > 1):
            raise fail("order", o, "a finite float > 1", order)
        self._order = float(order)
        self._budget = np.array([check_positive("budget", budget, o)])
        self._spent = np.zeros((n, 1))
        self._steps = 0

    @classmethod
    def for_target(
        cls,
        n_records: int,
        eps: float,
        delta: float,
        orders: tuple[float, ...] = tuple(1.0 + i / 8.0 for i in range(1, 512)),
    ) -> PerRecordRDPFilter:
        """The order among ``orders`` maximising 2 rho_a / a, rho_a the RDP budget with
        (a, rho_a)-RDP => (eps, delta)-DP (Canonne, Kamath & Steinke 2020, Prop. 12, as
        :meth:`dpsieve.filters.RDPFilter.for_target`), rounded down."""
        check_in_open("delta", delta, 0.0, 1.0, "PerRecordRDPFilter.for_target")
        best: tuple[float, float, float] | None = None
        for a in orders:
            b = eps - math.log1p(-1.0 / a) + math.log(delta * a) / (a - 1.0)
            if b > 0 and (best is None or 2 * b / a > best[0]):
                best = (2 * b / a, a, rd.rel_down(b, 1e-12))
        if best is None:
            raise fail("orders", "PerRecordRDPFilter.for_target", "an order with budget > 0",
                        orders)
        return cls(n_records, best[1], best[2])

    @property
    def order(self) -> float:
        return self._order

    def _factor(self) -> Fraction:
        return Fraction(self._order) / 2

    def _state_with(self, spent: FloatArray, steps: int) -> dict[str, Any]:
        return {
            "order": self._order,
            "budget": float(self._budget[0]),
            "spent": _b64(spent[:, 0]),
            "steps": steps,
            "records": spent.shape[0],
        }

    def _state(self) -> dict[str, Any]:
        return self._state_with(self._spent, self._steps)

    def _load(self, state: dict[str, Any]) -> None:
        try:
            n = check_int("records", state["records"], "filter_from_json", minimum=1)
            steps = check_int("steps", state["steps"], "filter_from_json", minimum=0)
            order, budget = state["order"], state["budget"]
        except KeyError as e:
            raise fail(str(e.args[0]), "filter_from_json", "present", None) from None
        try:
            probe = PerRecordRDPFilter.__new__(PerRecordRDPFilter)
            PerRecordRDPFilter.__init__(probe, 1, order, budget)
        except ValidationError as e:
            raise fail(str(e.parameter), "filter_from_json", str(e.constraint), e.value) from None
        self._order, self._budget = probe._order, probe._budget
        self._spent = _unb64(state["spent"], "spent", n)[:, None]
        self._steps = steps

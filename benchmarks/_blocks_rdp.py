"""Blocks kept at several Rényi orders, and tasks of mixed mechanisms (DPack's setting).

Used by ``benchmarks.blocks_scheduler`` (its docstring states the trace). Each task of the
Gaussian trace (``blocks_scheduler.trace``: arrivals, k most recent blocks, mice and
elephants with their eps) gets a mechanism, drawn from its own seeded stream so the
Gaussian trace is unchanged:

* mice: a **Laplace** mechanism (RDP: Mironov 2017, Prop. 6) or a **Gaussian** one
  (RDP a / (2 sigma^2)), one half each;
* elephants: **DP-SGD**, a Poisson-subsampled Gaussian at rate 1 % for 1,000 steps
  (RDP: ``dpsieve.training.tuning.sgm_rdp_up``, Mironov, Talwar & Zhang 2019) or a
  Gaussian, one half each.

A task's curve is calibrated so that its eps at delta 1e-9, converted at the best of the
block orders (Canonne-Kamath-Steinke, as ``RDPFilter.for_target``), is the task's eps
(bisection on the noise, rounded to the noisier side; eps on the trace's 1 % grid). Block
orders: DPack's integer orders with a positive budget at (10, 1e-7),
``ORDERS = (3, 4, 5, 6, 8, 16, 32, 64)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

ORDERS: tuple[int, ...] = (3, 4, 5, 6, 8, 16, 32, 64)
SGM_RATE, SGM_STEPS = 0.01, 1000
MECHANISMS = {False: ("laplace", "gaussian"), True: ("sgm", "gaussian")}  # by elephant
_A = np.array(ORDERS, dtype=np.float64)


def gaussian_rdp(sigma: float) -> np.ndarray:
    return _A / (2 * sigma * sigma)


def laplace_rdp(scale: float) -> np.ndarray:
    lam = 1.0 / scale
    x = np.logaddexp(np.log(_A / (2 * _A - 1)) + (_A - 1) * lam,
                     np.log((_A - 1) / (2 * _A - 1)) - _A * lam)
    return np.asarray(x / (_A - 1))


def sgm_rdp(sigma: float) -> np.ndarray:
    from dpsieve.training.tuning import sgm_rdp_up

    return np.asarray(SGM_STEPS * sgm_rdp_up(sigma, SGM_RATE, ORDERS))


CURVES: dict[str, Callable[[float], np.ndarray]] = {
    "gaussian": gaussian_rdp, "laplace": laplace_rdp, "sgm": sgm_rdp}


def rdp_eps(rdp: np.ndarray, delta: float) -> float:
    """eps at ``delta`` of an RDP curve at ORDERS (CKS, the best order)."""
    return float(np.min(rdp + np.log1p(-1 / _A) - (math.log(delta) + np.log(_A)) / (_A - 1)))


_CAL: dict[tuple[str, float], np.ndarray] = {}
_NOISE: dict[tuple[str, float], float] = {}


def calibrated(kind: str, eps: float, delta: float = 1e-9) -> np.ndarray:
    """The curve of ``kind`` with eps ``eps`` at ``delta`` (module docstring)."""
    key = (kind, eps)
    if key not in _CAL:
        curve = CURVES[kind]
        lo, hi = 1e-2, 1e3
        for _ in range(50):
            mid = math.sqrt(lo * hi)
            if rdp_eps(curve(mid), delta) > eps:
                lo = mid
            else:
                hi = mid
        _CAL[key] = curve(hi)
        _NOISE[key] = hi
    return _CAL[key]


def zcdp_rho(kind: str, eps: float) -> float:
    """The task's charge under zCDP accounting (the curve ``calibrated(kind, eps)``'s
    mechanism): the Gaussian's exact rho = 1 / (2 sigma^2); the Laplace's pure eps0 =
    1 / b as eps0^2 / 2 (Bun & Steinke 2016, Prop. 1.4; the library's map of a pure
    charge to zCDP; within 2 % of the Laplace's own rho at these eps); DP-SGD's
    ``SGM_STEPS / (2 sigma^2)``: zCDP must hold at every order, and the subsampled
    Gaussian's RDP at order a over a tends to the full Gaussian's 1 / (2 sigma^2) as a
    grows (its q^a exp(a (a - 1) / (2 sigma^2)) term), which bounds it at every order
    (subsampling never increases a Rényi divergence): subsampling buys nothing under
    zCDP."""
    calibrated(kind, eps)
    x = _NOISE[(kind, eps)]
    if kind == "laplace":
        return 1.0 / (2 * x * x)
    steps = SGM_STEPS if kind == "sgm" else 1
    return steps / (2 * x * x)


def mechanisms(tasks: list[Any], seed: int) -> list[str]:
    """One mechanism per task (module docstring), from a stream of its own."""
    rng = np.random.default_rng(10_000 + seed)
    return [MECHANISMS[bool(t.elephant)][int(rng.integers(2))] for t in tasks]


def block_filter(rule: str) -> Any:
    """A fresh (10, 1e-7) block at ORDERS: every order must hold (RDPFilter, CKS
    budgets) or one must (AnyOrderRDPFilter, delta split over the orders); ``"zcdp"``:
    a ZCDPFilter (rho by the library's conversion, ``zcdp_rho_for``)."""
    from dpsieve.filters import AnyOrderRDPFilter, RDPFilter, ZCDPFilter, zcdp_rho_for

    if rule == "zcdp":
        return ZCDPFilter(zcdp_rho_for(10.0, 1e-7))

    cls = RDPFilter if rule == "every" else AnyOrderRDPFilter
    return cls.for_target(10.0, 1e-7, tuple(float(a) for a in ORDERS))


def simulate_rdp(tasks: list[Any], mechs: list[str], policy: str, rule: str, *,
                 days: int, setting: Any, one_currency: bool = False) -> dict[str, Any]:
    """The online trace on blocks kept at ORDERS under ``rule`` (``"zcdp"``: blocks
    kept in zCDP, each task charged ``zcdp_rho``: one fraction per block), scheduled as
    ``setting`` says (``blocks_scheduler.Setting``); ``one_currency``: the
    scheduler sees one fraction per block (``dpsieve.blocks.currency``: the largest used
    over orders under ``every``, the smallest under ``any``; a task's the same of its
    demands), as the ledger's pass does today, and each proposal is then checked at
    every order, as the real filter would (a proposal that does not fit stays waiting)."""
    from dpsieve.accounting.events import RDP, ZCDP
    from dpsieve.blocks import Pending, schedule

    flt = block_filter(rule)
    if rule == "zcdp":
        budgets = np.array([float(flt.remaining()["rho"])])
        orders: tuple[float, ...] = ()
    else:
        budgets = np.array(flt.remaining()["rdp"], dtype=np.float64)
        orders = tuple(float(a) for a in flt.remaining()["orders"])
        assert orders == tuple(float(a) for a in ORDERS)  # every order kept at (10, 1e-7)
    m = budgets.size
    sched_rule = "every" if rule == "zcdp" else rule
    used = np.zeros((days, m))
    charges: list[list[Any]] = [[] for _ in range(days)]
    waiting: list[tuple[Any, np.ndarray, np.ndarray, Any]] = []
    done = {"mice": 0, "elephants": 0}
    by_mech: dict[str, int] = {}
    timed_out = never = 0
    nxt = 0
    for now in setting.pass_times():
        while nxt < len(tasks) and tasks[nxt].arrival <= now:
            task, mech = tasks[nxt], mechs[nxt]
            eps = _grid_eps(task.eps)
            ch: Any
            if rule == "zcdp":
                rho = zcdp_rho(mech, eps)
                frac = np.array([rho]) / budgets
                ch = ZCDP(rho)
            else:
                rdp = calibrated(mech, eps)
                frac = rdp / budgets
                ch = RDP(orders, tuple(float(x) for x in rdp))
            fits = frac <= 1 if sched_rule == "any" else None
            if (sched_rule == "every" and frac.max() > 1) or (fits is not None
                                                               and not fits.any()):
                never += 1
            else:
                arrived = min(days, math.floor(task.arrival) + 1)
                dims = np.arange(max(0, arrived - task.k), arrived, dtype=np.int64)
                waiting.append((task, dims, np.tile(frac, (dims.size, 1)), (ch, mech)))
            nxt += 1
        keep = [w for w in waiting if w[0].arrival + setting.wait > now]
        timed_out += len(waiting) - len(keep)
        waiting = keep
        if not waiting:
            continue
        unlocked = setting.unlocked(now - np.arange(days, dtype=np.float64))
        avail = unlocked[:, None] - used
        if one_currency:
            pend2 = [Pending(w[1], w[2], w[0].arrival) for w in waiting]
            admitted = _one_currency_pass(policy, pend2, avail, sched_rule,
                                          recompute=setting.recompute)
        else:
            pend = [Pending(w[1], w[2], w[0].arrival) for w in waiting]
            admitted = schedule(policy, pend, avail, rule=sched_rule,
                                recompute=setting.recompute).admitted
        for i in admitted:
            task, dims, dem, (ch, mech) = waiting[i]
            used[dims] += dem
            for b in dims:
                charges[int(b)].append(ch)
            done["elephants" if task.elephant else "mice"] += 1
            by_mech[mech] = by_mech.get(mech, 0) + 1
        gone = set(admitted)
        waiting = [w for i, w in enumerate(waiting) if i not in gone]
    refusals = 0
    for b in range(days):  # every admitted charge through a fresh real filter
        f = block_filter(rule)
        refusals += sum(not f.try_spend(ch).admitted for ch in charges[b])
    return {"completed": done["mice"] + done["elephants"], **done, "by_mechanism": by_mech,
            "never": never, "timed_out": timed_out + len(waiting),
            "replay_refusals": refusals}


def _grid_eps(eps: float) -> float:
    """The trace's eps, on its 1 % grid (as ``blocks_scheduler._mu``)."""
    return float(1.01 ** math.floor(math.log(eps) / math.log(1.01)))


def _one_currency_pass(policy: str, pend2: list[Any], avail: np.ndarray, rule: str,
                       recompute: int = 0) -> list[int]:
    """One pass on one fraction per block (module ``simulate_rdp``), each proposal then
    checked at every order; returns the admitted, ``avail`` updated in place."""
    from dpsieve.blocks import Pending, schedule

    pick = np.max if rule == "every" else np.min
    avail1 = np.maximum(1.0 - pick(1.0 - avail, axis=1), 0.0)
    pend = [Pending(p.dims, pick(p.demand, axis=1), p.arrival) for p in pend2]
    out = []
    for i in schedule(policy, pend, avail1, recompute=recompute).admitted:
        p = pend2[i]
        ok = p.demand <= avail[p.dims] + 1e-12
        if bool(np.all(ok.all(axis=1) if rule == "every" else ok.any(axis=1))):
            avail[p.dims] -= p.demand
            out.append(i)
    return out


def offline_rdp(seed: int, rule: str = "any", blocks: int = 100, n: int = 3000,
                p_elephant: float = 0.25) -> dict[str, int]:
    """DPack's offline setting on blocks kept at ORDERS: ``blocks`` fresh blocks, ``n``
    tasks at once (eps and mechanism as the online trace's, k contiguous blocks at a
    random start, k log-normal median 3), one pass per policy; tasks admitted."""
    from dpsieve.blocks import Pending, schedule

    rng = np.random.default_rng(seed)
    budgets = np.array(block_filter(rule).remaining()["rdp"], dtype=np.float64)
    pend = []
    for i in range(n):
        elephant = bool(rng.random() < p_elephant)
        lo, hi = (1.5, 6.0) if elephant else (0.5, 1.5)
        eps = _grid_eps(float(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        mech = MECHANISMS[elephant][int(rng.integers(2))]
        k = min(blocks, max(1, math.ceil(float(rng.lognormal(math.log(3.0), 1.5)))))
        start = int(rng.integers(0, blocks - k + 1))
        frac = calibrated(mech, eps) / budgets
        pend.append(Pending(np.arange(start, start + k), np.tile(frac, (k, 1)), float(i)))
    full = np.ones((blocks, budgets.size))
    out = {p: len(schedule(p, pend, full, rule=rule).admitted)
           for p in ("dpf", "dpack", "fcfs")}
    for p in ("dpf", "dpack"):
        out[f"{p}, one currency"] = len(_one_currency_pass(p, pend, full.copy(), rule))
    return out

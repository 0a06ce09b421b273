"""``dpsieve demo``: an adaptive analysis under the GDP residue filter, printing each decision.

The data are the bundled diabetes table (442 patients, ``dpsieve/data/diabetes.csv``).
The analyst asks noisy questions one at a time and chooses the next one from the previous
*noisy* answers (adaptively); every question is first offered to a
:class:`~dpsieve.filters.GDPResidueFilter` whose budget G_mu is the GDP curve meeting the
(eps, delta) target, and is answered only if admitted. The interaction as a whole is then
(eps, delta)-DP (paper, Thm. 1: the residue filter is free).

Noise comes from :mod:`dpsieve.mechanisms` (exact lattice Laplace, cryptographically
secure generator). ``--seed`` switches to a seeded ``numpy`` generator for a reproducible
*simulation*: its outputs are not private, and the demo says so.
"""

from __future__ import annotations

import csv
import json
from importlib import resources
from typing import Annotated, Any

import numpy as np
import typer

__all__ = ["demo", "register"]


def _load() -> dict[str, np.ndarray]:
    text = resources.files("dpsieve.data").joinpath("diabetes.csv").read_text()
    rows = list(csv.DictReader(text.splitlines()))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


class _Analyst:
    """Offers each noisy question to the filter and answers it only when admitted."""

    def __init__(self, flt: Any, delta: float, rng: Any, as_json: bool) -> None:
        self.flt, self.delta, self.rng, self.as_json = flt, delta, rng, as_json
        self.step = 0

    def ask(self, question: str, value: float, sensitivity: float, eps: float) -> float | None:
        from dpsieve.accounting.gdp import gdp_epsilon
        from dpsieve.mechanisms import LaplaceMechanism

        mech = LaplaceMechanism.for_epsilon(eps, sensitivity)
        decision = self.flt.try_spend(mech.pld())
        self.step += 1
        answer = float(mech.release(value, rng=self.rng)) if decision.admitted else None
        mu_left = self.flt.remaining()["mu"]
        eps_left = gdp_epsilon(mu_left, self.delta) if mu_left > 0 else 0.0
        row = {
            "step": self.step,
            "question": question,
            "mechanism": f"Laplace(scale={mech.scale:.4g}, sensitivity={sensitivity:g})",
            "eps": mech.pure_eps(),
            "admitted": decision.admitted,
            "reason": decision.reason,
            "mu_left": mu_left,
            "eps_left_at_delta": eps_left,
            "answer": answer,
        }
        if self.as_json:
            typer.echo(json.dumps(row))
        else:
            mark = "ADMIT " if decision.admitted else "REFUSE"
            ans = "-" if answer is None else f"{answer:10.2f}"
            typer.echo(
                f"{self.step:2d} {mark} {question:44s} eps={row['eps']:<6.3g} answer={ans:>10s}  "
                f"left: mu={mu_left:.4f} (eps {eps_left:.3f} at delta {self.delta:g})"
            )
        return answer


def demo(
    eps: Annotated[float, typer.Option(help="Target epsilon of the whole analysis.")] = 2.0,
    delta: Annotated[float, typer.Option(help="Target delta of the whole analysis.")] = 1e-6,
    seed: Annotated[
        int | None, typer.Option(help="Seeded simulation (NOT private); default: secure noise.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """An adaptive analysis of the bundled diabetes data under the GDP residue filter."""
    from dpsieve.filters import GDPResidueFilter

    data = _load()
    flt = GDPResidueFilter(eps=eps, delta=delta)
    rng = None if seed is None else np.random.default_rng(seed)
    if not as_json:
        typer.echo(
            f"GDP residue filter, budget G_mu with mu = {flt.remaining()['mu']:.4f}, "
            f"i.e. ({eps:g}, {delta:g})-DP for the whole adaptive interaction."
        )
        if rng is not None:
            typer.echo("NOTE: seeded simulation (--seed): reproducible, NOT private.")
    a = _Analyst(flt, delta, rng, as_json)
    bmi = np.clip(data["bmi"], 15.0, 45.0)
    target = np.clip(data["target"], 0.0, 350.0)
    n = a.ask("number of patients", float(len(bmi)), 1.0, 0.1)
    s = a.ask("sum of BMI (clipped to [15, 45])", float(bmi.sum()), 45.0, 0.2)
    if n is None or s is None or n <= 1:
        return
    cut = s / n  # adaptively chosen from the noisy answers
    high = bmi > cut
    n_hi = a.ask(f"patients with BMI > {cut:.1f} (noisy mean)", float(high.sum()), 1.0, 0.1)
    if n_hi is None:
        return
    n_lo = max(n - n_hi, 1.0)
    # ask for the group means of disease progression, with more budget while unclear
    e = 0.05
    while True:
        s_hi = a.ask(f"sum of progression, BMI > {cut:.1f}", float(target[high].sum()), 350.0, e)
        s_lo = a.ask(f"sum of progression, BMI <= {cut:.1f}", float(target[~high].sum()), 350.0, e)
        if s_hi is None or s_lo is None:
            break
        diff = s_hi / max(n_hi, 1.0) - s_lo / n_lo
        noise_sd = np.sqrt(2.0) * 350.0 / e * np.hypot(1.0 / max(n_hi, 1.0), 1.0 / n_lo)
        if not as_json:
            typer.echo(f"   difference of means {diff:.1f} (noise sd about {noise_sd:.1f})")
        if abs(diff) > 3.0 * noise_sd:
            if not as_json:
                typer.echo("   clear difference; the analyst stops here.")
            break
        e *= 2.0  # unclear: ask again, spending more
    if not as_json:
        typer.echo(f"final budget left: {json.dumps(flt.remaining())}")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve demo`` to the top-level CLI."""
    app.command("demo")(demo)

"""``dpsieve demo``: an adaptive analysis under a mixed-budget filter, printing each decision.

The data are the bundled diabetes table (442 patients, ``dpsieve/data/diabetes.csv``).
The analyst asks noisy questions one at a time and chooses the next one from the previous
*noisy* answers (adaptively); every question is first offered to a
:class:`~dpsieve.filters.MixedFilter` (the filter ``Session`` builds for an (eps, delta)
budget: a pure part and a Gaussian part inside the target, split for the first question),
and is answered only if admitted. The interaction as a whole is then (eps, delta)-DP
(docs/proofs/mixed.md). Each line states the budget left in plain words and how many more
questions like that one the filter would still admit.

Noise comes from :mod:`dpsieve.mechanisms` (exact lattice Laplace, cryptographically
secure generator). ``--seed`` switches to a seeded ``numpy`` generator for a reproducible
*simulation*: its outputs are not private, and the demo says so.
"""

from __future__ import annotations

import csv
import json
from importlib import resources
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # numpy is imported when the demo runs, not for --help
    import numpy as np

__all__ = ["demo", "register"]


def _load() -> dict[str, np.ndarray]:
    import numpy as np

    text = resources.files("dpsieve.data").joinpath("diabetes.csv").read_text()
    rows = list(csv.DictReader(text.splitlines()))
    return {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}


class _Analyst:
    """Offers each noisy question to the filter and answers it only when admitted."""

    def __init__(self, flt: Any, delta: float, rng: Any, as_json: bool) -> None:
        from dpsieve.filters import filter_from_json

        self.flt, self.delta, self.rng, self.as_json = flt, delta, rng, as_json
        self.initial = filter_from_json(flt.to_json())
        self.step = 0

    def ask(self, question: str, value: float, sensitivity: float, eps: float) -> float | None:
        from dpsieve.mechanisms import LaplaceMechanism

        mech = LaplaceMechanism.for_epsilon(eps, sensitivity)
        from dpsieve.filters.summary import budget_summary

        decision = self.flt.try_spend(mech.pld())
        self.step += 1
        answer = float(mech.release(value, rng=self.rng)) if decision.admitted else None
        s = budget_summary(self.flt, self.initial, like=mech.pld(), cap=100)
        row = {
            "step": self.step,
            "question": question,
            "mechanism": f"Laplace(scale={mech.scale:.4g}, sensitivity={sensitivity:g})",
            "eps": mech.pure_eps(),
            "admitted": decision.admitted,
            "reason": decision.reason,
            "eps_left_at_delta": s.eps_left,
            "fraction_used": s.fraction_used,
            "more_like_this": None if s.more is None else s.more.to_dict(),
            "budget": s.text,
            "answer": answer,
        }
        if self.as_json:
            typer.echo(json.dumps(row))
        else:
            mark = "ADMIT " if decision.admitted else "REFUSE"
            ans = "-" if answer is None else f"{answer:10.2f}"
            typer.echo(f"{self.step:2d} {mark} {question:44s} eps={row['eps']:<6.3g} "
                       f"answer={ans:>10s}")
            typer.echo(f"   left: {s.text}")
        return answer


def demo(
    eps: Annotated[float, typer.Option(help="Target epsilon of the whole analysis.")] = 2.0,
    delta: Annotated[float, typer.Option(help="Target delta of the whole analysis.")] = 1e-6,
    seed: Annotated[
        int | None, typer.Option(
            min=0, help="Seeded simulation (NOT private); default: secure noise.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
    typical: Annotated[bool, typer.Option(
        help="Declare the planned question sizes (eps 0.1, 0.2, 0.4) when opening the budget; "
             "--no-typical lets the first question choose the split.")] = True,
) -> None:
    """An adaptive analysis of the bundled diabetes data under an (eps, delta) budget."""
    import numpy as np

    from dpsieve.accounting.events import PureDP
    from dpsieve.filters import MixedFilter

    data = _load()
    planned = [PureDP(0.1), PureDP(0.2), PureDP(0.4)] if typical else None
    flt = MixedFilter(eps, delta, typical=planned)
    rng = None if seed is None else np.random.default_rng(seed)
    if not as_json:
        how = ("split for typical questions of eps 0.1, 0.2 and 0.4" if typical
               else "split chosen for the first question")
        typer.echo(f"Budget: ({eps:g}, {delta:g})-DP for the whole adaptive interaction, as a "
                   f"pure part and a Gaussian part ({how}).")
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
        from dpsieve.filters.summary import budget_summary

        typer.echo(f"final budget left: {budget_summary(flt, a.initial).text}")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve demo`` to the top-level CLI."""
    app.command("demo")(demo)

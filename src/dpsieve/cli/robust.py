"""``dpsieve robust mean|median|pca|kl|resistance|policy``: Propose-Filter-Release estimators.

Data files: ``.npy`` or CSV (comma-separated numbers, an optional header line). Noise comes
from the operating system's secure generator. The printed ``privacy`` is what the run cost
(replace-one neighbours, the number of rows public); a refusal is a result (exit code 0 with
``"refused": true``), bad input exits with code 2 and a message naming the parameter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # numpy is imported when a command runs, not for --help
    import numpy as np
    import numpy.typing as npt

__all__ = ["app", "load_table"]

app = typer.Typer(help="Robust statistics by Propose-Filter-Release.", no_args_is_help=True)

DATA = typer.Option(..., "--data", help="A .npy or CSV file (one record per row).")
EPS = typer.Option(..., "--eps", help="Total epsilon of the run.")
DELTA = typer.Option(1e-6, "--delta", help="Total delta of the run.")
JSON = typer.Option(False, "--json", help="Print one JSON object.")
COLUMNS = typer.Option(None, "--columns", help="Comma-separated column indices to use.")


def load_table(path: Path) -> npt.NDArray[np.float64]:
    """Rows of a .npy or CSV file as floats (a header line in a CSV is skipped)."""
    import numpy as np

    if not path.exists():
        raise ValueError(f"--data: file {str(path)!r} does not exist")
    try:
        if path.suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False), dtype=np.float64)
        try:
            return np.loadtxt(path, delimiter=",", ndmin=1)
        except ValueError:
            return np.loadtxt(path, delimiter=",", ndmin=1, skiprows=1)
    except ValueError:
        # numpy's message quotes the offending cell: a data value, never shown
        raise ValueError(f"--data: {str(path)!r} is not a table of numbers (a cell could "
                         "not be read as a number; values withheld)") from None


def _select(x: npt.NDArray[np.float64], columns: str | None) -> npt.NDArray[np.float64]:
    if columns is None:
        return x
    idx = [int(c) for c in columns.split(",")]
    if x.ndim != 2 or max(idx) >= x.shape[1] or min(idx) < -x.shape[1]:
        raise ValueError(f"--columns {columns!r} does not fit data of shape {x.shape}")
    sel = x[:, idx]
    return sel[:, 0] if len(idx) == 1 else sel


def _emit(result: Any, as_json: bool) -> None:
    d = result.to_dict()
    if as_json:
        typer.echo(json.dumps(d))
        return
    if d["refused"]:
        typer.echo(f"refused at {d['stage']}: {d['reason']}")
    else:
        typer.echo(f"value: {d['value']}")
    typer.echo(f"privacy: {d['privacy']}")
    for k, v in d["details"].items():
        typer.echo(f"{k}: {v}")


def _run(fn: Any) -> None:
    from dpsieve.errors import DPError

    try:
        fn()
    except (DPError, ValueError, OSError) as exc:
        typer.echo(f"Error: {exc}", err=True)
        raise typer.Exit(code=2) from None


@app.command()
def mean(
    data: Path = DATA, eps: float = EPS, delta: float = DELTA,
    bound: float = typer.Option(..., "--bound", help="Public scale Lambda of the data."),
    columns: str | None = COLUMNS, as_json: bool = JSON,
    method: str = typer.Option("rowwise", "--method",
                               help="rowwise (pure eps-DP, default) | friendly ((eps, delta))"),
) -> None:
    """PFR mean of scalars or vectors (row-wise: pure eps-DP; friendly: (eps, delta)-DP)."""
    from dpsieve.robust import pfr_mean

    _run(lambda: _emit(pfr_mean(_select(load_table(data), columns), eps, delta, bound=bound,
                                method=method), as_json))


@app.command("clipped-mean")
def clipped_mean(
    data: Path = DATA, eps: float = EPS,
    bound: float = typer.Option(..., "--bound", help="Public scale Lambda of the data."),
    columns: str | None = COLUMNS, as_json: bool = JSON,
) -> None:
    """Private median and MAD, clip, Laplace mean (the strong pure eps-DP baseline)."""
    from dpsieve.robust import mad_clipped_mean

    _run(lambda: _emit(mad_clipped_mean(_select(load_table(data), columns), eps, bound=bound),
                       as_json))


@app.command()
def median(
    data: Path = DATA, eps: float = EPS, delta: float = DELTA,
    bound: float = typer.Option(..., "--bound", help="Public scale Lambda of the data."),
    columns: str | None = COLUMNS, as_json: bool = JSON,
) -> None:
    """PFR median of scalars ((eps, delta)-DP)."""
    from dpsieve.robust import pfr_median

    _run(lambda: _emit(pfr_median(_select(load_table(data), columns), eps, delta, bound=bound),
                       as_json))


@app.command()
def pca(
    data: Path = DATA, eps: float = EPS, delta: float = DELTA,
    k: int = typer.Option(1, "--k", help="Rank of the subspace."),
    block_size: int = typer.Option(20, "--block-size", help="Rows per public block."),
    columns: str | None = COLUMNS, as_json: bool = JSON,
) -> None:
    """PFR principal subspace of rank k ((eps, delta)-DP); prints a d x k basis."""
    from dpsieve.robust import pfr_pca

    _run(lambda: _emit(pfr_pca(_select(load_table(data), columns), k, eps, delta,
                               block_size=block_size), as_json))


@app.command()
def kl(
    data: Path = DATA, eps: float = EPS,
    reference: str = typer.Option(..., "--reference", help="Comma-separated public Q."),
    delta: float = DELTA, level: float = typer.Option(0.9, "--level"),
    columns: str | None = COLUMNS, as_json: bool = JSON,
) -> None:
    """Mean KL(user histogram || reference) below a private quantile (eps-DP; delta unused)."""
    from dpsieve.robust import pfr_kl

    def go() -> None:
        q = [float(v) for v in reference.split(",")]
        _emit(pfr_kl(_select(load_table(data), columns), q, eps, level=level), as_json)

    _run(go)


@app.command()
def policy(
    data: Path = DATA, eps: float = EPS, delta: float = DELTA,
    treatment: int = typer.Option(..., "--treatment-col", help="Column of the 0/1 treatment."),
    outcome: int = typer.Option(..., "--outcome-col", help="Column of the outcome."),
    propensity: float = typer.Option(0.5, "--propensity", help="Public P(T = 1) of the trial."),
    bound: float = typer.Option(..., "--bound", help="Public top of the |Y|/e score grid."),
    as_json: bool = JSON,
) -> None:
    """Select among 'treat none', 'treat all' and 'treat iff x_j > 0' (eps-DP; delta unused).

    The policy class is public: 2 + (number of covariates) rules; the value printed is the
    index of the chosen rule (0 none, 1 all, 2 + j: treat iff covariate j > 0).
    """
    from dpsieve.robust import pfr_policy

    def go() -> None:
        import numpy as np

        x = load_table(data)
        if x.ndim != 2:
            raise ValueError("--data: policy needs a 2-D table")
        cov = np.delete(x, [treatment, outcome], axis=1)
        t = x[:, treatment].astype(np.int64)
        if not np.all((x[:, treatment] == 0) | (x[:, treatment] == 1)):
            raise ValueError("--treatment-col: treatments must be 0 or 1")
        pols: list[Any] = [lambda a: np.zeros(len(a), np.int64),
                           lambda a: np.ones(len(a), np.int64)]
        pols += [lambda a, j=j: (a[:, j] > 0).astype(np.int64) for j in range(cov.shape[1])]
        p = float(propensity)
        res = pfr_policy(cov, t, x[:, outcome],
                         lambda a, tt: np.where(tt == 1, p, 1.0 - p), pols, eps, bound=bound)
        _emit(res, as_json)

    _run(go)


@app.command()
def resistance(
    data: Path = DATA, eps: float = EPS, delta: float = DELTA, as_json: bool = JSON,
) -> None:
    """Not available: no proven PFR guarantee for effective resistances (exit code 3)."""
    from dpsieve.robust.resistance import REASON

    if as_json:
        typer.echo(json.dumps({"available": False, "reason": REASON}))
    else:
        typer.echo(REASON, err=True)
    raise typer.Exit(code=3)

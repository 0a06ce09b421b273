"""``dpsieve analyze``: the data owner's utility analysis of candidate bounds. **Not private.**

It reads every row of the owner's file (CSV or Parquet) and prints, for a typical plan and
each candidate (``max_groups``, ``max_rows``, ``lower``, ``upper``), the bias of bounding
(exact, on the data), the noise (the preview's calibration) and the expected RMSE, and the
recommended candidate (:mod:`dpsieve.queries.utility`). No ledger, budget or service is
involved: it is for choosing the public bounds to declare, never for an analyst.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["analyze", "register"]


def _json_arg(text: str, name: str) -> Any:
    """A JSON value given inline or as ``@path``."""
    try:
        raw = Path(text[1:]).read_text() if text.startswith("@") else text
        return json.loads(raw)
    except (OSError, json.JSONDecodeError) as e:
        raise typer.BadParameter(f"cannot read {name}: {e}") from None


def _fmt(x: Any) -> str:
    return "-" if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def analyze(
    data: Annotated[Path, typer.Argument(help="The owner's data: a CSV or Parquet file.")],
    plan: str = typer.Option(..., "--plan", help='The typical query plan (JSON, or @file), '
                             'e.g. \'{"type":"query","privacy":{"type":"pure","eps":1},'
                             '"aggregations":[{"type":"count"}],"group_by":["ward"],'
                             '"keys":[["a"],["b"]]}\'.'),
    candidates: str | None = typer.Option(
        None, "--candidates", help='Candidate bounds (JSON, or @file): a list of '
        '{max_groups, max_rows, lower, upper} objects or one object of lists (a grid), '
        'e.g. \'{"max_groups":[1,2,4],"max_rows":[5,20]}\'. Default: the plan\'s own.'),
    privacy_unit: str | None = typer.Option(
        None, "--privacy-unit", help="The column identifying a person (a unit may have "
        "many rows)."),
    column_types: str | None = typer.Option(
        None, "--column-types", help='A CSV\'s column types (JSON, or @file), e.g. '
        '\'{"x": "float", "ward": "string"}\' (undeclared CSV columns are text).'),
    per_group: bool = typer.Option(False, "--per-group",
                                   help="Each group's truth, bias, noise and RMSE too."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Bias and noise of candidate bounds on the owner's own data (NOT private: for the
    data owner only, to choose the public bounds to declare)."""
    from dpsieve.accounting.events import PureDP
    from dpsieve.session import Session

    spec = _json_arg(plan, "--plan")
    cands = None if candidates is None else _json_arg(candidates, "--candidates")
    # the session's budget is never touched: the analysis spends and logs nothing
    types = None if column_types is None else _json_arg(column_types, "--column-types")
    session = Session(str(data), budget=PureDP(1.0), privacy_unit=privacy_unit,
                      column_types=types)
    out = session.utility_analysis(spec, cands, per_group=per_group)
    if as_json:
        typer.echo(json.dumps(out, allow_nan=False, default=str))
        return
    typer.echo("NOT PRIVATE: computed from every row, for the data owner only.")
    best = out["recommended"]
    for i, row in enumerate(out["candidates"]):
        mark = "*" if i == best else " "
        cand = json.dumps(row["candidate"])
        if "error" in row:
            typer.echo(f"{mark} {cand}: refused: {row['error']}")
            continue
        sel = "" if row["groups_released"] is None else \
            f", groups released {row['groups_released']:.1f}"
        typer.echo(f"{mark} {cand}: score {_fmt(row['score'])}, rows dropped "
                   f"{row['rows_dropped']:.1%}, (unit, group) cells dropped "
                   f"{row['cells_dropped']:.1%}{sel}")
        for a in row["aggregations"]:
            typer.echo(f"    {a['label']}: RMSE {_fmt(a['rmse'])} (bias, RMS over groups: "
                       f"{_fmt(a['bias_rms'])}; noise std, RMS: {_fmt(a['noise_std_rms'])})")
            for g in a.get("per_group", []):
                typer.echo(f"      {g['key']}: truth {_fmt(g['truth'])}, bounded "
                           f"{_fmt(g['bounded'])}, bias {_fmt(g['bias'])}, noise std "
                           f"{_fmt(g['noise_std'])}, RMSE {_fmt(g['rmse'])}")
    if best is not None:
        typer.echo(f"recommended: {json.dumps(out['candidates'][best]['candidate'])}")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve analyze`` to the top-level app."""
    app.command("analyze")(analyze)

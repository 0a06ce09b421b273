"""`dpsieve training-figures --opacus`: Opacus DP-SGD under dpsieve's accountant and filters."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpsieve.cli import app
from dpsieve.reproduce.training_opacus import effective_rate
from dpsieve.training import DPSGDAccountant


def test_effective_rate_is_what_opacus_samples_at() -> None:
    # 22-record batches on 1,078 records: 49 batches, Opacus samples at 1/49, not 0.02
    assert effective_rate(0.02, 1078) == 1 / 49
    assert effective_rate(0.5, 10) == 0.5


def test_smoke_run_from_the_cli(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="needs CPU torch (pip install dpsieve[train])")
    pytest.importorskip("opacus", reason="needs opacus (pip install dpsieve[train])")
    pytest.importorskip("sklearn", reason="needs scikit-learn (pip install dpsieve[data])")
    out = CliRunner().invoke(app, ["training-figures", "--out", str(tmp_path), "--opacus",
                                   "--quick", "--seeds", "2"])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "opacus_training.png").stat().st_size > 0
    text = (tmp_path / "opacus_summary.md").read_text()
    rows = [r for r in text.splitlines() if r.startswith("| (")]
    assert len(rows) == 4
    for r in rows:  # every setting trained and reports an accuracy in [0, 1]
        acc = float(r.split("|")[3].split("+-")[0])
        assert 0.0 <= acc <= 1.0
    # (a): 40 steps at sigma 1 and Opacus' rate, reported by DpsieveAccountant via the engine
    line = next(r for r in text.splitlines() if r.startswith("(a) engine.get_epsilon"))
    eps = float(line.split(": ")[1].split(" ")[0])
    acc = DPSGDAccountant()
    acc.step(1.0, effective_rate(0.02, 1078), count=40)
    assert math.isclose(eps, acc.epsilon(1e-5), rel_tol=1e-3)

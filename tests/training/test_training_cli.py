"""`dpsieve training-figures`: registered, and (slow) runs end to end in quick mode."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpsieve.cli import app


def test_command_is_registered() -> None:
    out = CliRunner().invoke(app, ["training-figures", "--help"])
    assert out.exit_code == 0
    assert "per-record" in out.output


@pytest.mark.slow
def test_quick_run_writes_the_summary(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    out = CliRunner().invoke(app, ["training-figures", "--out", str(tmp_path), "--quick"])
    assert out.exit_code == 0, out.output
    text = (tmp_path / "summary.md").read_text()
    assert "TrainingFilter" in text
    assert (tmp_path / "training_filters.png").exists()

"""dpsieve.training: DP-SGD accounting, calibration, training filters and adapters.

The core never imports torch: the Opacus adapter lives in
:mod:`dpsieve.training.opacus_adapter` and the dp_accounting one in
:mod:`dpsieve.training.dp_accounting_adapter` (install ``dpsieve[train]``). Which tool for
which job, the threat model of per-record filters, and hyperparameter searches
(:class:`TuningAccountant`): docs/training.md.
"""

from __future__ import annotations

from dpsieve.training._run_counts import NegativeBinomialRuns, PoissonRuns, RunCount
from dpsieve.training.accountant import SAMPLINGS, DPSGDAccountant, DPSGDStep, Step, step_pld
from dpsieve.training.calibrate import dpsgd_sigma_for, dpsgd_steps_for
from dpsieve.training.clipping import clip_contributions
from dpsieve.training.tuning import TuningAccountant

__all__ = [
    "SAMPLINGS",
    "DPSGDAccountant",
    "DPSGDStep",
    "NegativeBinomialRuns",
    "PoissonRuns",
    "RunCount",
    "Step",
    "TuningAccountant",
    "clip_contributions",
    "dpsgd_sigma_for",
    "dpsgd_steps_for",
    "step_pld",
]

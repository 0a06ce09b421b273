"""dpsieve.training: DP-SGD accounting, calibration, training filters and adapters.

The core never imports torch: the Opacus adapter lives in
:mod:`dpsieve.training.opacus_adapter` and the dp_accounting one in
:mod:`dpsieve.training.dp_accounting_adapter` (install ``dpsieve[train]``). Which tool for
which job, and the threat model of per-record filters: docs/training.md.
"""

from __future__ import annotations

from dpsieve.training.accountant import SAMPLINGS, DPSGDAccountant, DPSGDStep, Step, step_pld
from dpsieve.training.calibrate import dpsgd_sigma_for, dpsgd_steps_for
from dpsieve.training.clipping import clip_contributions

__all__ = [
    "SAMPLINGS",
    "DPSGDAccountant",
    "DPSGDStep",
    "Step",
    "clip_contributions",
    "dpsgd_sigma_for",
    "dpsgd_steps_for",
    "step_pld",
]

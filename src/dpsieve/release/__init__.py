"""Pure-DP statistical query release (see docs/release.md and docs/architecture.md).

The envelope mechanism of Fitzsimons (2026) with exact small-instance enumeration, and the
baselines: the identity mechanism (Laplace on the histogram, projected), Laplace on the
answers (clipped to range), pure PMW, MWEM and the small-database (BLR) mechanism. Every
mechanism is pure eps-DP under replace-one neighbours (the rejection sampler: (eps, delta),
see there).
"""

from __future__ import annotations

from dpsieve.release.baselines import (
    blr_release,
    laplace_release,
    mwem_release,
    pmw_parameters,
    pmw_release,
)
from dpsieve.release.data import Dataset, Domain, Workload
from dpsieve.release.envelope import EnvelopeEnumeration, enumerate_envelope, enumeration_cost
from dpsieve.release.errors import InstanceTooLargeError, RejectionBudgetExceededError
from dpsieve.release.groups import Groups, group_histograms, histogram_count
from dpsieve.release.identity import IDENTITY_PROJECTIONS, identity_release
from dpsieve.release.mechanism import (
    AUTO_ROUNDS_COST,
    envelope_release,
    is_trivial_regime,
    worst_case_expected_error,
)
from dpsieve.release.params import (
    THEOREM_CONSTANT,
    TheoremParameters,
    auto_rounds,
    practical_parameters,
    smallest_nontrivial_n,
    theorem_parameters,
)
from dpsieve.release.project import (
    clip_to_range,
    least_squares_simplex,
    project_simplex,
)
from dpsieve.release.rejection import sample_envelope_rejection
from dpsieve.release.result import Release
from dpsieve.release.transcript import CollapsedWorkload, PMWParams, collapse, decode
from dpsieve.release.workloads import marginals, random_counting, range_1d, range_2d

__all__ = [
    "AUTO_ROUNDS_COST",
    "IDENTITY_PROJECTIONS",
    "THEOREM_CONSTANT",
    "CollapsedWorkload",
    "Dataset",
    "Domain",
    "EnvelopeEnumeration",
    "Groups",
    "InstanceTooLargeError",
    "PMWParams",
    "RejectionBudgetExceededError",
    "Release",
    "TheoremParameters",
    "Workload",
    "auto_rounds",
    "blr_release",
    "clip_to_range",
    "collapse",
    "decode",
    "enumerate_envelope",
    "enumeration_cost",
    "envelope_release",
    "group_histograms",
    "histogram_count",
    "identity_release",
    "is_trivial_regime",
    "laplace_release",
    "least_squares_simplex",
    "marginals",
    "mwem_release",
    "pmw_parameters",
    "pmw_release",
    "practical_parameters",
    "project_simplex",
    "random_counting",
    "range_1d",
    "range_2d",
    "sample_envelope_rejection",
    "smallest_nontrivial_n",
    "theorem_parameters",
    "worst_case_expected_error",
]

"""How the envelope's practical rule was chosen: ``python experiments/release/tune.py``.

Grid J in {4, 6, 8, 10}, c in {0.5, 1, 2, 4, 8}, Hedge factor f in {0.5, 1, 2}
(gamma = min(1, f sqrt(2 log T / J)), eta = c eps n / sqrt(J log(T^2 + 1))) on five synthetic
Dirichlet(1/2) databases (seed 2026; 1-way marginals over {0,1}^2, n = 10, eps = 1), scored by
the exact expected error (synthetic, public data only); and pure PMW for J in 2..8. Prints the
five best settings, the rule's rank, and the best pure PMW. About a minute.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dpsieve.release import (
    Dataset,
    Domain,
    PMWParams,
    collapse,
    enumerate_envelope,
    group_histograms,
    marginals,
    pmw_parameters,
)
from dpsieve.release.mechanism import center_only_groups


def main() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    cw = collapse(wl)
    rng = np.random.default_rng(2026)
    dbs = [Dataset.from_histogram(rng.multinomial(10, rng.dirichlet(np.full(4, 0.5))))
           for _ in range(5)]
    groups = [group_histograms(cw, cw.counts(x)) for x in dbs]
    T, n, eps = 4, 10, 1.0
    scores = []
    for J, c, f in itertools.product((4, 6, 8, 10), (0.5, 1, 2, 4, 8), (0.5, 1, 2)):
        p = PMWParams(J, c * eps * n / math.sqrt(J * math.log(T * T + 1)),
                      min(1.0, f * math.sqrt(2 * math.log(T) / J)))
        errs = [enumerate_envelope(cw, g, p, eps, selections=J - 1, f_x=wl.answers(x),
                                   sample=False).expected_error for x, g in zip(dbs, groups,
                                                                               strict=True)]
        scores.append((float(np.mean(errs)), float(np.max(errs)), J, c, f))
    scores.sort()
    for s in scores[:5]:
        print(f"envelope J={s[2]} c={s[3]} f={s[4]}: mean {s[0]:.3f} max {s[1]:.3f}")
    rule = next(i for i, s in enumerate(scores) if (s[2], s[3], s[4]) == (10, 2, 2))
    print(f"the practical rule (J=10, c=2, f=2) ranks {rule + 1} of {len(scores)}: "
          f"mean {scores[rule][0]:.3f}")
    best = min((float(np.mean([enumerate_envelope(
        cw, center_only_groups(cw, x), pmw_parameters(T, n, eps, wl.query_range, J), eps,
        selections=J - 1, f_x=wl.answers(x), sample=False).expected_error for x in dbs])), J)
        for J in range(2, 9))
    print(f"best pure PMW: J={best[1]} mean {best[0]:.3f}")


if __name__ == "__main__":
    main()

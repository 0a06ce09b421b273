"""An Opacus ``IAccountant`` backed by dpsieve's DP-SGD accountant.

One line switches an existing Opacus training script::

    engine = PrivacyEngine()
    engine.accountant = DpsieveAccountant()        # after PrivacyEngine(), before make_private

``step(noise_multiplier, sample_rate)`` is called by Opacus after each optimizer step;
``get_epsilon(delta)`` returns dpsieve's certified upper bound (both directions composed
separately). Opacus' ``make_private_with_epsilon`` calibrates with its own accountants by
name; calibrate with :func:`dpsieve.training.dpsgd_sigma_for` and pass the noise multiplier
to ``make_private`` instead. The accounting assumes Poisson sampling (Opacus' default,
``poisson_sampling=True``); with fixed-size batches the numbers do not apply.
Needs ``torch`` and ``opacus`` (``pip install dpsieve[train]``); the core never imports them.
"""

from __future__ import annotations

from typing import Any

from opacus.accountants import IAccountant

from dpsieve.training.accountant import DPSGDAccountant

__all__ = ["DpsieveAccountant"]


class DpsieveAccountant(IAccountant):  # type: ignore[misc]
    """Opacus accountant interface; ``history`` holds (noise_multiplier, sample_rate, steps)."""

    def __init__(self, *, grid: float | None = None) -> None:
        self.history: list[tuple[float, float, int]] = []
        self._grid = grid

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one step (validated now: a bad value fails here, not at reporting time)."""
        full = sample_rate == 1.0
        DPSGDAccountant(grid=self._grid).step(
            noise_multiplier, sample_rate, sampling="full_batch" if full else "poisson"
        )
        if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
            s, q, n = self.history[-1]
            self.history[-1] = (s, q, n + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def accountant(self) -> DPSGDAccountant:
        """The history as a :class:`DPSGDAccountant`."""
        acc = DPSGDAccountant(grid=self._grid)
        for s, q, n in self.history:
            acc.step(s, q, count=n, sampling="full_batch" if q == 1.0 else "poisson")
        return acc

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """An upper bound on epsilon at ``delta`` for the steps taken (certified)."""
        return self.accountant().epsilon(delta)

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        return "dpsieve_pld"

"""An Opacus ``IAccountant`` backed by dpsieve's DP-SGD accountant.

One line switches an existing Opacus training script::

    engine = PrivacyEngine()
    engine.accountant = DpsieveAccountant()        # after PrivacyEngine(), before make_private

``step(noise_multiplier, sample_rate)`` is called by Opacus after each optimizer step;
``get_epsilon(delta)`` returns dpsieve's certified upper bound (both directions composed
separately, incrementally: a few milliseconds a step). ``make_private_with_epsilon`` works
too: importing this module registers the accountant under its mechanism name
(``"dpsieve_pld"``), so Opacus' calibration bisects over dpsieve's certified eps.

What cannot be accounted is refused, never accounted as something else:

* fixed-size, shuffled batches (``make_private(..., poisson_sampling=False)``): their privacy
  is not that of Poisson subsampling (Chua et al. 2024) and we prove no PLD for them; the
  refusal (:class:`~dpsieve.errors.UnsupportedError`) comes from ``make_private`` itself,
  before any step;
* an accountant assigned *after* ``make_private``: Opacus' optimizer keeps calling the
  accountant it was given, so this one would record nothing and report eps 0;
  ``get_epsilon`` on an accountant that no optimizer was ever given and that recorded
  nothing raises instead.

Needs ``torch`` and ``opacus`` (``pip install dpsieve[train]``); the core never imports them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from opacus import PrivacyEngine
from opacus.accountants import IAccountant, register_accountant

from dpsieve.errors import UnsupportedError
from dpsieve.training.accountant import DPSGDAccountant

__all__ = ["DpsieveAccountant"]

_FIXED_SIZE = (
    "make_private(poisson_sampling=False): fixed-size, shuffled batches are not accounted "
    "by dpsieve: their privacy is not that of Poisson subsampling (Chua et al. 2024, 'How "
    "private are DP-SGD implementations?') and no PLD is proved for them here. Use "
    "poisson_sampling=True (Opacus' default)."
)
_UNATTACHED = (
    "this DpsieveAccountant was never given to an optimizer and recorded no step: Opacus "
    "attaches the accountant the engine holds when make_private runs, so an accountant "
    "assigned afterwards records nothing (its eps would read 0). Assign "
    "engine.accountant = DpsieveAccountant() before make_private (or make_private_with_"
    "epsilon), or record steps with step()."
)


class DpsieveAccountant(IAccountant):  # type: ignore[misc]
    """Opacus accountant interface; ``history`` holds (noise_multiplier, sample_rate, steps)."""

    def __init__(self, *, grid: float | None = None) -> None:
        self.history: list[tuple[float, float, int]] = []
        self._grid = grid
        self._attached = False
        self._acc = DPSGDAccountant(grid=grid, incremental=True)
        self._seen: list[tuple[float, float, int]] = []

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

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """Opacus' hook (called by ``make_private``): refuses fixed-size batches first."""
        _refuse_fixed_size_batches()
        self._attached = True
        hook: Callable[[Any], None] = super().get_optimizer_hook_fn(sample_rate)
        return hook

    def accountant(self) -> DPSGDAccountant:
        """The history as a :class:`DPSGDAccountant` (kept between calls: when the history
        only grew, the new steps are composed onto what was composed before)."""
        seen = self._seen
        if not _extends(seen, self.history):  # replaced (a checkpoint, Opacus' calibration)
            self._acc = DPSGDAccountant(grid=self._grid, incremental=True)
            seen = []
        for i, (s, q, n) in enumerate(self.history):
            done = seen[i][2] if i < len(seen) else 0
            if n > done:
                self._acc.step(s, q, count=n - done,
                               sampling="full_batch" if q == 1.0 else "poisson")
        self._seen = list(self.history)
        return self._acc

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """An upper bound on epsilon at ``delta`` for the steps taken (certified)."""
        if not self.history and not self._attached:
            raise UnsupportedError(_UNATTACHED)
        return self.accountant().epsilon(delta)

    def __len__(self) -> int:
        return len(self.history)

    @classmethod
    def mechanism(cls) -> str:
        return "dpsieve_pld"


def _extends(seen: list[tuple[float, float, int]], now: list[tuple[float, float, int]]) -> bool:
    """Whether ``now`` is ``seen`` with steps added (the last run longer, or runs appended)."""
    if len(seen) > len(now) or any(seen[i] != now[i] for i in range(len(seen) - 1)):
        return False
    if not seen:
        return True
    last, same = seen[-1], now[len(seen) - 1]
    return last[:2] == same[:2] and last[2] <= same[2]


def _refuse_fixed_size_batches() -> None:
    """Raise if the caller is ``PrivacyEngine.make_private`` with ``poisson_sampling=False``.

    The accountant sees only the sample rate; which loader Opacus built is a local of the
    ``make_private`` call that asks for the hook (Opacus 1.6, pinned by the ``train`` extra;
    an optimizer hooked up by hand is not inspected)."""
    frame = inspect.currentframe()
    try:
        for _ in range(8):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return
            if frame.f_code.co_name == "make_private" and isinstance(
                frame.f_locals.get("self"), PrivacyEngine
            ):
                if frame.f_locals.get("poisson_sampling") is False:
                    raise UnsupportedError(_FIXED_SIZE)
                return
    finally:
        del frame


register_accountant(DpsieveAccountant.mechanism(), DpsieveAccountant, force=True)

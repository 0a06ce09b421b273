"""A ``dp_accounting.PrivacyAccountant`` backed by dpsieve's DP-SGD accountant.

Existing code switches with one line::

    accountant = DpsievePrivacyAccountant()      # was dp_accounting.pld.PLDAccountant()
    accountant.compose(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)
    eps = accountant.get_epsilon(1e-5)

Supported (add/remove neighbours only): ``PoissonSampledDpEvent(q, GaussianDpEvent(s))``,
``GaussianDpEvent(s)`` (a full-batch step), ``NoOpDpEvent``, and ``SelfComposedDpEvent`` /
``ComposedDpEvent`` of supported events. Everything else is refused through the library's
own ``supports()``/``compose()`` protocol (``UnsupportedEventError``, nothing recorded):
sampling without replacement, Laplace, non-private events, replace-one relations. Needs
``dp-accounting`` (``pip install dpsieve[train]``); the dpsieve core never imports it.
"""

from __future__ import annotations

from typing import Any

from dp_accounting import dp_event, privacy_accountant

from dpsieve.training.accountant import DPSGDAccountant

__all__ = ["DpsievePrivacyAccountant"]

_Rel = privacy_accountant.NeighboringRelation
_Err = privacy_accountant.PrivacyAccountant.CompositionErrorDetails


class DpsievePrivacyAccountant(privacy_accountant.PrivacyAccountant):  # type: ignore[misc]
    """dp_accounting's accountant interface; certified upper bounds from dpsieve."""

    def __init__(
        self,
        neighboring_relation: Any = _Rel.ADD_OR_REMOVE_ONE,
        *,
        grid: float | None = None,
    ) -> None:
        super().__init__(neighboring_relation)
        self._acc = DPSGDAccountant(grid=grid, incremental=True)

    @property
    def dpsieve_accountant(self) -> DPSGDAccountant:
        """The underlying :class:`DPSGDAccountant` (its history, its PLDs)."""
        return self._acc

    def _maybe_compose(self, event: Any, count: int, do_compose: bool) -> Any:
        if self.neighboring_relation is not _Rel.ADD_OR_REMOVE_ONE:
            return _Err(event, "dpsieve accounts add/remove neighbours only")
        if isinstance(event, dp_event.NoOpDpEvent):
            return None
        if isinstance(event, dp_event.SelfComposedDpEvent):
            return self._maybe_compose(event.event, event.count * count, do_compose)
        if isinstance(event, dp_event.ComposedDpEvent):
            for e in event.events:  # check everything before composing anything
                err = self._maybe_compose(e, count, False)
                if err is not None:
                    return err
            if do_compose:
                for e in event.events:
                    self._maybe_compose(e, count, True)
            return None
        if isinstance(event, dp_event.GaussianDpEvent):
            return self._gauss(event, event.noise_multiplier, 1.0, count, do_compose)
        if isinstance(event, dp_event.PoissonSampledDpEvent):
            inner = event.event
            if not isinstance(inner, dp_event.GaussianDpEvent):
                return _Err(event, "only Poisson-sampled Gaussian events are supported")
            return self._gauss(event, inner.noise_multiplier, event.sampling_probability, count,
                               do_compose)
        return _Err(event, f"{type(event).__name__} is not supported by dpsieve's accountant")

    def _gauss(self, event: Any, sigma: Any, q: Any, count: int, do_compose: bool) -> Any:
        try:
            sigma, q = float(sigma), float(q)
        except (TypeError, ValueError):
            return _Err(event, "noise multiplier and sampling probability must be numbers")
        if q == 0.0 or sigma == float("inf"):
            return None  # nothing is released about anyone
        if not (sigma > 0 and 0.0 < q <= 1.0):
            return _Err(event, "need noise_multiplier > 0 and 0 < sampling_probability <= 1")
        if do_compose and count > 0:
            self._acc.step(sigma, q, count=count, sampling="full_batch" if q == 1.0 else "poisson")
        return None

    def get_epsilon(self, target_delta: float) -> float:
        """An upper bound on epsilon at ``target_delta`` (certified)."""
        return self._acc.epsilon(target_delta)

    def get_delta(self, target_epsilon: float) -> float:
        """An upper bound on delta at ``target_epsilon`` (certified)."""
        return self._acc.delta(target_epsilon)

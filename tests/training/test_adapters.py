"""The Opacus and dp_accounting adapters, against the real packages (CPU torch)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from dpsieve.training import DPSGDAccountant


def test_core_never_imports_torch_or_opacus() -> None:
    code = (
        "import sys, dpsieve, dpsieve.training, dpsieve.filters, dpsieve.mechanisms; "
        "print([m for m in ('torch', 'opacus', 'dp_accounting') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_dp_accounting_adapter_matches_the_accountant_and_the_library() -> None:
    dpe = pytest.importorskip("dp_accounting.dp_event")
    pld_acc = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")
    from dpsieve.training.dp_accounting_adapter import DpsievePrivacyAccountant

    ev = dpe.PoissonSampledDpEvent(0.02, dpe.GaussianDpEvent(1.2))
    ours = DpsievePrivacyAccountant().compose(ev, 300)
    ref = pld_acc.PLDAccountant(value_discretization_interval=1e-4).compose(ev, 300)
    direct = DPSGDAccountant()
    direct.step(1.2, 0.02, count=300)
    e = ours.get_epsilon(1e-5)
    assert e == direct.epsilon(1e-5)
    assert abs(e - ref.get_epsilon(1e-5)) < 2e-3
    assert ours.get_delta(1.0) == pytest.approx(ref.get_delta(1.0), rel=1e-2)
    # composed and self-composed events, a full-batch Gaussian, a no-op
    comp = dpe.ComposedDpEvent(
        [dpe.SelfComposedDpEvent(ev, 100), dpe.GaussianDpEvent(8.0), dpe.NoOpDpEvent()]
    )
    a = DpsievePrivacyAccountant().compose(comp, 3)
    b = DPSGDAccountant()
    b.step(1.2, 0.02, count=300)
    b.step(8.0, 1.0, count=3, sampling="full_batch")
    assert a.get_epsilon(1e-6) == b.epsilon(1e-6)
    assert a.ledger == dpe.SelfComposedDpEvent(comp, 3)  # the event recorded, as given


def test_dp_accounting_adapter_refuses_what_it_does_not_support() -> None:
    dpe = pytest.importorskip("dp_accounting.dp_event")
    pa = pytest.importorskip("dp_accounting.privacy_accountant")
    from dpsieve.training.dp_accounting_adapter import DpsievePrivacyAccountant

    acc = DpsievePrivacyAccountant()
    bad = [
        dpe.SampledWithoutReplacementDpEvent(1000, 10, dpe.GaussianDpEvent(1.0)),
        dpe.LaplaceDpEvent(1.0),
        dpe.NonPrivateDpEvent(),
        dpe.PoissonSampledDpEvent(0.1, dpe.LaplaceDpEvent(1.0)),
        dpe.ComposedDpEvent([dpe.GaussianDpEvent(1.0), dpe.LaplaceDpEvent(1.0)]),
    ]
    for ev in bad:
        assert not acc.supports(ev)
        with pytest.raises(pa.UnsupportedEventError):
            acc.compose(ev)
    assert acc.get_epsilon(1e-5) == 0.0  # nothing was recorded by the refused composites
    ro = DpsievePrivacyAccountant(pa.NeighboringRelation.REPLACE_ONE)
    assert not ro.supports(dpe.GaussianDpEvent(1.0))


def test_opacus_adapter_in_a_real_training_loop() -> None:
    torch = pytest.importorskip("torch")
    opacus = pytest.importorskip("opacus")
    from dpsieve.training.opacus_adapter import DpsieveAccountant

    torch.manual_seed(0)
    x = torch.randn(256, 5)
    y = (x[:, 0] > 0).long()
    ds = torch.utils.data.TensorDataset(x, y)
    loader = torch.utils.data.DataLoader(ds, batch_size=32)
    model = torch.nn.Linear(5, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = opacus.PrivacyEngine()
    engine.accountant = DpsieveAccountant()
    model, opt, loader = engine.make_private(
        module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.1, max_grad_norm=1.0
    )
    steps = 0
    for _ in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            steps += 1
    acc = engine.accountant
    assert isinstance(acc, DpsieveAccountant)
    assert sum(n for _, _, n in acc.history) == steps
    eps = engine.get_epsilon(1e-5)
    direct = DPSGDAccountant()
    direct.step(1.1, 32 / 256, count=steps)
    assert eps == pytest.approx(direct.epsilon(1e-5))
    prv = opacus.accountants.PRVAccountant()
    for _ in range(steps):
        prv.step(noise_multiplier=1.1, sample_rate=32 / 256)
    assert abs(eps - prv.get_epsilon(1e-5)) < 0.05  # PRV's upper bound has eps_error 0.01
    state = acc.state_dict()
    again = DpsieveAccountant()
    again.load_state_dict(state)
    assert again.history == acc.history


def test_opacus_adapter_validates_each_step() -> None:
    pytest.importorskip("opacus")
    from dpsieve.errors import ValidationError
    from dpsieve.training.opacus_adapter import DpsieveAccountant

    acc = DpsieveAccountant()
    with pytest.raises(ValidationError, match="sigma"):
        acc.step(noise_multiplier=-1.0, sample_rate=0.1)
    assert acc.history == []
    assert DpsieveAccountant.mechanism() == "dpsieve_pld"
    acc.step(noise_multiplier=1.0, sample_rate=0.1)
    assert acc.get_epsilon(1e-5) > 0.0


def _opacus_setup(torch: Any, n: int = 256, batch: int = 32) -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    x = torch.randn(n, 5)
    y = (x[:, 0] > 0).long()
    ds = torch.utils.data.TensorDataset(x, y)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True)
    model = torch.nn.Linear(5, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), loader


def _train(torch: Any, model: Any, opt: Any, loader: Any, steps: int) -> int:
    taken = 0
    while taken < steps:
        for xb, yb in loader:
            if taken >= steps:
                break
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            taken += 1
    return taken


def test_opacus_fixed_size_batches_are_refused_before_any_step() -> None:
    """poisson_sampling=False (fixed-size, shuffled batches) was accounted as Poisson without
    a word (eps 2.3452 after 50 steps): make_private now refuses it."""
    torch = pytest.importorskip("torch")
    opacus = pytest.importorskip("opacus")
    from dpsieve.errors import UnsupportedError
    from dpsieve.training.opacus_adapter import DpsieveAccountant

    model, opt, loader = _opacus_setup(torch)
    engine = opacus.PrivacyEngine()
    engine.accountant = DpsieveAccountant()
    with pytest.raises(UnsupportedError, match="poisson_sampling=False"):
        engine.make_private(module=model, optimizer=opt, data_loader=loader,
                            noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)
    model, opt, loader = _opacus_setup(torch)  # Opacus hooked the first model already
    with pytest.raises(UnsupportedError, match="poisson_sampling=False"):
        engine.make_private_with_epsilon(
            module=model, optimizer=opt, data_loader=loader, target_epsilon=3.0,
            target_delta=1e-5, epochs=1, max_grad_norm=1.0, poisson_sampling=False)


def test_opacus_accountant_assigned_after_make_private_is_refused() -> None:
    """An accountant assigned after make_private recorded nothing and reported eps 0.0 after
    50 steps (Opacus' optimizer keeps the accountant it was given): get_epsilon raises."""
    torch = pytest.importorskip("torch")
    opacus = pytest.importorskip("opacus")
    from dpsieve.errors import UnsupportedError
    from dpsieve.training.opacus_adapter import DpsieveAccountant

    model, opt, loader = _opacus_setup(torch)
    engine = opacus.PrivacyEngine()
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                             noise_multiplier=1.0, max_grad_norm=1.0)
    engine.accountant = DpsieveAccountant()
    _train(torch, model, opt, loader, 50)
    with pytest.raises(UnsupportedError, match="before make_private"):
        engine.get_epsilon(1e-5)


def test_opacus_make_private_with_epsilon_works_with_an_instance() -> None:
    """make_private_with_epsilon with a DpsieveAccountant instance raised 'Unexpected
    accounting mechanism: dpsieve_pld'; it now calibrates on dpsieve's certified eps, and
    the run it plans meets the target."""
    torch = pytest.importorskip("torch")
    opacus = pytest.importorskip("opacus")
    from dpsieve.training.opacus_adapter import DpsieveAccountant

    model, opt, loader = _opacus_setup(torch)
    engine = opacus.PrivacyEngine()
    engine.accountant = DpsieveAccountant()
    model, opt, loader = engine.make_private_with_epsilon(
        module=model, optimizer=opt, data_loader=loader, target_epsilon=2.0,
        target_delta=1e-5, epochs=2, max_grad_norm=1.0)
    steps = _train(torch, model, opt, loader, 2 * len(loader))
    acc = engine.accountant
    assert isinstance(acc, DpsieveAccountant)
    assert sum(n for _, _, n in acc.history) == steps
    eps = engine.get_epsilon(1e-5)
    assert 1.95 <= eps <= 2.0  # certified at most the target, within Opacus' 0.01 tolerance
    direct = DPSGDAccountant()
    direct.step(opt.noise_multiplier, 1 / len(loader), count=steps)
    assert eps == pytest.approx(direct.epsilon(1e-5), rel=1e-9)

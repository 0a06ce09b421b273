"""Privacy values cross the query layer as typed objects, not ``Any`` (issue 12 item 1):
the charge a session spends, the calibrations a kind finishes with and the PLDs of a charge
are annotated with their types, so mypy strict checks every use. This guards the
annotations (each was ``Any`` before): a regression to ``Any`` fails here."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from dpsieve.accounting.events import PrivacyDescription
from dpsieve.accounting.pld import PLD
from dpsieve.queries import kinds
from dpsieve.queries.calibrate import Calibrated
from dpsieve.queries.prepare import PlanCharge
from dpsieve.queries.source import Ready


def _mentions_any(t: object) -> bool:
    return t is Any or any(_mentions_any(a) for a in typing.get_args(t))


@pytest.mark.parametrize(("obj", "name", "want"), [
    (Ready, "charge", PrivacyDescription),
    (Ready, "requested", PrivacyDescription),
    (Calibrated.pld, "return", PLD | None),
    (PlanCharge.pld, "return", PLD | None),
])
def test_privacy_values_are_typed(obj: Any, name: str, want: object) -> None:
    hints = typing.get_type_hints(obj, vars(__import__(obj.__module__, fromlist=["_"])))
    assert hints[name] == want


def test_kinds_finish_with_typed_calibrations() -> None:
    args = typing.get_args(kinds.Finish)
    assert args, kinds.Finish
    calibrations = args[0][1]
    assert typing.get_args(calibrations) == (str, Calibrated)
    assert not _mentions_any(calibrations)

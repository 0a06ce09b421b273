"""Parsing a budget's stored filter text: the default loader and the memo of initial
filters (used by the stores, :mod:`dpsieve.ledger.sql` and :mod:`dpsieve.ledger.memory`).

Kept apart from :mod:`dpsieve.ledger.base` so a store called through a helper of
``base`` (:func:`~dpsieve.ledger.base.load_filters`) calls down into this module and
never back into ``base`` (issue 27: no module entered twice on one query's route).
"""

from __future__ import annotations

from dpsieve._memo import Memo
from dpsieve.filters.base import PrivacyFilter
from dpsieve.ledger.base import FilterLoader

__all__ = ["default_loader", "parsed_initial"]


def parsed_initial(memo: Memo[PrivacyFilter], loads: FilterLoader, text: str) -> PrivacyFilter:
    """``loads(text)``, remembered in ``memo`` by the exact text (a budget's initial state
    never changes, and every summary reads it): the same text gives the same filter in
    any process, so no write elsewhere can make a hit stale. The object is shared: read
    only. Texts over 64 KiB are parsed each time (not kept)."""
    if len(text) > 65536:
        return loads(text)
    return memo.get(text, lambda: loads(text))


def default_loader(s: str) -> PrivacyFilter:
    """:func:`dpsieve.filters.filter_from_json`, imported on first use."""
    from dpsieve import filters

    loads: FilterLoader = filters.filter_from_json  # type: ignore[attr-defined,unused-ignore]
    return loads(s)

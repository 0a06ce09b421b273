"""The service's routes, one :class:`fastapi.APIRouter` per group, over the shared
dependencies of :mod:`dpsieve.service.deps`. :data:`ROUTERS` is the order
:func:`dpsieve.service.app.create_app` includes them in (the OpenAPI document lists the
paths in this order, after the query route, which goes first).

========== ==================================================================
module     routes
========== ==================================================================
meta       ``/healthz``, ``/readyz``, the budget page ``/ui``
analysts   ``/v1/me``, analysts and their keys (owner)
datasets   registration, budgets set, grants (owner); the data sets a key sees
budgets    a data set's budget page data, tradeoff curves, audit log (owner)
queries    ``POST /v1/datasets/{name}/queries``: the one query route
schema     a data set's public schema (read; replaced in place by the owner)
blocks     budgets over time: blocks, quotas, groups, the queue of waiting queries
children   interactive children of a budget: open, list, question, grant
========== ==================================================================
"""

from __future__ import annotations

from fastapi import APIRouter

from dpsieve.service.routes import (
    analysts,
    blocks,
    budgets,
    children,
    datasets,
    meta,
    queries,
    schema,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (meta.router, analysts.router, datasets.router,
                                  budgets.router, queries.router, schema.router,
                                  blocks.router, children.router)

"""The HTTP service, built by :func:`create_app` (never at import time).

Data owners (the ``owner`` key) register data sets, set budgets, create analysts and grant
them data sets; analysts query the data sets they were granted and read their budgets.
Every query goes through :class:`dpsieve.session.Session`: the filter decides and the
ledger records the spend durably before the data is read. Errors are JSON 4xx
(:mod:`dpsieve.service.errors`). A data set the key may not see answers 404 exactly like
one that does not exist.

The routes live in :mod:`dpsieve.service.routes` (one ``APIRouter`` per group) over the
shared dependencies of :mod:`dpsieve.service.deps`; :func:`create_app` assembles them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from dpsieve.ledger.base import BudgetStore
from dpsieve.ledger.factory import open_store
from dpsieve.service.deps import ServiceState
from dpsieve.service.errors import BodyLimit, install_error_handlers
from dpsieve.service.gate import Gate
from dpsieve.service.logs import RequestLog, verify_ledger
from dpsieve.service.routes import ROUTERS
from dpsieve.service.routes.meta import PAGE_HEADERS
from dpsieve.service.routes.queries import QUERY_PATH
from dpsieve.service.settings import Settings

__all__ = ["PAGE_HEADERS", "QUERY_PATH", "create_app"]


def _fastapi(**kw: Any) -> FastAPI:
    """FastAPI whose /docs and /redoc load their scripts from this server (the assets
    shipped in fastapi-offline), not a CDN: the docs work offline. Without the package
    (an old environment) the stock CDN pages are served."""
    try:
        from fastapi_offline import FastAPIOffline
    except ImportError:  # pragma: no cover - the service extra installs it
        return FastAPI(**kw)
    return FastAPIOffline(**kw)


def create_app(settings: Settings | None = None, *, store: BudgetStore | None = None) -> FastAPI:
    """A FastAPI app over ``store`` (default: the one ``settings.database_url`` names)."""
    from dpsieve import __version__

    settings = settings or Settings()
    st: BudgetStore = store or open_store(settings.database_url, schema=settings.schema)
    verify_ledger(st)  # before any request: a budget whose log or state was altered is refused

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        st.close()

    app = _fastapi(title="dpsieve", version=__version__, lifespan=lifespan,
                   description="Differentially private queries under an exact privacy filter.")
    app.state.store = st
    app.state.settings = settings
    app.state.service = ServiceState(settings, st)
    install_error_handlers(app)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(Gate)  # health probes and refused keys answered before any route
    app.add_middleware(RequestLog)
    for router in ROUTERS:  # flat: every route an APIRoute of the app, as FastAPI versions
        app.router.routes.extend(router.routes)  # from 0.110 on match and document them
    _hot_first(app, QUERY_PATH)
    return app


def _hot_first(app: FastAPI, path: str) -> None:
    """Put the routes of ``path`` first. Starlette tries routes in order (a few
    microseconds each; the query route came 19th); no two routes match one request (tested:
    tests/system/test_system_service.py), so the order decides no request's outcome, only
    how many patterns are tried. The OpenAPI document lists this path first."""
    routes = app.router.routes
    hot = [r for r in routes if getattr(r, "path", None) == path]
    routes[:] = hot + [r for r in routes if all(r is not h for h in hot)]
